package ledger

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// The pipeline's problems (issue 25, format_pipeline.go): a digest during
// which the stream's mapping did not feed the ledger as deployed, and a
// canary change that never reached the ledger. A digest without a
// "mapping" member that comes before every digest with one (written
// before the check existed) is accepted.
const (
	// KindMappingOff: the digest's run found the mapping in a state other
	// than Enabled, or found no mapping at all: the ledger was not reading
	// the stream then.
	KindMappingOff Kind = "mapping-off"
	// KindMappingChanged: the mapping was updated since the digest before
	// (its last_modified moved; an upgrade is a legitimate cause, which
	// the operator confirms), or the run found more than one mapping.
	KindMappingChanged Kind = "mapping-changed"
	// KindMappingRecreated: the mapping is another one (its UUID changed)
	// than at the digest before: a new mapping starts at its starting
	// position, so changes in between may never have been read.
	KindMappingRecreated Kind = "mapping-recreated"
	// KindMappingStream: the mapping reads another stream than the digest
	// names, or the digest names another stream than the one before.
	KindMappingStream Kind = "mapping-stream"
	// KindMappingUnread: the run could not read the mapping, or a digest
	// records none after digests that did.
	KindMappingUnread Kind = "mapping-unread"
	// KindCanaryMissing: a canary change a digest run wrote (or one
	// numbered between two that digests record) is on no anchored
	// segment, though a digest signed more than CanaryGrace after it
	// exists: the stream did not reach the ledger then.
	KindCanaryMissing Kind = "canary-missing"
)

// CanaryGrace is how long after its write a canary must be anchored by a
// later digest. A canary reaches the ledger within seconds and the next
// scheduled digest is 5 minutes later, but a shard held by a retried
// batch or a burst delivers it later: a canary is named missing only
// once it is later than LedgerAnchoringLagAlarm's 15 minutes (the alarm
// pages on the delay itself; a late canary that then arrives is no
// problem).
const CanaryGrace = 15 * time.Minute

// pipeline checks the digests' mapping and canary records.
func (v *verifier) pipeline(signed []*parsedDigest) {
	v.mappings(signed)
	v.canaries(signed)
}

func between(prev, p *parsedDigest) string {
	if prev == nil {
		return fmt.Sprintf("at digest %d (%s)", p.d.N, p.d.At)
	}
	return fmt.Sprintf("between digest %d (%s) and digest %d (%s)", prev.d.N, prev.d.At, p.d.N, p.d.At)
}

func (v *verifier) mappings(signed []*parsedDigest) {
	var prev, withMapping, single *parsedDigest // the digest before; the newest with a mapping; with exactly one
	for _, p := range signed {
		if prev != nil && prev.d.StreamARN != p.d.StreamARN {
			v.fail(KindMappingStream, p.key, "names stream %s, the digest before it %s", p.d.StreamARN, prev.d.StreamARN)
		}
		ms := p.d.Mapping
		switch {
		case ms == nil && withMapping != nil:
			v.fail(KindMappingUnread, p.key, "records no mapping, though digest %d did: the pipeline checks were off %s", withMapping.d.N, between(prev, p))
		case ms == nil:
		case ms.Error != "":
			v.fail(KindMappingUnread, p.key, "its run could not read the stream's mapping (%s) %s", ms.Error, between(prev, p))
		case len(ms.Mappings) == 0:
			v.fail(KindMappingOff, p.key, "no event source mapping fed the ledger from the stream %s", between(prev, p))
		case len(ms.Mappings) > 1:
			ids := make([]string, len(ms.Mappings))
			for i, m := range ms.Mappings {
				ids[i] = m.UUID + " " + m.State
			}
			slices.Sort(ids)
			v.fail(KindMappingChanged, p.key, "%d mappings on the stream (%s) %s", len(ms.Mappings), strings.Join(ids, ", "), between(prev, p))
		default:
			m := ms.Mappings[0]
			if m.State != MappingEnabled {
				v.fail(KindMappingOff, p.key, "mapping %s was %s %s: the ledger did not read the stream", m.UUID, m.State, between(prev, p))
			}
			if m.EventSourceARN != p.d.StreamARN {
				v.fail(KindMappingStream, p.key, "mapping %s reads %s, the digest names %s", m.UUID, m.EventSourceARN, p.d.StreamARN)
			}
			if single != nil {
				pm := single.d.Mapping.Mappings[0]
				switch {
				case m.UUID != pm.UUID:
					at := ""
					if m.StartingPosition != "" {
						at = " (starting position " + m.StartingPosition + ")"
					}
					v.fail(KindMappingRecreated, p.key, "mapping %s%s replaced %s %s: changes in between may never have been read", m.UUID, at, pm.UUID, between(single, p))
				case m.LastModified != pm.LastModified:
					v.fail(KindMappingChanged, p.key, "mapping %s was updated at %s %s (confirm it was the documented upgrade)", m.UUID, m.LastModified, between(single, p))
				}
			}
		}
		if ms != nil {
			withMapping = p
			if ms.Error == "" && len(ms.Mappings) == 1 {
				single = p
			}
			// A digest that could not read the mapping, or saw two, is
			// named above; the next single mapping is still compared with
			// the newest single one before it, so a mapping re-created
			// across such a digest is named too.
		}
		prev = p
	}
}

// canaries names every canary a digest recorded, and every number between
// the first recorded and the newest due, that no anchored entry carries.
func (v *verifier) canaries(signed []*parsedDigest) {
	arrived := v.arrived // seeEntry
	var last time.Time   // the newest signed digest's time
	for _, p := range signed {
		if at, err := time.Parse(time.RFC3339Nano, p.d.At); err == nil && at.After(last) {
			last = at
		}
	}
	recordedBy := map[int64]*parsedDigest{}
	var lo, hi int64 // the first recorded, the newest due
	for _, p := range signed {
		c := p.d.Canary
		if c == nil || c.N < 1 {
			continue
		}
		if _, ok := recordedBy[c.N]; !ok {
			recordedBy[c.N] = p
		}
		if lo == 0 || c.N < lo {
			lo = c.N
		}
		at, err := time.Parse(time.RFC3339Nano, c.At)
		if err != nil {
			v.fail(KindDigestInvalid, p.key, "canary at %q: not RFC 3339", c.At)
			continue
		}
		if last.Sub(at) > CanaryGrace {
			hi = max(hi, c.N)
		}
	}
	if hi == 0 {
		return
	}
	// Canary numbers are consecutive (each run writes the one after the
	// item's); a range far wider than the digests is checked only at the
	// numbers digests record.
	var due []int64
	if hi-lo > int64(len(signed))*4+1000 {
		for n := range recordedBy {
			if n <= hi {
				due = append(due, n)
			}
		}
		slices.Sort(due)
	} else {
		for n := lo; n <= hi; n++ {
			due = append(due, n)
		}
	}
	for _, n := range due {
		p, recorded := recordedBy[n]
		if arrived[n] {
			continue
		}
		if recorded {
			v.fail(KindCanaryMissing, p.key, "canary %d, written at %s, is on no anchored segment: the stream did not reach the ledger then", n, p.d.Canary.At)
		} else {
			v.fail(KindCanaryMissing, fmt.Sprintf("%s%d", CanaryPrefix, n), "canary %d (written between two digests' canaries) is on no anchored segment", n)
		}
	}
}

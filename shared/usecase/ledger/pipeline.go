package ledger

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"time"

	dl "github.com/dlqquarantine/dlqq/shared/domain/ledger"
)

// The pipeline check of each digest run (issue 25: a stopped ledger pages
// someone). The lag the heads give counts only changes that reached the
// ledger; with the stream's mapping disabled, re-created at LATEST or
// pointed elsewhere, nothing reaches it and that lag stays 0. So each run
//
//   - reads the stream function's mappings on the stream and records
//     what it found (or that it could not read them) in the digest, for
//     verify to name a digest during which the mapping was off, changed
//     or re-created;
//   - reads the digest function's own mappings, on any source: it has
//     none (only its schedule invokes it), so any one is a problem (logged
//     and counted, not recorded in the digest: verify has nothing to
//     check it against);
//   - writes a canary change to the table (dl.CanaryKey, a key only the
//     ledger role may write), which the stream handler ledgers like a
//     record; the head of the chain it lands on records its number
//     (ChainHead.Canary, from the segment's entries: the bucket proves it);
//   - counts as anchoring lag the age of the oldest canary written and
//     not yet arrived, so that a stopped pipeline makes
//     LedgerAnchoringLagAlarm fire.
//
// Neither a failed mapping read nor a failed canary write stops the
// digest: the digest records the failure (a mapping "error"; no canary)
// and MetricPipelineProblems counts it.

// MetricPipelineProblems counts, per digest run, what the pipeline check
// found wrong: the stream function's mapping could not be read, there is
// none or more than one, it is not Enabled or reads another stream; the
// digest function's own mappings could not be read, or it has one; or the
// canary could not be written.
const MetricPipelineProblems = "LedgerPipelineProblems"

// pipelineSeen is what a run found.
type pipelineSeen struct {
	on       bool
	mapping  *dl.MappingSeen
	canary   *dl.CanaryRef
	lag      float64 // seconds: the oldest canary not arrived
	problems int
}

func (p pipelineSeen) canaryN() int64 {
	if p.canary == nil {
		return 0
	}
	return p.canary.N
}

// same reports whether a digest would record nothing new about the
// mapping: the run writes the next digest when the mapping changed, even
// if no head moved. (The canary alone does not force one: the next run's
// heads move when it arrives.)
func (p pipelineSeen) same(prev *dl.Digest) bool {
	return !p.on || reflect.DeepEqual(prev.Mapping, p.mapping)
}

// pipeline reads the mapping and writes the next canary.
func (s *Service) pipeline(ctx context.Context, heads map[string]Head, now time.Time) pipelineSeen {
	var p pipelineSeen
	if s.Mappings != nil {
		p.on = true
		p.mapping = &dl.MappingSeen{Mappings: []dl.Mapping{}}
		ms, err := s.Mappings.Mappings(ctx)
		switch {
		case err != nil:
			p.mapping.Error = truncate(err.Error(), 300) // signed into the digest: bounded
			p.problems++
			s.log().Error("ledger could not read its stream mapping", "error", err.Error())
		default:
			p.mapping.Mappings = append(p.mapping.Mappings, ms...)
			if len(ms) != 1 || ms[0].State != dl.MappingEnabled || ms[0].EventSourceARN != s.Config.StreamARN {
				p.problems++
				s.log().Error("ledger stream mapping is not the one enabled mapping on its stream", "mappings", len(ms), "states", states(ms))
			}
		}
	}
	if s.OwnMappings != nil {
		// Only the schedule (and an operator's baseline) invokes the digest
		// function, which refuses a stream batch (DigestEntry): a mapping
		// attached to it (a stream or a queue) is not the ledger's input,
		// and someone made it.
		p.on = true
		ms, err := s.OwnMappings.Mappings(ctx)
		switch {
		case err != nil:
			p.problems++
			s.log().Error("ledger could not read the digest function's own mappings", "error", err.Error())
		case len(ms) > 0:
			p.problems++
			s.log().Error("the ledger's digest function has event source mappings: only its schedule may invoke it", "mappings", len(ms), "states", states(ms),
				"sources", sources(ms))
		}
	}
	if s.Canaries != nil {
		p.on = true
		var err error
		if p.canary, p.lag, err = s.canary(ctx, heads, now); err != nil {
			p.problems++
			s.log().Error("ledger canary not written", "error", err.Error())
		}
	}
	return p
}

func sources(ms []dl.Mapping) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.EventSourceARN
	}
	return out
}

func states(ms []dl.Mapping) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.UUID + ":" + m.State
	}
	return out
}

// canary checks the previous canaries' arrival and writes the next one,
// returning it and the age of the oldest canary not arrived (seconds). A
// write whose answer was lost is recognised by reading the item back.
func (s *Service) canary(ctx context.Context, heads map[string]Head, now time.Time) (*dl.CanaryRef, float64, error) {
	var arrived int64
	for _, h := range heads {
		arrived = max(arrived, h.Canary)
	}
	c, ok, err := s.Canaries.Canary(ctx)
	if err != nil {
		return nil, 0, err
	}
	var lagSeconds float64
	next := CanaryItem{N: max(c.N, arrived) + 1, At: now, Since: now}
	if ok && c.N > arrived {
		since := c.Since
		if since.IsZero() || since.After(c.At) {
			since = c.At
		}
		next.Since = since
		lagSeconds = max(0, now.Sub(since).Seconds())
	}
	if err := s.Canaries.WriteCanary(ctx, next, c.N); err != nil {
		got, gok, rerr := s.Canaries.Canary(ctx)
		if rerr != nil || !gok || got.N != next.N || !got.At.Equal(next.At) {
			return nil, lagSeconds, errors.Join(err, rerr)
		}
	}
	return &dl.CanaryRef{N: next.N, At: now.UTC().Format(time.RFC3339Nano)}, lagSeconds, nil
}

// segmentCanary is the highest canary number among seg's entries (0:
// none).
func segmentCanary(seg dl.Segment) int64 {
	var n int64
	for _, e := range seg.Entries {
		if c, ok := dl.CanaryOf(e); ok {
			n = max(n, c)
		}
	}
	return n
}

// emitPipeline writes MetricPipelineProblems when the check is on.
func (s *Service) emitPipeline(at time.Time, p pipelineSeen) {
	if s.Metrics == nil || !p.on {
		return
	}
	if err := writeEMF(s.Metrics, s.Config, at, MetricPipelineProblems, float64(p.problems), "Count"); err != nil {
		s.log().Warn("ledger metric not written", "error", err.Error())
	}
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "…"
}

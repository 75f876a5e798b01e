package demo

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/dlqquarantine/dlqq/shared/adapter/dynamostore"
	"github.com/dlqquarantine/dlqq/shared/adapter/s3store"
	"github.com/dlqquarantine/dlqq/shared/dev/localrunner"
	dl "github.com/dlqquarantine/dlqq/shared/domain/ledger"
	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
)

// streamChange is one ledgered change of the table's stream.
type streamChange struct {
	shard, seq, padded string
	rec                events.DynamoDBEventRecord
}

// readStream reads the table's whole stream on clean clients, apart from
// the ledger's mapping, and returns its record and policy changes.
func (s *soak) readStream(ctx context.Context) ([]streamChange, error) {
	var mu sync.Mutex
	var out []streamChange
	p := &localrunner.StreamPoller{API: s.st.Clients.DynamoDBStreams, StreamARN: s.fns.LedgerStream.StreamARN, BatchSize: 1000,
		Handler: func(_ context.Context, ev events.DynamoDBTimeWindowEvent) (events.DynamoDBTimeWindowEventResponse, error) {
			resp := events.DynamoDBTimeWindowEventResponse{}
			resp.State = map[string]string{}
			mu.Lock()
			defer mu.Unlock()
			for _, r := range ev.Records {
				key := r.Change.Keys[dl.KeyAttr]
				if key.DataType() != events.DataTypeString || !dl.Ledgered(key.String()) {
					continue
				}
				padded, err := dl.PadSeq(r.Change.SequenceNumber)
				if err != nil {
					return resp, err
				}
				out = append(out, streamChange{shard: ev.ShardID, seq: r.Change.SequenceNumber, padded: padded, rec: r})
			}
			return resp, nil
		}}
	if _, err := p.Drain(ctx); err != nil {
		return nil, fmt.Errorf("read the stream: %w", err)
	}
	return out, nil
}

// checkLedger fills the report's ledger rows: the stream against the
// records' versions, the segments against the stream, the anchoring of
// every change, the counters against every change's deltas, and the pure
// verification over the table and the bucket.
func (s *soak) checkLedger(ctx context.Context, records map[string]*quarantine.Record, changes []streamChange) error {
	rep := s.rep
	rep.StreamChanges = len(changes)
	// Versions written: every record version is one write, so the
	// versions of the records sum to the stream's version changes.
	for _, r := range records {
		rep.VersionsSum += int(r.Version)
	}
	removed := 0
	for _, c := range changes {
		if !dynamostore.IsRecordKey(c.rec.Change.Keys[dl.KeyAttr].String()) {
			continue
		}
		newer, older, err := versionsOf(c.rec)
		if err != nil {
			rep.VersionDrift = append(rep.VersionDrift, fmt.Sprintf("change %s: %v", c.seq, err))
			continue
		}
		switch {
		case c.rec.EventName == dl.EventRemove:
			removed++
		case c.rec.EventName == dl.EventInsert || newer != older:
			rep.VersionChanges++
		}
	}
	if rep.VersionsSum != rep.VersionChanges {
		rep.VersionDrift = append(rep.VersionDrift, fmt.Sprintf("the records' versions sum to %d; the stream holds %d version changes", rep.VersionsSum, rep.VersionChanges))
	}
	if removed > 0 {
		rep.VersionDrift = append(rep.VersionDrift, fmt.Sprintf("%d records removed from the table", removed))
	}

	// Versions ledgered: each change of the stream in one segment entry.
	objects := s3store.LedgerObjects{API: s.st.Clients.S3, Bucket: s.fns.LedgerConfig.Bucket}
	segs, err := readObjects(ctx, objects, dl.SegmentPrefix)
	if err != nil {
		return err
	}
	digs, err := readObjects(ctx, objects, dl.DigestPrefix)
	if err != nil {
		return err
	}
	rep.Segments, rep.Digests = len(segs), len(digs)
	type entryAt struct {
		shard, padded string
		at            time.Time
	}
	seen := map[string]int{}
	var entries []entryAt
	for _, k := range slices.Sorted(maps.Keys(segs)) {
		seg, err := dl.ParseSegment(segs[k])
		if err != nil {
			rep.LedgerProblems = append(rep.LedgerProblems, fmt.Sprintf("%s: %v", k, err))
			continue
		}
		for _, e := range seg.Entries {
			if dl.IsCanary(e.Key) {
				continue // the digest runs' canary, not a change of the stream read above
			}
			p, err := dl.PadSeq(e.Seq)
			if err != nil {
				rep.LedgerProblems = append(rep.LedgerProblems, fmt.Sprintf("%s: %v", k, err))
				continue
			}
			rep.Ledgered++
			seen[seg.Shard+"/"+p]++
			at, _ := time.Parse(time.RFC3339Nano, e.At)
			entries = append(entries, entryAt{seg.Shard, p, at})
		}
	}
	inStream := map[string]bool{}
	for _, c := range changes {
		k := c.shard + "/" + c.padded
		inStream[k] = true
		if seen[k] == 0 {
			rep.LedgerMissing = append(rep.LedgerMissing, fmt.Sprintf("%s %s of %s: in no segment", c.rec.EventName, k, c.rec.Change.Keys[dl.KeyAttr].String()))
		}
	}
	for _, k := range slices.Sorted(maps.Keys(seen)) {
		if seen[k] > 1 {
			rep.LedgerDuplicates = append(rep.LedgerDuplicates, fmt.Sprintf("%s: in %d entries", k, seen[k]))
		}
		if !inStream[k] {
			rep.LedgerExtra = append(rep.LedgerExtra, k+": not in the stream")
		}
	}

	// Anchoring: each change to the first digest whose heads cover it.
	var digests []dl.Digest
	for _, k := range slices.Sorted(maps.Keys(digs)) {
		d, err := dl.ParseDigest(digs[k])
		if err != nil {
			rep.LedgerProblems = append(rep.LedgerProblems, fmt.Sprintf("%s: %v", k, err))
			continue
		}
		digests = append(digests, d)
	}
	slices.SortFunc(digests, func(a, b dl.Digest) int { return int(a.N - b.N) })
	for _, e := range entries {
		anchored := false
		for _, d := range digests {
			if coversSeq(d, e.shard, e.padded) {
				at, _ := time.Parse(time.RFC3339Nano, d.At)
				rep.Lags = append(rep.Lags, at.Sub(e.at))
				anchored = true
				break
			}
		}
		if !anchored {
			rep.Unanchored = append(rep.Unanchored, e.shard+"/"+e.padded+": no digest covers it")
		}
	}
	slices.Sort(rep.Lags)
	if len(rep.Lags) > 0 && rep.Lags[0] < 0 {
		rep.Unanchored = append(rep.Unanchored, fmt.Sprintf("a change anchored by a digest %s older than it", -rep.Lags[0]))
	}

	if err := s.checkCounted(ctx, changes); err != nil {
		return err
	}
	return s.verifyLedger(ctx, segs, digs)
}

// versionsOf reads the version of a change's new and old images (0 when
// absent).
func versionsOf(rec events.DynamoDBEventRecord) (newer, older int64, err error) {
	for _, x := range []struct {
		img map[string]events.DynamoDBAttributeValue
		v   *int64
	}{{rec.Change.NewImage, &newer}, {rec.Change.OldImage, &older}} {
		if x.img == nil {
			continue
		}
		it, err := dynamostore.LedgerItemFromStream(x.img)
		if err != nil {
			return 0, 0, err
		}
		*x.v, _ = it.Int(dl.VersionAttr)
	}
	return newer, older, nil
}

// coversSeq reports whether digest d's head of shard is at or past seq.
func coversSeq(d dl.Digest, shard, padded string) bool {
	for _, h := range d.Shards {
		if h.Shard != shard {
			continue
		}
		last, err := dl.PadSeq(h.LastSeq)
		return err == nil && last >= padded
	}
	return false
}

func readObjects(ctx context.Context, o s3store.LedgerObjects, prefix string) (map[string][]byte, error) {
	keys, err := o.List(ctx, prefix, "")
	if err != nil {
		return nil, err
	}
	out := make(map[string][]byte, len(keys))
	for _, k := range keys {
		if out[k], err = o.Get(ctx, k); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// checkCounted recounts every counter the stream's changes touch, each
// change's deltas once, and compares the counters the ledger wrote.
func (s *soak) checkCounted(ctx context.Context, changes []streamChange) error {
	want := map[quarantine.CounterKey]int64{}
	for _, c := range changes {
		if !dynamostore.IsRecordKey(c.rec.Change.Keys[dl.KeyAttr].String()) {
			continue
		}
		older, oldHold, err := recordOf(c.rec.Change.OldImage)
		if err == nil {
			var newer *quarantine.Record
			var newHold *quarantine.IntegrityHold
			if newer, newHold, err = recordOf(c.rec.Change.NewImage); err == nil {
				for _, d := range quarantine.ChangeDeltas(older, newer, oldHold, newHold) {
					k := d.CounterKey
					k.Shard = 0 // the ledger counts it in its stream shard's counter shard
					want[k] += d.N
				}
			}
		}
		if err != nil {
			s.rep.CountedDrift = append(s.rep.CountedDrift, fmt.Sprintf("change %s: %v", c.seq, err))
		}
	}
	// Readers sum a counter's shards: so does the check.
	keys := slices.Collect(maps.Keys(want))
	var shards []quarantine.CounterKey
	for _, k := range keys {
		for i := range quarantine.CounterShards {
			k.Shard = i
			shards = append(shards, k)
		}
	}
	got, err := dynamostore.New(s.st.Clients.DynamoDB, s.fns.IngestConfig.TableName).ReadCounters(ctx, shards)
	if err != nil {
		return err
	}
	sums := map[quarantine.CounterKey]int64{}
	for k, n := range got {
		k.Shard = 0
		sums[k] += n
	}
	s.rep.CountedKeys = len(keys)
	for _, k := range keys {
		if sums[k] != want[k] {
			s.rep.CountedDrift = append(s.rep.CountedDrift, fmt.Sprintf("%s: counter %d, the stream's changes %d", dynamostore.CounterItemKey(k), sums[k], want[k]))
		}
	}
	slices.Sort(s.rep.CountedDrift)
	return nil
}

// recordOf decodes a stream image into a record and its hold (nil, nil
// without an image).
func recordOf(img map[string]events.DynamoDBAttributeValue) (*quarantine.Record, *quarantine.IntegrityHold, error) {
	if img == nil {
		return nil, nil, nil
	}
	item, err := dynamostore.FromStreamImage(img)
	if err != nil {
		return nil, nil, err
	}
	r, err := dynamostore.Unmarshal(item)
	if err != nil {
		return nil, nil, err
	}
	if h, ok := dynamostore.HoldOf(item); ok {
		return r, &h, nil
	}
	return r, nil, nil
}

// verifyLedger runs the pure verification over the table (a consistent
// scan) and the bucket's segments and digests, with the signing key's
// public part.
func (s *soak) verifyLedger(ctx context.Context, segs, digs map[string][]byte) error {
	in := dl.Input{Segments: segs, Digests: digs, Now: time.Now()}
	if err := ledgerInput(ctx, s.st, s.fns, &in); err != nil {
		return err
	}
	res := dl.Verify(in)
	for _, pr := range res.Problems {
		s.rep.LedgerProblems = append(s.rep.LedgerProblems, pr.String())
	}
	if res.Unanchored > 0 {
		s.rep.LedgerProblems = append(s.rep.LedgerProblems, fmt.Sprintf("verify: %d changes not yet anchored after the last digest", res.Unanchored))
	}
	if res.Entries != s.rep.Ledgered {
		s.rep.LedgerProblems = append(s.rep.LedgerProblems, fmt.Sprintf("verify read %d entries, the segments hold %d", res.Entries, s.rep.Ledgered))
	}
	s.rep.Verified = res
	return nil
}

// lagAt is the q-quantile (0..1) of the sorted lags.
func lagAt(lags []time.Duration, q float64) time.Duration {
	if len(lags) == 0 {
		return 0
	}
	i := int(q*float64(len(lags))+0.5) - 1
	return lags[min(max(i, 0), len(lags)-1)]
}

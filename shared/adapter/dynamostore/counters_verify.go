package dynamostore

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/dlqquarantine/dlqq/shared/domain/ledger"
	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
)

// The counters' side of verify (ledger.RecountCounters): the table's
// layout of counters and checkpoints, and the ledger's counting, for the
// pure recount.

// IsCounterKey reports whether a table key is a counter shard's.
func IsCounterKey(id string) bool { return strings.HasPrefix(id, counterKeyPrefix) }

// IsCountCheckpointKey reports whether a table key is a counters'
// checkpoint (LedgerCountKey).
func IsCountCheckpointKey(id string) bool { return strings.HasPrefix(id, LedgerCountPrefix) }

// SegmentCounterChunks are a segment's counter deltas in the chunks Count
// applies them in (at least one, maybe empty), by counter item key.
func SegmentCounterChunks(seg ledger.Segment) ([][]ledger.CounterDelta, error) {
	chunks, err := segmentChunks(seg)
	if err != nil {
		return nil, err
	}
	out := make([][]ledger.CounterDelta, len(chunks))
	for i, c := range chunks {
		out[i] = counterDeltas(c)
	}
	return out, nil
}

func counterDeltas(ds []quarantine.CounterDelta) []ledger.CounterDelta {
	out := make([]ledger.CounterDelta, 0, len(ds))
	for _, d := range ds {
		out = append(out, ledger.CounterDelta{Key: CounterItemKey(d.CounterKey), N: d.N})
	}
	return out
}

// StartCounterDeltas are what an item counted before the ledger started
// (a baseline's item): a record in its state counter, in its open counter
// when QUARANTINED, and a held record in its source's held counter. The
// counters of events (time buckets, policies' replays) have no starting
// point in an item.
func StartCounterDeltas(it ledger.Item) ([]ledger.CounterDelta, error) {
	if !IsRecordKey(it.S(KeyAttr)) {
		return nil, nil
	}
	r, hold, err := entryRecord(it)
	if err != nil {
		return nil, err
	}
	var ds []quarantine.CounterDelta
	for _, d := range quarantine.RemoveDeltas(r) {
		ds = append(ds, quarantine.CounterDelta{CounterKey: d.CounterKey, N: -d.N})
	}
	if hold != nil {
		ds = append(ds, quarantine.HoldDeltas(r.DLQID, hold.At)[0]) // the held counter, not the minute's
	}
	return counterDeltas(ds), nil
}

// bucketKinds are the time-bucket counter kinds.
var bucketKinds = map[string]bool{
	quarantine.CounterArrivals: true, quarantine.CounterCameBack: true, quarantine.CounterResolved: true,
	quarantine.CounterPoisoned: true, quarantine.CounterNewHeld: true,
}

// CounterKeyInfo reads a counter item key as CounterItemKey writes it:
// #ctr#<source>#<kind>#...#<shard>. False: not a key of a counter kind.
func CounterKeyInfo(key string) (ledger.CounterInfo, bool) {
	rest, ok := strings.CutPrefix(key, counterKeyPrefix)
	if !ok {
		return ledger.CounterInfo{}, false
	}
	parts := strings.Split(rest, "#")
	if len(parts) < 3 {
		return ledger.CounterInfo{}, false
	}
	if n, err := strconv.Atoi(parts[len(parts)-1]); err != nil || n < 0 || n >= quarantine.CounterShards {
		return ledger.CounterInfo{}, false
	}
	kind := parts[1]
	switch {
	case bucketKinds[kind]:
		if len(parts) != 4 {
			return ledger.CounterInfo{}, false
		}
		b, err := time.Parse(bucketLayout, parts[2])
		if err != nil {
			return ledger.CounterInfo{}, false
		}
		return ledger.CounterInfo{Bucket: b, Expires: b.Add(bucketTTL), Events: true}, true
	case kind == quarantine.CounterPolicySent || kind == quarantine.CounterPolicyCameBack:
		return ledger.CounterInfo{Events: true}, true
	case kind == quarantine.CounterState, kind == quarantine.CounterOpen, kind == quarantine.CounterHeld:
		return ledger.CounterInfo{}, true
	}
	return ledger.CounterInfo{}, false
}

// TableCounters reads the counter items and the counters' checkpoints
// from the table's items (other items are skipped): counters by key,
// checkpoints by shard. A counter whose count is not a whole number, or a
// checkpoint that does not read, is a problem (Kind counter-drift,
// counter-checkpoint).
func TableCounters(items []ledger.Item) (map[string]int64, map[string]ledger.CounterPos, []ledger.Problem) {
	counters, checkpoints := map[string]int64{}, map[string]ledger.CounterPos{}
	var probs []ledger.Problem
	for _, it := range items {
		key := it.S(KeyAttr)
		switch {
		case IsCounterKey(key):
			n, ok := int64(0), true
			if _, present := it[CounterAttr]; present {
				n, ok = it.Int(CounterAttr)
			}
			if !ok {
				probs = append(probs, ledger.Problem{Kind: ledger.KindCounterDrift, Subject: key, Detail: "its count " + CounterAttr + " is not a whole number"})
				continue
			}
			counters[key] = n
		case IsCountCheckpointKey(key):
			pos, err := checkpointOf(it)
			if err != nil {
				probs = append(probs, ledger.Problem{Kind: ledger.KindCounterCheckpoint, Subject: key, Detail: err.Error()})
				continue
			}
			checkpoints[strings.TrimPrefix(key, LedgerCountPrefix)] = pos
		}
	}
	return counters, checkpoints, probs
}

// checkpointOf reads a checkpoint item as Counts.position does.
func checkpointOf(it ledger.Item) (ledger.CounterPos, error) {
	if _, old := it[LedgerCountSeqAttr]; old {
		return ledger.CounterPos{}, fmt.Errorf("holds %s (the old format)", LedgerCountSeqAttr)
	}
	seg, ok1 := it.Int(countSegmentAttr)
	chunk, ok2 := it.Int(countChunkAttr)
	done, ok3 := it[countDoneAttr]
	if !ok1 || !ok2 || !ok3 || done.BOOL == nil {
		return ledger.CounterPos{}, errors.New("without a whole " + countSegmentAttr + ", " + countChunkAttr + " or a boolean " + countDoneAttr)
	}
	return ledger.CounterPos{Segment: seg, Chunk: chunk, Done: *done.BOOL}, nil
}

// LedgerSegmentHeaders are what a Verify keeps of each segment for the
// recount of LedgerCounterInput (ledger.Input.Headers,
// CounterInput.Headers): its header and counter deltas, as
// SegmentCounterChunks counts them.
func LedgerSegmentHeaders() *ledger.SegmentHeaders {
	return ledger.NewSegmentHeaders(SegmentCounterChunks)
}

// LedgerCounterInput is the recount's input over the table's items and
// the ledger's objects, as of now.
func LedgerCounterInput(items []ledger.Item, segments, baselines map[string][]byte, now time.Time) (ledger.CounterInput, []ledger.Problem) {
	counters, checkpoints, probs := TableCounters(items)
	return ledger.CounterInput{Segments: segments, Baselines: baselines, Now: now, Counters: counters, Checkpoints: checkpoints,
		CheckpointKey: LedgerCountKey, Chunks: SegmentCounterChunks, Start: StartCounterDeltas, Info: CounterKeyInfo}, probs
}

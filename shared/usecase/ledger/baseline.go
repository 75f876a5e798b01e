package ledger

import (
	"context"
	"errors"
	"fmt"

	dl "github.com/dlqquarantine/dlqq/shared/domain/ledger"
)

// TableScanner scans the quarantine table's ledgered items (records and
// policies) with consistent reads (dynamostore.LedgerState).
type TableScanner interface {
	// ScanLedgered scans from after the table key after ("" from the
	// start), calling page for each page with its ledgered items and the
	// key to go on after ("" on the last page, which is always called).
	ScanLedgered(ctx context.Context, after string, page func(items []dl.Item, resume string) error) error
}

// BaselineReport is what a baseline run did.
type BaselineReport struct {
	// Written counts the objects this run wrote (0: a baseline exists).
	Written int `json:"written"`
	// Key is the newest baseline object, Items the baseline's items.
	Key   string `json:"key,omitempty"`
	Items int64  `json:"items"`
	// Complete says the baseline is whole (a run cut short by its timeout
	// is finished by the next one).
	Complete bool `json:"complete"`
}

// Baseline ({"action":"baseline"}) scans the table once and writes what
// every ledgered item is as baseline objects (dl.BaselineKey), one per
// scan page, chained, Object Lock like the segments; the next digest
// names the last one. Records older than the ledger are then told from
// forgeries up to the scan ("pre-ledger: unproven before" it). A run when
// a baseline is complete writes nothing; a run after one that stopped part
// way goes on where it stopped. Once the ledger has started (a segment or
// a digest exists) a baseline, new or unfinished, is refused (review 2
// R2-4): an item it scanned then could have been written behind the
// ledger, and the baseline would pass it off as pre-ledger.
func (s *Service) Baseline(ctx context.Context) (BaselineReport, error) {
	// When the run began, before it looked for the ledger: the baseline's
	// objects record it (At), verify compares the first one's with the
	// ledger's first change and digest.
	now := s.now()
	scan, ok := s.State.(TableScanner)
	if !ok {
		return BaselineReport{}, errors.New("the ledger's table adapter cannot scan the table")
	}
	var rep BaselineReport
	keys, err := s.Objects.List(ctx, dl.BaselinePrefix, "")
	if err != nil {
		return rep, fmt.Errorf("list baseline: %w", err)
	}
	n, after := int64(1), ""
	var prev *dl.Ref
	if len(keys) > 0 {
		last := keys[len(keys)-1]
		raw, err := s.Objects.Get(ctx, last)
		if err != nil {
			return rep, fmt.Errorf("read baseline %s: %w", last, err)
		}
		b, err := dl.ParseBaseline(raw)
		if err != nil || last != dl.BaselineKey(b.N) || int64(len(keys)) != b.N {
			return rep, fmt.Errorf("%w: baseline %s is not the end of a baseline chain (%d objects)", dl.ErrChainBroken, last, len(keys))
		}
		rep.Key, rep.Items, rep.Complete = last, b.Items, b.Complete
		if b.Complete {
			return rep, nil
		}
		n, after, prev = b.N+1, b.Resume, &dl.Ref{Key: last, SHA256: dl.SHA256Hex(raw)}
	}
	if err := s.ledgerNotStarted(ctx); err != nil {
		return rep, err
	}
	err = scan.ScanLedgered(ctx, after, func(items []dl.Item, resume string) error {
		b, err := dl.NewBaseline(n, now, s.Config.StreamARN, prev, rep.Items, items)
		if err != nil {
			return err
		}
		b.Resume, b.Complete = resume, resume == ""
		raw, err := b.Encode()
		if err != nil {
			return err
		}
		key := dl.BaselineKey(n)
		if err := s.Objects.PutIfAbsent(ctx, key, raw, now.Add(s.Config.Retention)); err != nil {
			// ErrExists: another run is writing the baseline (run again
			// later: it goes on from the newest object).
			return fmt.Errorf("put baseline %s: %w", key, err)
		}
		rep.Written++
		rep.Key, rep.Items, rep.Complete = key, b.Items, b.Complete
		prev, n = &dl.Ref{Key: key, SHA256: dl.SHA256Hex(raw)}, n+1
		return nil
	})
	s.log().Info("ledger baseline", "written", rep.Written, "items", rep.Items, "complete", rep.Complete)
	if err != nil {
		return rep, fmt.Errorf("baseline: %w", err)
	}
	return rep, nil
}

// baselineRef is what digest n names as the baseline: what the previous
// digest named, or else the newest baseline object once it is complete
// (nil while there is none).
func (s *Service) baselineRef(ctx context.Context, last DigestHead, hasLast bool) (*dl.BaselineRef, error) {
	if hasLast {
		raw, err := s.Objects.Get(ctx, last.Key)
		if err != nil {
			return nil, fmt.Errorf("read digest %s: %w", last.Key, err)
		}
		d, err := dl.ParseDigest(raw)
		if err != nil {
			return nil, fmt.Errorf("%w: digest %s: %v", dl.ErrChainBroken, last.Key, err)
		}
		if d.Baseline != nil {
			return d.Baseline, nil
		}
	}
	keys, err := s.Objects.List(ctx, dl.BaselinePrefix, "")
	if err != nil || len(keys) == 0 {
		return nil, err
	}
	last0 := keys[len(keys)-1]
	raw, err := s.Objects.Get(ctx, last0)
	if err != nil {
		return nil, fmt.Errorf("read baseline %s: %w", last0, err)
	}
	b, err := dl.ParseBaseline(raw)
	if err != nil {
		return nil, fmt.Errorf("%w: baseline %s: %v", dl.ErrChainBroken, last0, err)
	}
	if !b.Complete {
		return nil, nil
	}
	return &dl.BaselineRef{Key: last0, SHA256: dl.SHA256Hex(raw), Items: b.Items}, nil
}

// ErrLedgerStarted refuses a baseline once the ledger has a segment or a
// digest.
var ErrLedgerStarted = errors.New("the ledger has started: a baseline is taken only before its first segment and digest (an item scanned now could have been written behind the ledger; verify names what the ledger never saw)")

// ledgerNotStarted is ErrLedgerStarted when the digest head or any object
// under the digest or segment prefix exists. The digest head is read first:
// on a running ledger it answers without listing the bucket.
func (s *Service) ledgerNotStarted(ctx context.Context) error {
	if _, ok, err := s.State.DigestHead(ctx); err != nil {
		return fmt.Errorf("read the digest head: %w", err)
	} else if ok {
		return fmt.Errorf("%w (the digest head exists)", ErrLedgerStarted)
	}
	for _, prefix := range []string{dl.DigestPrefix, dl.SegmentPrefix} {
		keys, err := s.Objects.List(ctx, prefix, "")
		if err != nil {
			return fmt.Errorf("list %s: %w", prefix, err)
		}
		if len(keys) > 0 {
			return fmt.Errorf("%w (%s exists)", ErrLedgerStarted, keys[0])
		}
	}
	return nil
}

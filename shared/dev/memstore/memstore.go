// Package memstore holds in-memory twins of the quarantine ports for unit
// tests. The contract tests in storetest run against them and against the
// real adapters, so they cannot drift apart.
package memstore

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/dlqquarantine/dlqq/shared/domain/approval"
	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
)

// Store is an in-memory quarantine.Store, with the same counters as the
// DynamoDB store. It has no change stream: each write applies the counter
// changes of its change (quarantine.ChangeDeltas of the item before and
// after) at once, under the store's lock. That is the model of a ledger
// that has caught up with the table (dynamostore.Counts applied to every
// change the stream holds).
type Store struct {
	mu       sync.Mutex
	records  map[string]*quarantine.Record
	counters map[quarantine.CounterKey]int64
	open     map[string]map[string]int64 // source → signature → count
	holds    map[string]quarantine.IntegrityHold
	intents  map[string]quarantine.PayloadIntent
	revs     int
}

// New returns an empty Store.
func New() *Store {
	return &Store{records: make(map[string]*quarantine.Record), counters: map[quarantine.CounterKey]int64{}, open: map[string]map[string]int64{},
		holds: map[string]quarantine.IntegrityHold{}}
}

// apply applies the counter changes of a write; s.mu is held.
func (s *Store) apply(deltas []quarantine.CounterDelta) {
	for _, d := range deltas {
		s.counters[d.CounterKey] += d.N
		if d.Signature != "" {
			if s.open[d.Source] == nil {
				s.open[d.Source] = map[string]int64{}
			}
			s.open[d.Source][d.Signature] += d.N
		}
	}
}

// ReadCounters returns the values of the given counters (absent: 0).
func (s *Store) ReadCounters(_ context.Context, keys []quarantine.CounterKey) (map[quarantine.CounterKey]int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[quarantine.CounterKey]int64, len(keys))
	for _, k := range keys {
		out[k] = s.counters[k]
	}
	return out, nil
}

// OpenSignatures returns a source's open records by failure signature.
func (s *Store) OpenSignatures(_ context.Context, source string) (map[string]int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]int64{}
	for sig, n := range s.open[source] {
		if n != 0 {
			out[sig] = n
		}
	}
	return out, nil
}

// Create implements quarantine.Store.
func (s *Store) Create(_ context.Context, r *quarantine.Record) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if cur, ok := s.records[r.DLQID]; ok {
		if quarantine.SameVersion(cur, r) {
			return nil // a retried create whose first try was applied
		}
		return quarantine.ErrExists
	}
	s.apply(quarantine.ChangeDeltas(nil, r, nil, nil))
	s.records[r.DLQID] = r.Clone()
	return nil
}

// Get implements quarantine.Store.
func (s *Store) Get(_ context.Context, id string) (*quarantine.Record, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.records[id]
	if !ok {
		return nil, fmt.Errorf("get %s: %w", id, quarantine.ErrNotFound)
	}
	return r.Clone(), nil
}

// Replace implements quarantine.Store.
func (s *Store) Replace(_ context.Context, prev, r *quarantine.Record) error {
	if err := quarantine.CheckReplace(prev, r); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, ok := s.records[r.DLQID]
	if _, held := s.holds[r.DLQID]; !ok || held || cur.Version != prev.Version {
		// As DynamoDB's adapter: only a failed condition is compared with
		// what is stored.
		switch {
		case ok && quarantine.SameVersion(cur, r):
			return nil // a retried replace whose first try was applied, and counted
		case held:
			return fmt.Errorf("replace %s: %w", r.DLQID, quarantine.ErrHeld)
		}
		return quarantine.ErrVersionConflict
	}
	s.apply(quarantine.ChangeDeltas(cur, r, nil, nil))
	s.records[r.DLQID] = r.Clone()
	return nil
}

// Update implements quarantine.Store with quarantine.Update.
func (s *Store) Update(ctx context.Context, id string, fn func(cur *quarantine.Record) (*quarantine.Record, error)) (*quarantine.Record, error) {
	return quarantine.Update(ctx, s, id, fn)
}

// Hold implements quarantine.Store.
func (s *Store) Hold(_ context.Context, h quarantine.IntegrityHold) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, ok := s.records[h.ID]
	switch _, held := s.holds[h.ID]; {
	case !ok:
		return fmt.Errorf("hold %s: %w", h.ID, quarantine.ErrNotFound)
	case held:
		return nil
	case h.Version >= 0 && cur.Version != h.Version:
		return quarantine.ErrVersionConflict
	}
	s.holds[h.ID] = h
	s.apply(quarantine.ChangeDeltas(cur, cur, nil, &h))
	return nil
}

// RecordPayloadIntent implements quarantine.PayloadIntents. An intent
// with Malformed set is stored as given, under its Key: the model of an
// item that does not read.
func (s *Store) RecordPayloadIntent(_ context.Context, in quarantine.PayloadIntent) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.putIntent(in), nil
}

// ReplacePayloadIntent implements quarantine.PayloadIntents.
func (s *Store) ReplacePayloadIntent(_ context.Context, in quarantine.PayloadIntent) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if cur, ok := s.intents[quarantine.PayloadIntentKey(in.ID, in.Version)]; !ok || cur.Rev != in.Rev {
		return "", quarantine.ErrIntentMoved
	}
	return s.putIntent(in), nil
}

// putIntent stores in with a new revision; s.mu is held.
func (s *Store) putIntent(in quarantine.PayloadIntent) string {
	if s.intents == nil {
		s.intents = map[string]quarantine.PayloadIntent{}
	}
	if in.Malformed == "" {
		in.Key = quarantine.PayloadIntentKey(in.ID, in.Version)
		s.revs++
		in.Rev = fmt.Sprint("r", s.revs)
	}
	in.Refs = slices.Clone(in.Refs)
	s.intents[in.Key] = in
	return in.Rev
}

// DuePayloadIntents implements quarantine.PayloadIntents.
func (s *Store) DuePayloadIntents(_ context.Context, before time.Time, limit int) ([]quarantine.PayloadIntent, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []quarantine.PayloadIntent
	for _, in := range s.intents {
		if in.Malformed != "" || in.At.Before(before) {
			in.Refs = slices.Clone(in.Refs)
			out = append(out, in)
		}
	}
	slices.SortFunc(out, func(a, b quarantine.PayloadIntent) int {
		return cmp.Or(a.At.Compare(b.At.Time), strings.Compare(a.Key, b.Key))
	})
	return out[:min(len(out), max(limit, 0))], nil
}

// DropPayloadIntent implements quarantine.PayloadIntents.
func (s *Store) DropPayloadIntent(_ context.Context, in quarantine.PayloadIntent) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if cur, ok := s.intents[in.Key]; in.Rev != "" && (!ok || cur.Rev != in.Rev) {
		return quarantine.ErrIntentMoved
	}
	delete(s.intents, in.Key)
	return nil
}

// PayloadIntentsLeft returns every stored intent, for assertions.
func (s *Store) PayloadIntentsLeft() []quarantine.PayloadIntent {
	out, _ := s.DuePayloadIntents(context.Background(), time.Unix(1<<40, 0), 1<<30)
	return out
}

// HoldOf returns the integrity hold of a record, if it is held.
func (s *Store) HoldOf(id string) (quarantine.IntegrityHold, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	h, ok := s.holds[id]
	return h, ok
}

// Tamper changes a stored record behind the store's back (no seal, no
// version check, no counters): what someone writing the item directly
// does, for tamper tests.
func (s *Store) Tamper(id string, change func(*quarantine.Record)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r, ok := s.records[id]; ok {
		change(r)
	}
}

// All returns copies of every record, for assertions.
func (s *Store) All() []*quarantine.Record {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*quarantine.Record, 0, len(s.records))
	for _, r := range s.records {
		out = append(out, r.Clone())
	}
	return out
}

// Payloads is an in-memory quarantine.PayloadStore.
type Payloads struct {
	mu      sync.Mutex
	objects map[string][]byte
	// Bucket is reported in references (default "memory").
	Bucket string
}

// NewPayloads returns an empty Payloads.
func NewPayloads() *Payloads {
	return &Payloads{objects: make(map[string][]byte), Bucket: "memory"}
}

// PutPayload implements quarantine.PayloadStore. As s3store does, it
// writes a key once: a key that already holds the same bytes is reused, one
// that holds other bytes is an error.
func (p *Payloads) PutPayload(_ context.Context, key string, data []byte) (quarantine.ObjectRef, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if old, ok := p.objects[key]; ok {
		if !bytes.Equal(old, data) {
			return quarantine.ObjectRef{}, fmt.Errorf("put payload %s: holds other bytes: %w", key, quarantine.ErrPayloadMismatch)
		}
	} else {
		p.objects[key] = append([]byte(nil), data...)
	}
	return quarantine.ObjectRef{Bucket: p.Bucket, Key: key, SHA256: quarantine.BodySHA256(data), Size: int64(len(data))}, nil
}

// GetPayload implements quarantine.PayloadStore.
func (p *Payloads) GetPayload(_ context.Context, ref quarantine.ObjectRef) ([]byte, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	b, ok := p.objects[ref.Key]
	if !ok {
		return nil, fmt.Errorf("get payload %s: %w", ref.Key, quarantine.ErrNotFound)
	}
	if quarantine.BodySHA256(b) != ref.SHA256 {
		return nil, fmt.Errorf("get payload %s: %w", ref.Key, quarantine.ErrPayloadMismatch)
	}
	return append([]byte(nil), b...), nil
}

// DeletePayload implements quarantine.PayloadStore.
func (p *Payloads) DeletePayload(_ context.Context, ref quarantine.ObjectRef) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if ref.Bucket != p.Bucket {
		return fmt.Errorf("delete payload %s: %w", ref.Key, quarantine.ErrForeignPayload)
	}
	delete(p.objects, ref.Key)
	return nil
}

// Overwrite replaces an object's bytes behind the store's back, for tamper tests.
func (p *Payloads) Overwrite(key string, data []byte) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.objects[key] = append([]byte(nil), data...)
}

// List implements quarantine.Lister, oldest first_seen first (then by id),
// across sources too.
func (s *Store) List(_ context.Context, q quarantine.ListQuery) (quarantine.ListPage, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var matched []*quarantine.Record
	for _, r := range s.records {
		if _, held := s.holds[r.DLQID]; held == q.Held && q.Matches(r) {
			matched = append(matched, r)
		}
	}
	slices.SortFunc(matched, func(a, b *quarantine.Record) int {
		if c := a.FirstSeen.Compare(b.FirstSeen.Time); c != 0 {
			return c
		}
		return strings.Compare(a.DLQID, b.DLQID)
	})
	// The cursor is the position of the last id handed out (its
	// first_seen and id): a record that moved away since is no landmark
	// the listing needs, as with DynamoDB.
	start := 0
	if q.Cursor != "" {
		fs, id, _ := strings.Cut(q.Cursor, "|")
		start = len(matched)
		for i, r := range matched {
			if c := cmp.Or(strings.Compare(r.FirstSeen.String(), fs), strings.Compare(r.DLQID, id)); c > 0 {
				start = i
				break
			}
		}
	}
	limit := q.Limit
	if limit <= 0 {
		limit = 100
	}
	var page quarantine.ListPage
	for _, r := range matched[start:] {
		if len(page.IDs) == limit {
			last := page.Entries[len(page.Entries)-1]
			page.Cursor = quarantine.At(last.FirstSeen).String() + "|" + last.ID
			break
		}
		page.IDs = append(page.IDs, r.DLQID)
		page.Entries = append(page.Entries, quarantine.EntryOf(r))
	}
	return page, nil
}

// ListSources implements quarantine.SourceLister: every source that has
// a record, in name order.
func (s *Store) ListSources(_ context.Context) ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, r := range s.records {
		out = append(out, r.Source)
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// GetMany implements quarantine.Store.
func (s *Store) GetMany(_ context.Context, ids []string) (map[string]*quarantine.Record, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]*quarantine.Record, len(ids))
	for _, id := range ids {
		if r, ok := s.records[id]; ok {
			out[id] = r.Clone()
		}
	}
	return out, nil
}

// Approvals is the in-memory twin of dynamostore.ApprovalStore: sealed
// copies in, sealed copies out, a conditional put on the version.
type Approvals struct {
	mu    sync.Mutex
	items map[string]approval.Approval
}

// NewApprovals returns an empty approval store.
func NewApprovals() *Approvals { return &Approvals{items: map[string]approval.Approval{}} }

// Create stores a new approval; approval.ErrConflict when the id exists.
func (s *Approvals) Create(_ context.Context, a *approval.Approval) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := a.Source + "#" + a.ID
	if _, ok := s.items[k]; ok {
		return approval.ErrConflict
	}
	s.items[k] = *a
	return nil
}

// Replace stores a if the stored version is a.Version-1.
func (s *Approvals) Replace(_ context.Context, a *approval.Approval) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := a.Source + "#" + a.ID
	if cur, ok := s.items[k]; !ok || cur.Version != a.Version-1 {
		return approval.ErrConflict
	}
	s.items[k] = *a
	return nil
}

// Get reads one approval and checks its seal.
func (s *Approvals) Get(_ context.Context, source, id string) (*approval.Approval, error) {
	s.mu.Lock()
	a, ok := s.items[source+"#"+id]
	s.mu.Unlock()
	if !ok {
		return nil, approval.ErrNotFound
	}
	if err := a.Verify(); err != nil {
		return nil, err
	}
	return &a, nil
}

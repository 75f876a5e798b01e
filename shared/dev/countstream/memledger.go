package countstream

import (
	"context"
	"slices"
	"strings"
	"sync"
	"time"

	dl "github.com/dlqquarantine/dlqq/shared/domain/ledger"
	"github.com/dlqquarantine/dlqq/shared/usecase/ledger"
)

// objects is the ledger's bucket in memory (ledger.Objects).
type objects struct {
	mu   sync.Mutex
	objs map[string][]byte
}

func newObjects() *objects { return &objects{objs: map[string][]byte{}} }

func (o *objects) PutIfAbsent(_ context.Context, key string, body []byte, _ time.Time) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if _, ok := o.objs[key]; ok {
		return dl.ErrExists
	}
	o.objs[key] = slices.Clone(body)
	return nil
}

func (o *objects) Get(_ context.Context, key string) ([]byte, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	b, ok := o.objs[key]
	if !ok {
		return nil, dl.ErrNotFound
	}
	return slices.Clone(b), nil
}

func (o *objects) List(_ context.Context, prefix, startAfter string) ([]string, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	var keys []string
	for k := range o.objs {
		if strings.HasPrefix(k, prefix) && k > startAfter {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return keys, nil
}

// Versions: a key of this bucket has one version (it is never
// overwritten) or none.
func (o *objects) Versions(_ context.Context, key string) (int, int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if _, ok := o.objs[key]; ok {
		return 1, 0, nil
	}
	return 0, 0, nil
}

// state is the ledger's head items in memory (ledger.State; no digests:
// countstream never signs one).
type state struct {
	mu    sync.Mutex
	heads map[string]ledger.Head
}

func newState() *state { return &state{heads: map[string]ledger.Head{}} }

func (s *state) Head(_ context.Context, shard string) (ledger.Head, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	h, ok := s.heads[shard]
	return h, ok, nil
}

func (s *state) Heads(_ context.Context, shards []string) (map[string]ledger.Head, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]ledger.Head{}
	for _, id := range shards {
		if h, ok := s.heads[id]; ok {
			out[id] = h
		}
	}
	return out, nil
}

func (s *state) AdvanceHead(_ context.Context, h ledger.Head, prevSegmentKey string, pendingSince time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, ok := s.heads[h.Shard]
	if (prevSegmentKey == "") == ok || (ok && cur.SegmentKey != prevSegmentKey) {
		return dl.ErrConflict
	}
	h.PendingSince = pendingSince
	s.heads[h.Shard] = h
	return nil
}

func (s *state) MarkAnchored(context.Context, string, string, string) error { return nil }

func (s *state) DigestHead(context.Context) (ledger.DigestHead, bool, error) {
	return ledger.DigestHead{}, false, nil
}

func (s *state) PutDigestHead(context.Context, ledger.DigestHead, int64) error {
	return dl.ErrConflict
}

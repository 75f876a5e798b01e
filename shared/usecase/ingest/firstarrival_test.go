package ingest_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dlqquarantine/dlqq/shared/dev/memstore"
	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
	"github.com/dlqquarantine/dlqq/shared/runtime/clock"
	"github.com/dlqquarantine/dlqq/shared/usecase/ingest"
)

// callStore counts the store calls a Quarantiner makes.
type callStore struct {
	*memstore.Store
	mu    sync.Mutex
	calls []string
}

func (c *callStore) note(op string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls = append(c.calls, op)
}

func (c *callStore) Create(ctx context.Context, r *quarantine.Record) error {
	c.note("Create")
	return c.Store.Create(ctx, r)
}

func (c *callStore) Get(ctx context.Context, id string) (*quarantine.Record, error) {
	c.note("Get")
	return c.Store.Get(ctx, id)
}

func (c *callStore) Replace(ctx context.Context, prev, next *quarantine.Record) error {
	c.note("Replace")
	return c.Store.Replace(ctx, prev, next)
}

func (c *callStore) taken() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := strings.Join(c.calls, " ")
	c.calls = nil
	return out
}

// A first arrival is one conditional create and no read (the issue's "one
// conditional PutItem"); a re-failure, a duplicate and a body to offload
// still read, and end as before.
func TestFirstArrivalIsOneWrite(t *testing.T) {
	t.Parallel()
	store := &callStore{Store: memstore.New()}
	payloads := memstore.NewPayloads()
	clk := clock.NewFake(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC))
	src := inventorySource(t)
	q := ingest.NewQuarantiner(store, payloads, clk.Now, ingest.QuarantinerConfig{Sources: map[string]*quarantine.Source{src.Name: src}, BodyInlineMax: 1024})
	ctx := context.Background()
	if out, err := q.Quarantine(ctx, msg("m1", validBody)); err != nil || out.Result != ingest.ResultCreated {
		t.Fatalf("first arrival: %v %v", out.Result, err)
	}
	if got := store.taken(); got != "Create" {
		t.Fatalf("a first arrival made %q, want one Create", got)
	}
	if out, err := q.Quarantine(ctx, msg("m1", validBody)); err != nil || out.Result != ingest.ResultDuplicate {
		t.Fatalf("duplicate: %v %v", out.Result, err)
	}
	if got := store.taken(); !strings.HasPrefix(got, "Create Get") || strings.Contains(got, "Replace") {
		t.Fatalf("a duplicate delivery made %q: a refused create, then the read that finds it", got)
	}
	clk.Advance(time.Minute)
	if out, err := q.Quarantine(ctx, msg("m2", validBody)); err != nil || out.Result != ingest.ResultAppended {
		t.Fatalf("re-failure: %v %v", out.Result, err)
	}
	if got := store.taken(); !strings.HasSuffix(got, "Get Replace") {
		t.Fatalf("a re-failure made %q", got)
	}
	// A body over the inline limit is offloaded: read first, so nothing is
	// uploaded for a record that exists.
	big := strings.Replace(validBody, `"F1"`, `"`+strings.Repeat("F", 2000)+`"`, 1)
	big = strings.Replace(big, `"evt-1"`, `"evt-big"`, 1)
	if out, err := q.Quarantine(ctx, msg("m3", big)); err != nil || out.Result != ingest.ResultCreated || out.Record.BodyRef == nil {
		t.Fatalf("offloaded first arrival: %v %v", out.Result, err)
	}
	if got := store.taken(); got != "Get Create" {
		t.Fatalf("an offloaded first arrival made %q, want the read first", got)
	}
	if n := len(store.All()); n != 2 {
		t.Fatalf("%d records, want 2", n)
	}
}

package capacity_test

import (
	"context"
	"testing"

	"github.com/dlqquarantine/dlqq/shared/adapter/dynamostore"
	"github.com/dlqquarantine/dlqq/shared/dev/capacity"
	"github.com/dlqquarantine/dlqq/shared/dev/embedded"
	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
)

// Reads are priced by DynamoDB's rules: 4 KB units rounded up, half when
// eventually consistent, a key not found at the minimum, a Query on the
// sum of what it read (filtered items at the returned items' mean size).
func TestReadUnitsRules(t *testing.T) {
	for _, c := range []struct {
		size       int
		consistent bool
		want       float64
	}{{0, true, 1}, {4096, true, 1}, {4097, true, 2}, {4097, false, 1}, {100, false, 0.5}} {
		if got := capacity.ReadUnits(c.size, c.consistent); got != c.want {
			t.Errorf("ReadUnits(%d, %v) = %v, want %v", c.size, c.consistent, got, c.want)
		}
	}
}

// A small lifecycle on the emulator: every message ingested, replayed
// once, settled and archived, each step metered; the per-million figures
// follow from what each step did.
func TestLifecycleOnTheEmulator(t *testing.T) {
	ctx := context.Background()
	st := embedded.ForTest(t, embedded.Options{Params: capacity.LifecycleParams})
	const n = 40
	res, err := capacity.Lifecycle(ctx, st, n, nil)
	if err != nil {
		t.Fatal(err)
	}
	byFn := map[string]capacity.Phase{}
	for _, p := range res.Phases {
		byFn[p.Function] = p
		t.Logf("%s: %d invocations, %s, %d WRU, %.1f RRU, %s", p.Function, p.Invocations, p.Duration, p.WriteUnits, p.ReadUnits, p.Calls)
	}
	in := byFn["IngestFunction"]
	if in.Invocations != n/10 || in.Calls.Ops["dynamodb PutItem"] < n || in.WriteUnits < n {
		t.Errorf("ingest: %+v", in)
	}
	if rd := byFn["RedriveFunction"]; rd.Calls.Ops["sqs SendMessageBatch"] == 0 || rd.WriteUnits < 2*n {
		t.Errorf("redrive: %+v", rd)
	}
	if sw := byFn["SweeperFunction"]; sw.Calls.Ops["s3 PutObject"] < n {
		t.Errorf("sweeper: %d archive PUTs for %d records", sw.Calls.Ops["s3 PutObject"], n)
	}
	if l := byFn["LedgerFunction"]; l.Invocations == 0 || l.Calls.Ops["s3 PutObject"] == 0 {
		t.Errorf("ledger: %+v", l)
	}
	// Every record ends archived.
	page, err := dynamostore.NewLister(st.Clients.DynamoDB, st.Names["QuarantineTable"]).List(ctx, quarantine.ListQuery{Source: st.Names["SourceQueue"], Status: quarantine.StatusArchived, Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.IDs) != n {
		t.Fatalf("%d records archived, want %d", len(page.IDs), n)
	}
	m := res.PerMillion()
	for _, l := range m.Lines() {
		t.Log(l)
	}
	if m.GBSeconds <= 0 || m.WriteUnits < 4e6 || m.ReadUnits <= 0 || m.S3Tier1 < 1e6 || m.Dollars <= 0 {
		t.Fatalf("per million: %+v", m)
	}
}

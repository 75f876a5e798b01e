package dynamostore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/dlqquarantine/dlqq/shared/adapter/dynamostore"
	"github.com/dlqquarantine/dlqq/shared/dev/macfake"
	"github.com/dlqquarantine/dlqq/shared/domain/ledger"
	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
	"github.com/dlqquarantine/dlqq/shared/domain/writerproof"
)

const (
	ingestKey  = "arn:aws:kms:us-east-1:111122223333:key/ingest"
	redriveKey = "arn:aws:kms:us-east-1:111122223333:key/redrive"
	sweeperKey = "arn:aws:kms:us-east-1:111122223333:key/sweeper"
)

type writers struct {
	fake *macfake.Keys
	keys writerproof.Keys
	by   map[writerproof.Role]*writerproof.Prover
}

func newWriters() *writers {
	w := &writers{fake: macfake.New(ingestKey, redriveKey, sweeperKey), by: map[writerproof.Role]*writerproof.Prover{},
		keys: writerproof.Keys{ingestKey: writerproof.RoleIngest, redriveKey: writerproof.RoleRedrive, sweeperKey: writerproof.RoleSweeper}}
	for arn, role := range w.keys {
		w.by[role] = writerproof.NewProver(macfake.MAC{Keys: w.fake, ARN: arn}, role)
	}
	return w
}

// proved is r's ledger item as role's store writes it.
func (w *writers) proved(t *testing.T, role writerproof.Role, r *quarantine.Record) ledger.Item {
	t.Helper()
	it := ledgerItemOf(t, r)
	if role == "" {
		return it
	}
	p, err := w.by[role].Prove(context.Background(), writerproof.Leaf{Key: r.DLQID, Version: r.Version, Seal: r.Seal})
	if err != nil {
		t.Fatal(err)
	}
	it[writerproof.Attr] = ledger.Str(p.Encode())
	return it
}

func writerKind(err error) ledger.Kind {
	var we *ledger.WriterError
	if errors.As(err, &we) {
		return we.Kind
	}
	if err != nil {
		return "other: " + ledger.Kind(err.Error())
	}
	return ""
}

func TestLedgerWriterCheck(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	w := newWriters()
	check := dynamostore.LedgerWriterCheck(context.Background(), w.keys, w.fake.Verify)
	offline := dynamostore.LedgerWriterCheck(context.Background(), w.keys, nil)
	v1, v2 := claimedPair(t, now, `{"a":1}`)
	arrived, err := v1.Arrive(quarantine.Attempt{At: quarantine.At(now.Add(time.Second)), Stage: "consumer", Reason: "again", Actor: "ingest", Kind: quarantine.AttemptArrival},
		quarantine.Classification{}, 0, now.Add(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	parked, err := v1.ParkManual("someone", "by hand", now.Add(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	// A proof copied from the version before it.
	copied := ledgerItemOf(t, v2)
	copied[writerproof.Attr] = w.proved(t, writerproof.RoleRedrive, v1)[writerproof.Attr]
	for _, c := range []struct {
		name       string
		prev, next ledger.Item
		want       ledger.Kind
	}{
		{"version 1 by ingest", nil, w.proved(t, writerproof.RoleIngest, v1), ""},
		{"a claim by redrive", ledgerItemOf(t, v1), w.proved(t, writerproof.RoleRedrive, v2), ""},
		{"an arrival by ingest", ledgerItemOf(t, v1), w.proved(t, writerproof.RoleIngest, arrived), ""},
		{"a record that never arrived", nil, w.proved(t, "", v1), ledger.KindWriterMissing},
		{"a version 1 by redrive", nil, w.proved(t, writerproof.RoleRedrive, v1), ledger.KindWriterRole},
		{"a park by hand", ledgerItemOf(t, v1), w.proved(t, "", parked), ledger.KindWriterMissing},
		{"a park proved by ingest", ledgerItemOf(t, v1), w.proved(t, writerproof.RoleIngest, parked), ledger.KindWriterRole},
		{"a claim by the sweeper", ledgerItemOf(t, v1), w.proved(t, writerproof.RoleSweeper, v2), ledger.KindWriterRole},
		{"an arrival by redrive", ledgerItemOf(t, v1), w.proved(t, writerproof.RoleRedrive, arrived), ledger.KindWriterRole},
		{"a proof of another version", ledgerItemOf(t, v1), copied, ledger.KindWriterInvalid},
	} {
		if got := writerKind(check(c.prev, c.next)); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
	// Offline: a proof is counted unverified, a missing one still named.
	if err := offline(nil, w.proved(t, writerproof.RoleIngest, v1)); !errors.Is(err, ledger.ErrWriterUnverified) {
		t.Errorf("offline: %v", err)
	}
	if got := writerKind(offline(nil, w.proved(t, "", v1))); got != ledger.KindWriterMissing {
		t.Errorf("offline missing: %q", got)
	}
}

// recordingAPI keeps the item put.
type recordingAPI struct {
	dynamostore.API
	put map[string]types.AttributeValue
}

func (a *recordingAPI) PutItem(_ context.Context, in *dynamodb.PutItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	a.put = in.Item
	return &dynamodb.PutItemOutput{}, nil
}

func TestStorePutProvesEveryVersion(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	w := newWriters()
	v1, _ := claimedPair(t, now, `{"a":1}`)
	api := &recordingAPI{}
	store := dynamostore.New(api, "q").WithWriter(w.by[writerproof.RoleIngest])
	if err := store.Create(context.Background(), v1); err != nil {
		t.Fatal(err)
	}
	it, err := dynamostore.LedgerItem(api.put)
	if err != nil {
		t.Fatal(err)
	}
	check := dynamostore.LedgerWriterCheck(context.Background(), w.keys, w.fake.Verify)
	if err := check(nil, it); err != nil {
		t.Fatalf("the item put: %v", err)
	}
	// The seal does not cover the proof: the record decodes and verifies.
	back, err := dynamostore.Unmarshal(api.put)
	if err != nil || quarantine.Verify(back) != nil {
		t.Fatalf("decode: %v %v", err, quarantine.Verify(back))
	}
}

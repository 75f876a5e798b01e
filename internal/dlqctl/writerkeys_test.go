package dlqctl_test

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/aws/aws-sdk-go-v2/service/kms/types"

	"github.com/dlqquarantine/dlqq/internal/dlqctl"
	"github.com/dlqquarantine/dlqq/shared/adapter/dynamostore"
	"github.com/dlqquarantine/dlqq/shared/adapter/kmsmac"
	"github.com/dlqquarantine/dlqq/shared/dev/embedded"
	"github.com/dlqquarantine/dlqq/shared/dev/localrunner"
	"github.com/dlqquarantine/dlqq/shared/dev/storetest"
	"github.com/dlqquarantine/dlqq/shared/domain/writerproof"
)

// writerLedger is the ledger fixture with writer proofs on and the stack's
// writer keys recorded in its digests, as the template deploys it; a
// digest is signed over the records written (so they precede the
// writer-proof cut-off and need no proof).
func writerLedger(t *testing.T) (*ledgerFixture, []string) {
	t.Helper()
	l := newLedgerFixture(t)
	keys := []string{l.st.KeyARNs["IngestWriterKey"], l.st.KeyARNs["RedriveWriterKey"], l.st.KeyARNs["SweeperWriterKey"]}
	for _, k := range keys {
		if !strings.Contains(k, ":key/") {
			t.Fatalf("writer key ARNs %v", keys)
		}
	}
	l.fns.Ledger.Config.WriterProofs = true
	l.fns.Ledger.Config.WriterKeys = map[string]string{"ingest": keys[0], "redrive": keys[1], "sweeper": keys[2]}
	// A record as ingest writes it, proved with its key (a new stack's
	// versions are all proved, from before digest 1 on).
	r := storetest.Record(t, storetest.UniqueID("a"))
	p := writerproof.NewProver(kmsmac.MAC{API: kms.NewFromConfig(l.st.AWS), KeyID: keys[0]}, writerproof.RoleIngest)
	if err := dynamostore.New(l.st.Clients.DynamoDB, l.table).WithWriter(p).Create(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	l.drain()
	l.digest()
	return l, keys
}

// The embedded stack's ledger function gets the three writer keys' real
// ARNs from the template's environment.
func TestLedgerRecordsTheTemplatesWriterKeys(t *testing.T) {
	st := embedded.ForTest(t, embedded.Options{})
	fns, err := localrunner.NewFunctions(st, nil, slog.New(slog.NewJSONHandler(io.Discard, nil)), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"ingest": st.KeyARNs["IngestWriterKey"], "redrive": st.KeyARNs["RedriveWriterKey"], "sweeper": st.KeyARNs["SweeperWriterKey"]}
	got := fns.Ledger.Config.WriterKeys
	for r, k := range want {
		if !strings.Contains(k, ":key/") || got[r] != k || len(got) != len(want) {
			t.Fatalf("ledger writer keys %v, want %v", got, want)
		}
	}
}

// The writer keys the digests record are the ones verify takes: the same
// keys are clean; another HMAC key in a role's place (an output pointed at
// a key the admin can use) is named; none given while the digests say
// writer proofs are on fails, online and offline.
func TestVerifyWriterKeysPinnedByTheDigests(t *testing.T) {
	l, keys := writerLedger(t)
	out, errOut, code := l.run(false, "verify", "--writer-keys", strings.Join(keys, ","))
	if code != 0 || strings.Contains(out, "writer-keys") {
		t.Fatalf("verify with the recorded keys (exit %d): %s%s", code, out, errOut)
	}

	k, err := kms.NewFromConfig(l.st.AWS).CreateKey(context.Background(), &kms.CreateKeyInput{KeySpec: types.KeySpecHmac256, KeyUsage: types.KeyUsageTypeGenerateVerifyMac})
	if err != nil {
		t.Fatal(err)
	}
	other := aws.ToString(k.KeyMetadata.Arn)
	out, _, code = l.run(false, "verify", "--writer-keys", strings.Join([]string{other, keys[1], keys[2]}, ","))
	if code != dlqctl.ExitMismatch {
		t.Fatalf("verify with another ingest key (exit %d): %s", code, out)
	}
	mustContain(t, out, "MISMATCH ledger/digests/000000000001.json: ", "writer-keys: the writer keys given are not those signed digest 1 records (ingest key "+other+", the digest records "+keys[0]+")")

	out, _, code = l.run(false, "verify")
	if code != dlqctl.ExitMismatch {
		t.Fatalf("verify without writer keys (exit %d): %s", code, out)
	}
	mustContain(t, out, "writer-keys: the signed digests say writer proofs are on", "(give them: --writer-keys")

	dir := l.export()
	off, code := l.offline(dir)
	if code != dlqctl.ExitMismatch || !strings.Contains(off, "writer-keys: the signed digests say writer proofs are on") {
		t.Fatalf("offline without writer keys (exit %d): %s", code, off)
	}
	off, code = l.offline(dir, "--writer-keys", strings.Join([]string{keys[0], other, keys[2]}, ","))
	if code != dlqctl.ExitMismatch || !strings.Contains(off, "redrive key "+other) {
		t.Fatalf("offline with another redrive key (exit %d): %s", code, off)
	}
	off, code = l.offline(dir, "--writer-keys", strings.Join(keys, ","))
	if code != 0 || strings.Contains(off, "writer-keys") {
		t.Fatalf("offline with the recorded keys (exit %d): %s", code, off)
	}
}

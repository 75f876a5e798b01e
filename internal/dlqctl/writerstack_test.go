package dlqctl_test

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/cloudformation"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/sts"

	"github.com/dlqquarantine/dlqq/internal/dlqctl"
	"github.com/dlqquarantine/dlqq/shared/adapter/dynamostore"
	"github.com/dlqquarantine/dlqq/shared/adapter/kmsmac"
	"github.com/dlqquarantine/dlqq/shared/dev/storetest"
	"github.com/dlqquarantine/dlqq/shared/dev/testenv"
	"github.com/dlqquarantine/dlqq/shared/domain/writerproof"
	"github.com/dlqquarantine/dlqq/shared/runtime/stackoutputs"
)

// verify with only DLQQ_STACK checks writer proofs with the stack's three
// writer keys (its outputs): a record ingest's key proved passes, one
// written by hand behind the functions is named writer-missing.
func TestStackWriterKeysCheckWriterProofs(t *testing.T) {
	ctx := context.Background()
	l := newLedgerFixture(t)
	ingestKey := l.st.KeyARNs["IngestWriterKey"]
	// The ledger as the template deploys it: writer proofs on from digest
	// 1, the three keys recorded.
	l.fns.Ledger.Config.WriterProofs = true
	l.fns.Ledger.Config.WriterKeys = map[string]string{"ingest": ingestKey, "redrive": l.st.KeyARNs["RedriveWriterKey"], "sweeper": l.st.KeyARNs["SweeperWriterKey"]}
	if ingestKey == "" {
		t.Fatal("the embedded stack has no IngestWriterKey")
	}
	proved := storetest.Record(t, storetest.UniqueID("proved"))
	p := writerproof.NewProver(kmsmac.MAC{API: kms.NewFromConfig(l.st.AWS), KeyID: ingestKey}, writerproof.RoleIngest)
	if err := dynamostore.New(l.st.Clients.DynamoDB, l.table).WithWriter(p).Create(ctx, proved); err != nil {
		t.Fatal(err)
	}
	byHand := l.create("byhand")
	l.drain()
	l.digest()

	testenv.ClearDLQQ(t)
	t.Setenv("DLQQ_STACK", l.st.Env.StackName)
	var out, errw bytes.Buffer
	a := dlqctl.NewApp(strings.NewReader(""), &out, &errw)
	a.IsTerminal = func() bool { return false }
	a.Connect = func(context.Context, string, string) (*dlqctl.Clients, error) {
		return &dlqctl.Clients{Clients: l.st.Clients, Lambda: lambda.NewFromConfig(l.st.AWS),
			CloudFormation: cloudformation.NewFromConfig(l.st.AWS), STS: sts.NewFromConfig(l.st.AWS), Local: true}, nil
	}
	code := a.Main(ctx, []string{"--actor", "alice", "verify"})
	got := out.String() + errw.String()
	if a.WriterKeys == "" || !strings.Contains(a.WriterKeys, ingestKey) {
		t.Fatalf("--writer-keys not taken from the stack's %v: %q\n%s", stackoutputs.WriterKeys(), a.WriterKeys, got)
	}
	if code == 0 || !strings.Contains(got, "writer-missing") || !strings.Contains(got, byHand.DLQID) {
		t.Fatalf("verify (exit %d) does not name %s writer-missing:\n%s", code, byHand.DLQID, got)
	}
	if strings.Contains(got, proved.DLQID) || strings.Contains(got, "writer proofs not checked") {
		t.Fatalf("verify names the proved record %s or did not check:\n%s", proved.DLQID, got)
	}
}

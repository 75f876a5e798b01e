package wire_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	kmstypes "github.com/aws/aws-sdk-go-v2/service/kms/types"

	"github.com/dlqquarantine/dlqq/shared/adapter/dynamostore"
	"github.com/dlqquarantine/dlqq/shared/adapter/kmsmac"
	"github.com/dlqquarantine/dlqq/shared/dev/embedded"
	dl "github.com/dlqquarantine/dlqq/shared/domain/ledger"
	"github.com/dlqquarantine/dlqq/shared/domain/policy"
	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
	"github.com/dlqquarantine/dlqq/shared/domain/writerproof"
	"github.com/dlqquarantine/dlqq/shared/usecase/ingest"
	"github.com/dlqquarantine/dlqq/shared/wire"
)

// writerKeys are the three roles' dev-kit KMS HMAC keys and their provers.
type writerKeys struct {
	kc     *kms.Client
	keys   writerproof.Keys
	arn    map[writerproof.Role]string
	prover map[writerproof.Role]*writerproof.Prover
}

func newWriterKeys(t *testing.T, l *ledgerStack) *writerKeys {
	t.Helper()
	w := &writerKeys{kc: kms.NewFromConfig(l.st.AWS), keys: writerproof.Keys{}, arn: map[writerproof.Role]string{}, prover: map[writerproof.Role]*writerproof.Prover{}}
	for _, role := range writerproof.Roles {
		out, err := w.kc.CreateKey(context.Background(), &kms.CreateKeyInput{KeySpec: kmstypes.KeySpecHmac256, KeyUsage: kmstypes.KeyUsageTypeGenerateVerifyMac})
		if err != nil {
			t.Fatal(err)
		}
		arn := aws.ToString(out.KeyMetadata.Arn)
		w.keys[arn], w.arn[role] = role, arn
		w.prover[role] = writerproof.NewProver(kmsmac.MAC{API: w.kc, KeyID: arn}, role)
	}
	return w
}

func (w *writerKeys) check(in *dl.Input) {
	in.CheckWriter = dynamostore.LedgerWriterCheck(context.Background(), w.keys, kmsmac.Verifier{API: w.kc}.Verify)
	in.CheckVersion = dynamostore.LedgerVersionCheck()
}

// Writer proofs on the embedded stack, with the dev kit's KMS HMAC keys:
// the lifecycle as the functions write it (the real ingest handler;
// redrive's park and policy and the sweeper's stub through their stores
// and keys) verifies with 0 problems, and each write behind the functions
// is named: a record that never arrived (no proof, or a made-up one), a
// legal-looking next version written by hand (parked by a made-up actor,
// re-sealed), and a version proved by the wrong role's key.
func TestWriterProofsOnTheStack(t *testing.T) {
	ctx := context.Background()
	l := startLedger(t, map[string]string{"WRITER_PROOFS": "true"})
	w := newWriterKeys(t, l)
	if rep := l.digest(); !rep.Written || rep.N != 1 {
		t.Fatalf("the first digest (the cut-off, nothing before it): %+v", rep)
	}

	// Ingest: the real handler, a batch of 5.
	source := embedded.RandomName("wp")
	srcARN := "arn:aws:sqs:us-east-1:000000000000:" + source
	cfg := ingest.Config{TableName: l.table, WriterKeyID: w.arn[writerproof.RoleIngest], Sources: map[string]ingest.SourceConfig{
		source: {ARN: srcARN, DLQ: source + "-dlq", IdempotencyPointer: "/event_id"},
	}}
	h, err := wire.Ingest(ctx, cfg, &wire.Clients{DynamoDB: l.st.Clients.DynamoDB, KMSMAC: w.kc}, wire.Runtime{Log: slog.New(slog.NewJSONHandler(io.Discard, nil)), Metrics: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	var ev events.SQSEvent
	for i := range 5 {
		ev.Records = append(ev.Records, events.SQSMessage{MessageId: fmt.Sprintf("m-%d", i), Body: fmt.Sprintf(`{"event_id":"e-%d"}`, i),
			EventSource: "aws:sqs", EventSourceARN: "arn:aws:sqs:us-east-1:000000000000:" + source + "-dlq",
			Attributes: map[string]string{"ApproximateReceiveCount": "3", "SentTimestamp": "1764400000000", "DeadLetterQueueSourceArn": srcARN}})
	}
	if resp, err := h.Handle(ctx, ev); err != nil || len(resp.BatchItemFailures) > 0 {
		t.Fatalf("ingest: %v %v", err, resp.BatchItemFailures)
	}
	ids := make([]string, 5)
	for i := range ids {
		ids[i] = source + "#e-" + fmt.Sprint(i)
	}
	redrive := dynamostore.New(l.st.Clients.DynamoDB, l.table).WithWriter(w.prover[writerproof.RoleRedrive])
	sweeper := dynamostore.New(l.st.Clients.DynamoDB, l.table).WithWriter(w.prover[writerproof.RoleSweeper])
	now := time.Now().UTC()
	// Redrive parks ids[0] (an operator's park); the sweeper archives it.
	cur, err := redrive.Get(ctx, ids[0])
	if err != nil {
		t.Fatal(err)
	}
	parked, err := cur.ParkManual("ops@example.com", "done", now)
	if err != nil {
		t.Fatal(err)
	}
	if err := redrive.Replace(ctx, cur, parked); err != nil {
		t.Fatal(err)
	}
	stub, err := parked.ArchiveStub("sweeper", quarantine.ArchiveRef{Bucket: "b", Key: "k", VersionID: "v", RetainUntil: quarantine.At(now.Add(time.Hour)),
		SHA256: parked.BodySHA256, Seal: parked.Seal, ArchivedAt: quarantine.At(now)}, now)
	if err != nil {
		t.Fatal(err)
	}
	if err := sweeper.Replace(ctx, parked, stub); err != nil {
		t.Fatal(err)
	}
	pol, err := policy.New(policy.Spec{Source: source, MinAge: time.Minute, MaxPerRun: 50, ExpiresAt: now.Add(time.Hour), Note: "a test"}, "ops@example.com", now)
	if err != nil {
		t.Fatal(err)
	}
	if err := dynamostore.NewPolicyStore(l.st.Clients.DynamoDB, l.table).WithWriter(w.prover[writerproof.RoleRedrive]).Create(ctx, pol); err != nil {
		t.Fatal(err)
	}
	l.drain()
	l.digest()
	if res := l.verify(w.check); !res.OK() || res.Writers.Proved != 8 {
		t.Fatalf("the lifecycle: %v %+v", res.Problems, res.Writers)
	}

	// Behind the functions, with table write access.
	plain := dynamostore.New(l.st.Clients.DynamoDB, l.table)
	// 1. A record that never arrived: version 1, a valid seal, no proof.
	invented := *cur
	invented.DLQID, invented.IdempotencyKey = source+"#invented", "invented"
	invented.Version, invented.PrevSeal = 1, ""
	if err := quarantine.SealRecord(&invented); err != nil {
		t.Fatal(err)
	}
	if err := plain.Create(ctx, &invented); err != nil {
		t.Fatal(err)
	}
	// 2. Another, with a made-up proof naming the ingest key.
	madeUp := invented
	madeUp.DLQID, madeUp.IdempotencyKey = source+"#madeup", "madeup"
	if err := quarantine.SealRecord(&madeUp); err != nil {
		t.Fatal(err)
	}
	item, err := dynamostore.Marshal(&madeUp)
	if err != nil {
		t.Fatal(err)
	}
	item[writerproof.Attr] = &types.AttributeValueMemberS{Value: writerproof.Proof{V: 1, Role: writerproof.RoleIngest, Key: w.arn[writerproof.RoleIngest], N: 1,
		MAC: base64.StdEncoding.EncodeToString(make([]byte, 32))}.Encode()}
	if _, err := l.st.Clients.DynamoDB.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(l.table), Item: item}); err != nil {
		t.Fatal(err)
	}
	// 3. A legal-looking next version: ids[1] parked by a made-up actor.
	cur1, err := plain.Get(ctx, ids[1])
	if err != nil {
		t.Fatal(err)
	}
	byHand, err := cur1.ParkManual("nobody@example.com", "parked by hand", now)
	if err != nil {
		t.Fatal(err)
	}
	if err := plain.Replace(ctx, cur1, byHand); err != nil {
		t.Fatal(err)
	}
	// 4. A version 1 proved by the redrive key (a role that never creates).
	wrongRole := invented
	wrongRole.DLQID, wrongRole.IdempotencyKey = source+"#wrongrole", "wrongrole"
	if err := quarantine.SealRecord(&wrongRole); err != nil {
		t.Fatal(err)
	}
	if err := redrive.Create(ctx, &wrongRole); err != nil {
		t.Fatal(err)
	}
	l.drain()
	l.digest()
	res := l.verify(w.check)
	for _, want := range []struct {
		kind dl.Kind
		id   string
	}{{dl.KindWriterMissing, invented.DLQID}, {dl.KindWriterInvalid, madeUp.DLQID}, {dl.KindWriterMissing, ids[1]}, {dl.KindWriterRole, wrongRole.DLQID}} {
		if !res.Has(want.kind, want.id) {
			t.Errorf("%s %s not named: %v", want.kind, want.id, res.Problems)
		}
	}
	if len(res.Problems) != 4 {
		t.Errorf("problems: %v", res.Problems)
	}
	// Without the writer check (as before writer proofs), all four pass.
	if res := l.verify(func(in *dl.Input) { in.CheckVersion = dynamostore.LedgerVersionCheck() }); !res.OK() {
		t.Errorf("without the writer check: %v", res.Problems)
	}
}

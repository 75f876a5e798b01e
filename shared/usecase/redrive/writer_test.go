package redrive_test

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	kmstypes "github.com/aws/aws-sdk-go-v2/service/kms/types"

	"github.com/dlqquarantine/dlqq/shared/adapter/dynamostore"
	"github.com/dlqquarantine/dlqq/shared/adapter/kmsmac"
	"github.com/dlqquarantine/dlqq/shared/dev/storetest"
	"github.com/dlqquarantine/dlqq/shared/domain/ledger"
	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
	"github.com/dlqquarantine/dlqq/shared/domain/writerproof"
	"github.com/dlqquarantine/dlqq/shared/usecase/ingest"
	"github.com/dlqquarantine/dlqq/shared/usecase/redrive"
)

// hmacKey creates a dev-kit KMS HMAC key (KMS GenerateMac/VerifyMac).
func hmacKey(t *testing.T, kc *kms.Client) string {
	t.Helper()
	out, err := kc.CreateKey(context.Background(), &kms.CreateKeyInput{KeySpec: kmstypes.KeySpecHmac256, KeyUsage: kmstypes.KeyUsageTypeGenerateVerifyMac})
	if err != nil {
		t.Fatal(err)
	}
	return aws.ToString(out.KeyMetadata.Arn)
}

// Every version ingest and redrive write carries a writer proof that
// verifies with KMS under its role's key, and a batch's claims, and its
// settles, share one tree each (announced: one GenerateMac a batch).
func TestWriterProofsOnEveryVersion(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEnv(t, false)
	kc := kms.NewFromConfig(stack.AWS)
	ingestKey, redriveKey := hmacKey(t, kc), hmacKey(t, kc)
	keys := writerproof.Keys{ingestKey: writerproof.RoleIngest, redriveKey: writerproof.RoleRedrive}
	log := &storetest.PutLog{API: stack.Clients.DynamoDB}
	table := stack.Names["QuarantineTable"]
	ip := writerproof.NewProver(kmsmac.MAC{API: kc, KeyID: ingestKey}, writerproof.RoleIngest)
	rp := writerproof.NewProver(kmsmac.MAC{API: kc, KeyID: redriveKey}, writerproof.RoleRedrive)
	e.q = ingest.NewQuarantiner(dynamostore.New(log, table).WithWriter(ip), e.payloads, e.clock.Now,
		ingest.QuarantinerConfig{Sources: map[string]*quarantine.Source{e.src.Name: e.src}})
	const n = 20
	e.seed(t, n, none)
	svc := e.service(nil, dynamostore.New(log, table).WithWriter(rp), redrive.Config{SettleWindow: time.Minute, SettleMargin: time.Second})
	before := rp.Calls()
	if _, err := svc.Run(ctx, e.request(n)); err != nil {
		t.Fatal(err)
	}
	e.drain(t, none)
	e.clock.Advance(2 * time.Minute)
	if _, err := svc.Run(ctx, redrive.Request{Action: redrive.ActionSettle, Source: e.src.Name, RequestedBy: "test"}); err != nil {
		t.Fatal(err)
	}
	check := dynamostore.LedgerWriterCheck(ctx, keys, kmsmac.Verifier{API: kc}.Verify)
	prev := map[string]ledger.Item{}
	counted := map[string]int{}
	for _, item := range log.Items() {
		it, err := dynamostore.LedgerItem(item)
		if err != nil {
			t.Fatal(err)
		}
		key := it.S("dlq_id")
		if !dynamostore.IsRecordKey(key) {
			continue // the source's marker
		}
		if err := check(prev[key], it); err != nil {
			t.Fatalf("%s version %s: %v", key, *it["version"].N, err)
		}
		prev[key] = it
		switch it.S("status") {
		case string(quarantine.StatusRedriving), string(quarantine.StatusResolved):
			// Claims and settles: announced, one tree per batch.
			counted[it.S("status")]++
			p, err := writerproof.Parse(it.S(writerproof.Attr))
			if err != nil || p.N != n {
				t.Fatalf("a %s version's proof is one of %d leaves, want the batch's %d (%v)", it.S("status"), p.N, n, err)
			}
		}
	}
	if len(prev) != n || counted[string(quarantine.StatusRedriving)] != n || counted[string(quarantine.StatusResolved)] != n {
		t.Fatalf("%d records, %v", len(prev), counted)
	}
	t.Logf("redrive: %d GenerateMac calls for %d records (claims, marks, settles); %d versions put", rp.Calls()-before, n, len(log.Items()))
}

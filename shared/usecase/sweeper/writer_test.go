package sweeper_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/dlqquarantine/dlqq/shared/adapter/dynamostore"
	"github.com/dlqquarantine/dlqq/shared/dev/macfake"
	"github.com/dlqquarantine/dlqq/shared/dev/storetest"
	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
	"github.com/dlqquarantine/dlqq/shared/domain/writerproof"
)

// A run's stubs are announced: the batch's stubs share one writer-proof
// tree, one GenerateMac for the batch, and each proof verifies under the
// sweeper's key.
func TestStubsShareOneWriterProofPerBatch(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	const n = 6
	for i := range n {
		e.parked(t, fmt.Sprintf("w%d", i), "")
	}
	e.clock.Advance(3 * time.Hour)
	const arn = "arn:aws:kms:us-east-1:000000000000:key/sweeper-test"
	fake := macfake.New(arn)
	p := writerproof.NewProver(macfake.MAC{Keys: fake, ARN: arn}, writerproof.RoleSweeper)
	log := &storetest.PutLog{API: e.st.Clients.DynamoDB}
	rep, err := e.sweeper(dynamostore.New(log, e.st.Names["QuarantineTable"]).WithWriter(p), nil).Run(ctx)
	if err != nil || len(rep.Archived) != n {
		t.Fatalf("report %+v %v", rep, err)
	}
	if got := p.Calls(); got != 1 {
		t.Errorf("%d GenerateMac calls for a batch of %d stubs, want 1", got, n)
	}
	stubs := 0
	for _, item := range log.Items() {
		r, err := dynamostore.Unmarshal(item)
		if err != nil || r.Status != quarantine.StatusArchived {
			continue
		}
		stubs++
		av, ok := item[writerproof.Attr].(*types.AttributeValueMemberS)
		if !ok {
			t.Fatalf("stub %s has no writer proof", r.DLQID)
		}
		pr, err := writerproof.Parse(av.Value)
		if err != nil || pr.N != n {
			t.Errorf("stub %s: a proof of %d leaves, want the batch's %d (%v)", r.DLQID, pr.N, n, err)
		}
		if role, err := writerproof.Check(ctx, writerproof.Keys{arn: writerproof.RoleSweeper}, fake.Verify, writerproof.Leaf{Key: r.DLQID, Version: r.Version, Seal: r.Seal}, av.Value); err != nil || role != writerproof.RoleSweeper {
			t.Errorf("stub %s: %s %v", r.DLQID, role, err)
		}
	}
	if stubs != n {
		t.Fatalf("%d stubs put, want %d", stubs, n)
	}
}

package template_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	dtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go/middleware"

	"github.com/dlqquarantine/dlqq/shared/adapter/dynamostore"
	"github.com/dlqquarantine/dlqq/shared/dev/embedded"
	"github.com/dlqquarantine/dlqq/shared/dev/localrunner"
	"github.com/dlqquarantine/dlqq/shared/dev/storetest"
	"github.com/dlqquarantine/dlqq/shared/usecase/ledger"
)

// crasher fails the next DynamoDB UpdateItem on an item whose key starts
// with an armed prefix, once, before it is sent: the function crashed
// between its previous call and this one. The recorder, which runs
// first, has noted the call all the same.
type crasher struct {
	mu     sync.Mutex
	prefix string
	hits   int
}

var errCrash = errors.New("injected crash before the write")

func (c *crasher) arm(prefix string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.prefix = prefix
}

func (c *crasher) option(stack *middleware.Stack) error {
	return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("crash-once",
		func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
			if p, ok := in.Parameters.(*dynamodb.UpdateItemInput); ok && awsmiddleware.GetServiceID(ctx) == "DynamoDB" {
				k, _ := p.Key["dlq_id"].(*dtypes.AttributeValueMemberS)
				c.mu.Lock()
				hit := c.prefix != "" && k != nil && strings.HasPrefix(k.Value, c.prefix)
				if hit {
					c.prefix = ""
					c.hits++
				}
				c.mu.Unlock()
				if hit {
					return middleware.InitializeOutput{}, middleware.Metadata{}, errCrash
				}
			}
			return next.HandleInitialize(ctx, in)
		}), middleware.After)
}

func (c *crasher) fired() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.hits
}

// driveLedger runs the ledger's two functions over the table's stream, as
// deployed: the stream function (stream, on its recorded clients) fed
// through the template's mapping, the way Lambda would (the poller reads
// the stream with the stack's own clients: Lambda's polling is checked as
// the mapping's, in onBehalf), and the digest function (digest, on its
// own recorded clients) through its entry point, along every path of
// design section 5:
//   - the baseline ({"action":"baseline"}), before the first segment;
//   - stream batches with records (segments, heads, counters applied);
//   - a batch retried after a crash between its segment's PUT and the
//     head's update: the retry lists the shard's segments, reads the one
//     the first try wrote, counts its versions and adopts it;
//   - a digest run that crashes between its digest's PUT and the digest
//     head's update, and the next run, which gets 412, reads that digest,
//     checks its signature and adopts it;
//   - a later change and a digest run that writes digest 2 after reading
//     digest 1.
func driveLedger(t *testing.T, st *embedded.Stack, f *localrunner.Functions, stream, digest *ledger.Service, recs map[string]*recorder, crash *crasher) {
	t.Helper()
	ctx := context.Background()
	poller := f.LedgerPoller(st.Clients, stream.HandleStream)
	// The baseline, before the ledger's first segment and digest (it is
	// refused after them).
	if _, err := digest.DigestEntry(ctx, []byte(`{"action":"baseline"}`)); err != nil {
		t.Fatalf("the baseline: %v", err)
	}
	crash.arm(dynamostore.LedgerKeyPrefix + "head#")
	if n, err := poller.Drain(ctx); err != nil || n == 0 {
		t.Fatalf("ledger stream: drained %d: %v", n, err)
	}
	if crash.fired() != 1 {
		t.Fatal("the crash before the head's update was not injected: no segment was written")
	}
	rec := recs["LedgerFunction"]
	for _, action := range []string{"s3:ListBucket", "s3:ListBucketVersions", "s3:GetObject", "s3:PutObject", "dynamodb:UpdateItem"} {
		if !rec.has(action) {
			t.Fatalf("the retried batch made no %s: the adopt path was not driven", action)
		}
	}
	if !rec.hasOp("TransactWriteItems") {
		t.Fatal("the ledger applied no counters")
	}

	crash.arm(dynamostore.LedgerDigestKey)
	if _, err := digest.Digest(ctx); !errors.Is(err, errCrash) {
		t.Fatalf("the digest run that crashes before its head's update: %v", err)
	}
	rep, err := digest.Digest(ctx)
	if err != nil || !rep.Adopted || rep.N != 1 {
		t.Fatalf("the digest run after the crash: %+v %v", rep, err)
	}
	if d := recs["DigestFunction"]; !d.has("kms:Sign") || !d.has("kms:GetPublicKey") || !d.has("lambda:ListEventSourceMappings") {
		t.Fatal("the digest runs neither signed, read the public key nor checked the pipeline")
	}

	// One more change: digest 2 reads digest 1 and follows it.
	if err := dynamostore.New(st.Clients.DynamoDB, f.IngestConfig.TableName).Create(ctx, storetest.Record(t, storetest.UniqueID("iam-ledgered"))); err != nil {
		t.Fatal(err)
	}
	if n, err := poller.Drain(ctx); err != nil || n == 0 {
		t.Fatalf("ledger stream after the park: drained %d: %v", n, err)
	}
	if rep, err := digest.Digest(ctx); err != nil || !rep.Written || rep.N != 2 {
		t.Fatalf("digest 2: %+v %v", rep, err)
	}
	if _, err := digest.DigestEntry(ctx, []byte(`{"action":"baseline"}`)); err != nil {
		t.Fatalf("the baseline run once it is complete: %v", err)
	}
	if _, err := digest.DigestEntry(ctx, []byte(`{"action":"digest"}`)); err != nil {
		t.Fatalf("the scheduled digest event: %v", err)
	}
}

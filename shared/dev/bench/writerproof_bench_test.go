package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	kmstypes "github.com/aws/aws-sdk-go-v2/service/kms/types"

	"github.com/dlqquarantine/dlqq/shared/adapter/dynamostore"
	"github.com/dlqquarantine/dlqq/shared/adapter/kmsmac"
	"github.com/dlqquarantine/dlqq/shared/adapter/s3store"
	"github.com/dlqquarantine/dlqq/shared/dev/embedded"
	"github.com/dlqquarantine/dlqq/shared/domain/writerproof"
	"github.com/dlqquarantine/dlqq/shared/usecase/ingest"
	"github.com/dlqquarantine/dlqq/shared/usecase/sweeper"
	"github.com/dlqquarantine/dlqq/shared/wire"
)

// proofMessages is how many messages the ingest run proves.
const proofMessages = 1000

// countingMAC counts the GenerateMac calls that reach KMS.
type countingMAC struct {
	kmsmac.API
	calls atomic.Int64
}

func (c *countingMAC) GenerateMac(ctx context.Context, in *kms.GenerateMacInput, opts ...func(*kms.Options)) (*kms.GenerateMacOutput, error) {
	c.calls.Add(1)
	return c.API.GenerateMac(ctx, in, opts...)
}

// BenchmarkWriterProofKMS is the writer proof's cost with the dev kit's
// KMS GenerateMac/VerifyMac (an HTTP call each, as in AWS, without AWS's
// latency): a tree of n versions MAC'd and verified once, and the real
// ingest handler's batches of 10, one at a time as one Lambda container
// serves them (concurrency 10, no announce step: the writes waiting while
// a MAC is in flight share the next one) counted in GenerateMac calls per
// batch.
func BenchmarkWriterProofKMS(b *testing.B) {
	ctx := context.Background()
	st := embedded.ForTest(b, embedded.Options{NoS3: true})
	key, err := st.Clients.KMS.CreateKey(ctx, &kms.CreateKeyInput{KeySpec: kmstypes.KeySpecHmac256, KeyUsage: kmstypes.KeyUsageTypeGenerateVerifyMac})
	if err != nil {
		b.Fatal(err)
	}
	arn := aws.ToString(key.KeyMetadata.Arn)
	keys := writerproof.Keys{arn: writerproof.RoleIngest}
	for _, n := range []int{1, 10, 50, 100} {
		b.Run(fmt.Sprintf("tree=%d", n), func(b *testing.B) {
			ls := make([]writerproof.Leaf, n)
			for i := range ls {
				ls[i] = writerproof.Leaf{Key: fmt.Sprintf("src#%d", i), Version: 1, Seal: fmt.Sprintf("%064x", i)}
			}
			for range b.N {
				p := writerproof.NewProver(kmsmac.MAC{API: st.Clients.KMS, KeyID: arn}, writerproof.RoleIngest)
				if err := p.Announce(ctx, ls); err != nil {
					b.Fatal(err)
				}
				var cache string
				for i, l := range ls {
					pr, err := p.Prove(ctx, l)
					if err != nil {
						b.Fatal(err)
					}
					verify := kmsmac.Verifier{API: st.Clients.KMS}.Verify
					if i > 0 && pr.MAC == cache {
						verify = nil // the verifier's cache: one VerifyMac per root
					}
					cache = pr.MAC
					if _, err := writerproof.Check(ctx, keys, verify, l, pr.Encode()); err != nil && verify != nil {
						b.Fatal(err)
					}
				}
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N), "µs/batch")
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N)/float64(n), "µs/msg")
			b.ReportMetric(1/float64(n), "GenerateMac/msg")
		})
	}
	b.Run("ingest-batch=10", func(b *testing.B) {
		counting := &countingMAC{API: st.Clients.KMS}
		var msgs int
		for range b.N {
			source := embedded.RandomName("wpbench")
			cfg := ingest.Config{TableName: st.Names["QuarantineTable"], WriterKeyID: arn, Sources: map[string]ingest.SourceConfig{
				source: {ARN: "arn:aws:sqs:us-east-1:000000000000:" + source, DLQ: source + "-dlq", IdempotencyPointer: "/event_id", Schema: "inventory-movement.v1"},
			}}
			h, err := wire.Ingest(ctx, cfg, &wire.Clients{DynamoDB: st.Clients.DynamoDB, KMSMAC: counting}, wire.Runtime{Log: slog.New(slog.NewJSONHandler(io.Discard, nil)), Metrics: io.Discard})
			if err != nil {
				b.Fatal(err)
			}
			// One batch at a time, as one Lambda container serves them.
			for j := 0; j < proofMessages; j += batchSize {
				var ev events.SQSEvent
				for k := j; k < j+batchSize; k++ {
					ev.Records = append(ev.Records, events.SQSMessage{
						MessageId: fmt.Sprintf("m-%d", k), Body: inventory(k), EventSource: "aws:sqs", EventSourceARN: "arn:aws:sqs:us-east-1:000000000000:" + source + "-dlq",
						Attributes: map[string]string{"ApproximateReceiveCount": "3", "SentTimestamp": "1764400000000", "DeadLetterQueueSourceArn": cfg.Sources[source].ARN},
					})
				}
				if resp, err := h.Handle(ctx, ev); err != nil || len(resp.BatchItemFailures) > 0 {
					b.Fatalf("batch failed: %v %v", err, resp.BatchItemFailures)
				}
			}
			msgs += proofMessages
		}
		b.ReportMetric(float64(counting.calls.Load())/float64(msgs)*batchSize, "GenerateMac/batch")
		b.ReportMetric(float64(counting.calls.Load())/float64(msgs), "GenerateMac/msg")
	})
}

// stubProofRecords is how many parked records the sweeper's run proves.
const stubProofRecords = 1000

// BenchmarkWriterProofSweeper is the sweeper's writer proofs with the dev
// kit's KMS: a run archives stubProofRecords parked records, its stubs
// announced a batch (up to 100) at a time, counted in GenerateMac calls
// per stub and per batch.
func BenchmarkWriterProofSweeper(b *testing.B) {
	ctx := context.Background()
	st := embedded.ForTest(b, embedded.Options{})
	key, err := st.Clients.KMS.CreateKey(ctx, &kms.CreateKeyInput{KeySpec: kmstypes.KeySpecHmac256, KeyUsage: kmstypes.KeyUsageTypeGenerateVerifyMac})
	if err != nil {
		b.Fatal(err)
	}
	table := st.Names["QuarantineTable"]
	counting := &countingMAC{API: st.Clients.KMS}
	var stubs int
	for range b.N {
		parkAll(b, st, stubProofRecords)
		p := writerproof.NewProver(kmsmac.MAC{API: counting, KeyID: aws.ToString(key.KeyMetadata.Arn)}, writerproof.RoleSweeper)
		svc := sweeper.New(dynamostore.New(st.Clients.DynamoDB, table).WithWriter(p), dynamostore.NewLister(st.Clients.DynamoDB, table),
			s3store.New(st.Clients.S3, st.Names["PayloadBucket"], ""), s3store.Archiver{API: st.Clients.S3}, nil, nil,
			slog.New(slog.NewJSONHandler(io.Discard, nil)), sweeper.Config{Bucket: st.Names["ArchiveBucket"], Retention: 24 * time.Hour, MaxPerRun: 100000})
		rep, err := svc.Run(ctx)
		if err != nil || len(rep.Archived) < stubProofRecords {
			b.Fatalf("sweep: %v, archived %d", err, len(rep.Archived))
		}
		stubs += len(rep.Archived)
	}
	b.ReportMetric(float64(counting.calls.Load())/float64(stubs), "GenerateMac/stub")
	b.ReportMetric(float64(counting.calls.Load())/float64(stubs)*100, "GenerateMac/100stubs")
}

package bench

import (
	"context"
	"io"
	"log/slog"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/dlqquarantine/dlqq/shared/adapter/dynamostore"
	"github.com/dlqquarantine/dlqq/shared/dev/embedded"
	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
	"github.com/dlqquarantine/dlqq/shared/runtime/fanout"
	"github.com/dlqquarantine/dlqq/shared/usecase/ingest"
	"github.com/dlqquarantine/dlqq/shared/usecase/redrive"
)

const redriveRecords = 5000

// seedSource creates a source queue and quarantines n records for it.
func seedSource(b *testing.B, st *embedded.Stack, n int) (*quarantine.Source, string, []*quarantine.Record) {
	b.Helper()
	ctx := context.Background()
	name := embedded.RandomName("rb")
	out, err := st.Clients.SQS.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name)})
	if err != nil {
		b.Fatal(err)
	}
	src := &quarantine.Source{Name: name, ARN: "arn:aws:sqs:us-east-1:000000000000:" + name, DLQName: name + "-dlq", IdempotencyPointer: "/event_id", RedriveCap: 3}
	clock := time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC)
	store := dynamostore.New(st.Clients.DynamoDB, st.Names["QuarantineTable"])
	q := ingest.NewQuarantiner(store, nil, func() time.Time { return clock }, ingest.QuarantinerConfig{Sources: map[string]*quarantine.Source{name: src}})
	var recs []*quarantine.Record
	for i := range n {
		clock = clock.Add(time.Millisecond) // distinct first_seen (docs/emulators.md)
		o, err := q.Quarantine(ctx, ingest.Message{MessageID: strconv.Itoa(i), Body: []byte(inventory(i)), SourceARN: src.ARN})
		if err != nil {
			b.Fatal(err)
		}
		recs = append(recs, o.Record)
	}
	return src, aws.ToString(out.QueueUrl), recs
}

// BenchmarkRedriveThroughput replays 5,000 records with the redrive service
// (batches of 50), then runs a raw loop of the same AWS calls on another
// 5,000 (conditional claim PutItem, SendMessageBatch of 10, conditional mark
// PutItem, with redrive's concurrency), and a naive replay that sends one
// SendMessage per record, all in the same run.
func BenchmarkRedriveThroughput(b *testing.B) {
	ctx := context.Background()
	st := embedded.ForTest(b, embedded.Options{NoS3: true})
	table := st.Names["QuarantineTable"]
	for i := 0; i < b.N; i++ {
		// The service.
		src, _, _ := seedSource(b, st, redriveRecords)
		svc := redrive.New(dynamostore.New(st.Clients.DynamoDB, table), dynamostore.NewLister(st.Clients.DynamoDB, table), nil, st.Clients.SQS,
			map[string]*quarantine.Source{src.Name: src}, nil, slog.New(slog.NewJSONHandler(io.Discard, nil)), redrive.Config{ApprovalThreshold: redriveRecords})
		start := time.Now()
		rep, err := svc.Run(ctx, redrive.Request{Source: src.Name, RequestedBy: "bench", MaxMessages: redriveRecords, BatchSize: 50, Approve: true})
		if err != nil || rep.Redriven.Count != redriveRecords {
			b.Fatalf("redrive: %v, %d redriven", err, rep.Redriven.Count)
		}
		svcRate := redriveRecords / time.Since(start).Seconds()

		// The raw loop of the same calls.
		_, rawURL, recs := seedSource(b, st, redriveRecords)
		type pair struct{ claim, mark *quarantine.Record }
		var pairs []pair
		now := time.Now()
		for _, r := range recs {
			c, err := r.Claim("bench", now, time.Minute)
			if err != nil {
				b.Fatal(err)
			}
			m, err := c.MarkRedriven("bench", "m", now)
			if err != nil {
				b.Fatal(err)
			}
			pairs = append(pairs, pair{c, m})
		}
		put := func(r *quarantine.Record, version int64) {
			item, _ := dynamostore.Marshal(r)
			cond, _ := expression.NewBuilder().WithCondition(expression.Name("version").Equal(expression.Value(version))).Build()
			if _, err := st.Clients.DynamoDB.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: item,
				ConditionExpression: cond.Condition(), ExpressionAttributeNames: cond.Names(), ExpressionAttributeValues: cond.Values()}); err != nil {
				b.Fatal(err)
			}
		}
		start = time.Now()
		for n := 0; n < len(pairs); n += 50 {
			batch := pairs[n:min(n+50, len(pairs))]
			inParallel(len(batch), func(j int) { put(batch[j].claim, batch[j].claim.Version-1) })
			for k := 0; k < len(batch); k += 10 {
				in := &sqs.SendMessageBatchInput{QueueUrl: aws.String(rawURL)}
				for j, p := range batch[k:min(k+10, len(batch))] {
					in.Entries = append(in.Entries, sqstypes.SendMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(j)), MessageBody: aws.String(p.claim.Body)})
				}
				if _, err := st.Clients.SQS.SendMessageBatch(ctx, in); err != nil {
					b.Fatal(err)
				}
			}
			inParallel(len(batch), func(j int) { put(batch[j].mark, batch[j].claim.Version) })
		}
		rawRate := redriveRecords / time.Since(start).Seconds()

		// The naive replay: read each record, send it alone, nothing else.
		_, naiveURL, naive := seedSource(b, st, redriveRecords)
		store := dynamostore.New(st.Clients.DynamoDB, table)
		start = time.Now()
		for _, r := range naive {
			got, err := store.Get(ctx, r.DLQID)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := st.Clients.SQS.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(naiveURL), MessageBody: aws.String(got.Body)}); err != nil {
				b.Fatal(err)
			}
		}
		naiveRate := redriveRecords / time.Since(start).Seconds()
		b.ReportMetric(svcRate, "redrive-msgs/s")
		b.ReportMetric(rawRate, "raw-msgs/s")
		b.ReportMetric(svcRate/rawRate, "ratio")
		b.ReportMetric(naiveRate, "naive-msgs/s")
	}
}

// inParallel runs f for each index, redrive.Concurrency at a time, as the
// service claims and marks the records of a batch.
func inParallel(n int, f func(i int)) {
	fanout.Run(context.Background(), n, redrive.Concurrency, func(_ context.Context, i int) error { f(i); return nil })
}

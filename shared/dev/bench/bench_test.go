// Package bench holds the project's load benchmarks on the embedded stack.
// They report figures, never assert timings: run them with `make bench`.
package bench

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/dlqquarantine/dlqq/shared/adapter/dynamostore"
	"github.com/dlqquarantine/dlqq/shared/adapter/s3store"
	"github.com/dlqquarantine/dlqq/shared/dev/embedded"
	"github.com/dlqquarantine/dlqq/shared/dev/lambdatest"
	"github.com/dlqquarantine/dlqq/shared/dev/latency"
	"github.com/dlqquarantine/dlqq/shared/dev/memstore"
	"github.com/dlqquarantine/dlqq/shared/dev/storetest"
	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
	"github.com/dlqquarantine/dlqq/shared/runtime/awsclients"
	"github.com/dlqquarantine/dlqq/shared/runtime/fanout"
	"github.com/dlqquarantine/dlqq/shared/usecase/ingest"
	"github.com/dlqquarantine/dlqq/shared/usecase/redrive"
	"github.com/dlqquarantine/dlqq/shared/usecase/sweeper"
	"github.com/dlqquarantine/dlqq/shared/wire"
)

const (
	messages    = 10000
	batchSize   = 10
	invocations = 4
)

func inventory(i int) string {
	return fmt.Sprintf(`{"event_id":"bench-%06d","ndc":"12345-678-90","lot":"LOT-%04d","quantity_delta":-5,"schedule":"CII","facility":"FAC-1","occurred_at":"2026-11-29T10:00:00Z"}`, i, i%5000)
}

// BenchmarkIngestThroughput pushes 10,000 dead-lettered messages through the
// real ingest handler in batches of 10 with 4 concurrent invocations, then
// runs a raw loop of the conditional PutItem calls ingest must make at the
// same concurrency (4 workers × batches of 10) in the same run, and reports
// both rates and their ratio; free-puts/s is the same puts with 40 always in
// flight (no batch barrier), for reference. Record writes are plain
// conditional writes (the ledger counts from the stream): a first arrival
// is one conditional PutItem, after one GetItem of its id that the raw
// loop does not make (BenchmarkWriteUnits counts both).
func BenchmarkIngestThroughput(b *testing.B) {
	ctx := context.Background()
	st := embedded.ForTest(b, embedded.Options{NoS3: true})
	table := st.Names["QuarantineTable"]
	for i := 0; i < b.N; i++ {
		source := embedded.RandomName("bench")
		cfg := ingest.Config{TableName: table, Sources: map[string]ingest.SourceConfig{
			source: {ARN: "arn:aws:sqs:us-east-1:000000000000:" + source, DLQ: source + "-dlq", IdempotencyPointer: "/event_id", Schema: "inventory-movement.v1"},
		}}
		h, err := wire.Ingest(context.Background(), cfg, &wire.Clients{DynamoDB: st.Clients.DynamoDB}, wire.Runtime{Log: slog.New(slog.NewJSONHandler(io.Discard, nil)), Metrics: io.Discard})
		if err != nil {
			b.Fatal(err)
		}
		// The raw loop: the same items, written with the same conditional
		// put, shaped as Lambda delivers them (rawRun).
		put := conditionalPut(ctx, b, st.Clients.DynamoDB, table)

		// Raw, ingest, raw again: the table grows as the run goes, so the raw
		// rate is the mean of one run before and one after the ingest run.
		raw1 := rawRun(rawItems(b, source+"-raw1"), messages, put)
		ingestRate := ingestRun(ctx, b, h, source, cfg.Sources[source].ARN, messages)

		raw2 := rawRun(rawItems(b, source+"-raw2"), messages, put)
		rawRate := (raw1 + raw2) / 2
		// For reference: the same puts free-running, 40 always in flight.
		free := make(chan map[string]ddbtypes.AttributeValue, messages)
		for _, it := range rawItems(b, source+"-free") {
			free <- it
		}
		close(free)
		start := time.Now()
		run(invocations*batchSize, func() {
			for it := range free {
				put(it)
			}
		})
		freeRate := messages / time.Since(start).Seconds()
		b.ReportMetric(freeRate, "free-puts/s")
		b.ReportMetric(ingestRate, "ingest-msgs/s")
		b.ReportMetric(rawRate, "raw-puts/s")
		b.ReportMetric(ingestRate/rawRate, "ratio")
	}
}

// rawItems builds the DynamoDB items ingest would write, outside the timing.
func rawItems(b *testing.B, source string) []map[string]ddbtypes.AttributeValue {
	store := memstore.New()
	q := ingest.NewQuarantiner(store, nil, nil, ingest.QuarantinerConfig{Sources: map[string]*quarantine.Source{
		source: {Name: source, ARN: "arn:aws:sqs:us-east-1:000000000000:" + source, DLQName: source + "-dlq", IdempotencyPointer: "/event_id"},
	}})
	for j := range messages {
		if _, err := q.Quarantine(context.Background(), ingest.Message{
			MessageID: fmt.Sprintf("m-%d", j), Body: []byte(inventory(j)), SourceARN: "arn:aws:sqs:us-east-1:000000000000:" + source,
		}); err != nil {
			b.Fatal(err)
		}
	}
	var items []map[string]ddbtypes.AttributeValue
	for _, r := range store.All() {
		it, err := dynamostore.Marshal(r)
		if err != nil {
			b.Fatal(err)
		}
		items = append(items, it)
	}
	return items
}

func run(workers int, f func()) {
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() { defer wg.Done(); f() }()
	}
	wg.Wait()
}

// BenchmarkIngestBootstrap reports the size of the linux/arm64 bootstrap that
// ships, and the start-up time of this machine's build of the same code to
// its first Runtime API poll on kumo (median of 10 cold starts).
func BenchmarkIngestBootstrap(b *testing.B) {
	ctx := context.Background()
	dir := b.TempDir()
	root := filepath.Join("..", "..", "..")
	arm := filepath.Join(dir, "arm64-bootstrap")
	if out, err := lambdatest.Command(ctx, root, "GOOS=linux", "GOARCH=arm64", "-o", arm, "./functions/ingest").CombinedOutput(); err != nil {
		b.Fatalf("%v: %s", err, out)
	}
	fi, err := os.Stat(arm)
	if err != nil {
		b.Fatal(err)
	}
	bin, err := lambdatest.Build(ctx, "ingest", dir)
	if err != nil {
		b.Fatal(err)
	}
	st := embedded.ForTest(b, embedded.Options{NoS3: true})
	env, err := lambdatest.Env(st, "IngestFunction")
	if err != nil {
		b.Fatal(err)
	}
	for i := 0; i < b.N; i++ {
		var starts []time.Duration
		for range 10 {
			f, err := lambdatest.Start(ctx, st, embedded.RandomName("ingest"), bin, env, 30*time.Second)
			if err != nil {
				b.Fatal(err)
			}
			starts = append(starts, f.StartUp)
			f.Close()
		}
		slices.Sort(starts)
		b.ReportMetric(float64(starts[len(starts)/2].Microseconds())/1000, "startup-ms")
		b.ReportMetric(float64(fi.Size())/1e6, "arm64-MB")
	}
}

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
// SendMessage per record, all in the same run. Then the service and the raw
// loop again, 2,000 records each, with AWS's latency on every call
// (latency.AWS, docs/performance.md): model-msgs/s, model-raw-msgs/s and
// model-ratio.
func BenchmarkRedriveThroughput(b *testing.B) {
	ctx := context.Background()
	st := embedded.ForTest(b, embedded.Options{NoS3: true})
	modelled := modelClients(st, 29)
	for i := 0; i < b.N; i++ {
		svcRate, rawRate := redrivePass(b, st, st.Clients.DynamoDB, st.Clients.SQS, redriveRecords)

		// The naive replay: read each record, send it alone, nothing else.
		naiveSrc, naiveURL, naive := seedSource(b, st, redriveRecords)
		store := dynamostore.New(st.Clients.DynamoDB, st.Names["QuarantineTable"])
		start := time.Now()
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
		removeSource(b, st, naiveSrc.Name)
		modelSvc, modelRaw := redrivePass(b, st, modelled.DynamoDB, modelled.SQS, modelledRedriveRecords)
		b.ReportMetric(svcRate, "redrive-msgs/s")
		b.ReportMetric(rawRate, "raw-msgs/s")
		b.ReportMetric(svcRate/rawRate, "ratio")
		b.ReportMetric(naiveRate, "naive-msgs/s")
		b.ReportMetric(modelSvc, "model-msgs/s")
		b.ReportMetric(modelRaw, "model-raw-msgs/s")
		b.ReportMetric(modelSvc/modelRaw, "model-ratio")
	}
}

// modelledRedriveRecords is how many records a modelled pass replays.
const modelledRedriveRecords = 2000

// modelClients are st's clients with the latency model on every call.
func modelClients(st *embedded.Stack, seed uint64) *awsclients.Clients {
	cfg := st.AWS.Copy()
	cfg.HTTPClient = latency.AWS.Client(cfg.HTTPClient, seed)
	return awsclients.New(cfg, awsclients.Options{Local: true})
}

// redrivePass replays n seeded records with the redrive service on the
// given clients, then the raw loop of the same calls on n others, and
// returns both rates.
func redrivePass(b *testing.B, st *embedded.Stack, ddb *dynamodb.Client, sqsc *sqs.Client, n int) (svcRate, rawRate float64) {
	ctx := context.Background()
	table := st.Names["QuarantineTable"]
	src, _, _ := seedSource(b, st, n)
	svc := redrive.New(dynamostore.New(ddb, table), dynamostore.NewLister(ddb, table), nil, sqsc,
		map[string]*quarantine.Source{src.Name: src}, nil, slog.New(slog.NewJSONHandler(io.Discard, nil)), redrive.Config{ApprovalThreshold: n})
	start := time.Now()
	rep, err := svc.Run(ctx, redrive.Request{Source: src.Name, RequestedBy: "bench", MaxMessages: n, BatchSize: 50, Approve: true})
	if err != nil || rep.Redriven.Count != n {
		b.Fatalf("redrive: %v, %d redriven", err, rep.Redriven.Count)
	}
	svcRate = float64(n) / time.Since(start).Seconds()
	removeSource(b, st, src.Name)

	// The raw loop of the same calls.
	rawSrc, rawURL, recs := seedSource(b, st, n)
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
		if _, err := ddb.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: item,
			ConditionExpression: cond.Condition(), ExpressionAttributeNames: cond.Names(), ExpressionAttributeValues: cond.Values()}); err != nil {
			b.Fatal(err)
		}
	}
	start = time.Now()
	for k := 0; k < len(pairs); k += 50 {
		batch := pairs[k:min(k+50, len(pairs))]
		inParallel(len(batch), func(j int) { put(batch[j].claim, batch[j].claim.Version-1) })
		inParallel((len(batch)+9)/10, func(c int) {
			in := &sqs.SendMessageBatchInput{QueueUrl: aws.String(rawURL)}
			for j, p := range batch[c*10 : min(c*10+10, len(batch))] {
				in.Entries = append(in.Entries, sqstypes.SendMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(j)), MessageBody: aws.String(p.claim.Body)})
			}
			if _, err := sqsc.SendMessageBatch(ctx, in); err != nil {
				b.Fatal(err)
			}
		})
		inParallel(len(batch), func(j int) { put(batch[j].mark, batch[j].claim.Version) })
	}
	rawRate = float64(n) / time.Since(start).Seconds()
	removeSource(b, st, rawSrc.Name)
	return svcRate, rawRate
}

// inParallel runs f for each index, redrive.Concurrency at a time, as the
// service claims and marks the records of a batch.
func inParallel(n int, f func(i int)) {
	fanout.Run(context.Background(), n, redrive.Concurrency, func(_ context.Context, i int) error { f(i); return nil })
}

const sweepRecords = 2000

// parkAll parks n fresh records of a new source.
func parkAll(b *testing.B, st *embedded.Stack, n int) []*quarantine.Record {
	b.Helper()
	ctx := context.Background()
	_, _, recs := seedSource(b, st, n)
	store := dynamostore.New(st.Clients.DynamoDB, st.Names["QuarantineTable"])
	var out []*quarantine.Record
	for _, r := range recs {
		p, err := r.ParkPoison("bench", time.Now().Add(-time.Hour))
		if err != nil {
			b.Fatal(err)
		}
		if err := store.Replace(ctx, r, p); err != nil {
			b.Fatal(err)
		}
		out = append(out, p)
	}
	return out
}

// BenchmarkSweeperThroughput archives 2,000 parked records with the sweeper
// (sweeper.Concurrency at once), then runs a raw loop of the calls each
// archive needs at the same concurrency: a conditional Object Lock
// PutObject and a conditional PutItem, in the same run.
func BenchmarkSweeperThroughput(b *testing.B) {
	st := embedded.ForTest(b, embedded.Options{})
	modelled := modelClients(st, 31)
	for i := 0; i < b.N; i++ {
		sweepRate, rawRate := sweepPass(b, st, st.Clients, sweepRecords, i)
		modelSweep, modelRaw := sweepPass(b, st, modelled, modelledSweepRecords, i)
		b.ReportMetric(sweepRate, "archived/s")
		b.ReportMetric(rawRate, "raw/s")
		b.ReportMetric(sweepRate/rawRate, "ratio")
		b.ReportMetric(modelSweep, "model-archived/s")
		b.ReportMetric(modelRaw, "model-raw/s")
		b.ReportMetric(modelSweep/modelRaw, "model-ratio")
	}
}

// modelledSweepRecords is how many records a modelled sweeper pass
// archives (at S3's and DynamoDB's latency each).
const modelledSweepRecords = 1000

// sweepPass archives n parked records with the sweeper on cl, then runs the
// raw loop of the calls each archive needs on n others, and returns both
// rates.
func sweepPass(b *testing.B, st *embedded.Stack, cl *awsclients.Clients, n, round int) (sweepRate, rawRate float64) {
	ctx := context.Background()
	table, bucket := st.Names["QuarantineTable"], st.Names["ArchiveBucket"]
	store := dynamostore.New(cl.DynamoDB, table)
	swept := parkAll(b, st, n)
	svc := sweeper.New(store, dynamostore.NewLister(cl.DynamoDB, table), s3store.New(cl.S3, st.Names["PayloadBucket"], ""),
		s3store.Archiver{API: cl.S3}, nil, nil, slog.New(slog.NewJSONHandler(io.Discard, nil)),
		sweeper.Config{Bucket: bucket, Retention: 24 * time.Hour, MaxPerRun: 100000})
	start := time.Now()
	rep, err := svc.Run(ctx)
	if err != nil || len(rep.Archived) < n {
		b.Fatalf("sweep: %v, archived %d", err, len(rep.Archived))
	}
	sweepRate = float64(len(rep.Archived)) / time.Since(start).Seconds()
	removeSource(b, st, swept[0].Source)

	raw := parkAll(b, st, n)
	type job struct {
		key  string
		body []byte
		sum  string
		stub *quarantine.Record
		prev int64
	}
	var jobs []job
	for _, r := range raw {
		body, _ := json.Marshal(r)
		sum := sha256.Sum256(body)
		stub, err := r.ArchiveStub("bench", quarantine.ArchiveRef{Bucket: bucket, Key: "raw/" + r.DLQID, Seal: r.Seal}, time.Now())
		if err != nil {
			b.Fatal(err)
		}
		jobs = append(jobs, job{key: "raw/" + r.DLQID + "/" + strconv.Itoa(round), body: body, sum: base64.StdEncoding.EncodeToString(sum[:]), stub: stub, prev: r.Version})
	}
	start = time.Now()
	// As the sweeper: the objects of a batch of readAhead, Concurrency at
	// once, then their stubs, Concurrency at once.
	const readAhead = 100
	for from := 0; from < len(jobs); from += readAhead {
		batch := jobs[from:min(from+readAhead, len(jobs))]
		errs := fanout.Run(ctx, len(batch), sweeper.Concurrency, func(ctx context.Context, i int) error {
			j := batch[i]
			_, err := cl.S3.PutObject(ctx, &s3.PutObjectInput{
				Bucket: aws.String(bucket), Key: aws.String(j.key), Body: bytes.NewReader(j.body), ChecksumSHA256: aws.String(j.sum),
				IfNoneMatch: aws.String("*"), ObjectLockMode: s3types.ObjectLockModeCompliance, ObjectLockRetainUntilDate: aws.Time(time.Now().Add(24 * time.Hour)),
			})
			return err
		})
		errs = append(errs, fanout.Run(ctx, len(batch), sweeper.Concurrency, func(ctx context.Context, i int) error {
			j := batch[i]
			item, _ := dynamostore.Marshal(j.stub)
			cond, _ := expression.NewBuilder().WithCondition(expression.Name("version").Equal(expression.Value(j.prev))).Build()
			_, err := cl.DynamoDB.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: item,
				ConditionExpression: cond.Condition(), ExpressionAttributeNames: cond.Names(), ExpressionAttributeValues: cond.Values()})
			return err
		})...)
		if err := errors.Join(errs...); err != nil {
			b.Fatal(err)
		}
	}
	rawRate = float64(n) / time.Since(start).Seconds()
	removeSource(b, st, raw[0].Source)
	return sweepRate, rawRate
}

// removeSource deletes a pass's records, so that every pass of a
// benchmark runs on a table of its own records only: kumo's Query and
// Scan read the whole table (DynamoDB's Query reads only what it
// returns), so a table grown by the passes before would slow the
// listings of the next, and a service pass run after a raw one would
// compare unlike.
func removeSource(b *testing.B, st *embedded.Stack, source string) {
	b.Helper()
	if err := storetest.RemoveSource(context.Background(), st.Clients.DynamoDB, st.Names["QuarantineTable"], source); err != nil {
		b.Fatal(err)
	}
}

// rawRun puts the first n items with put as Lambda delivers ingest's
// batches: invocations workers, each putting a batch of batchSize at once
// and waiting for the batch before the next; it returns the puts per
// second.
func rawRun(items []map[string]ddbtypes.AttributeValue, n int, put func(map[string]ddbtypes.AttributeValue)) float64 {
	work := make(chan []map[string]ddbtypes.AttributeValue, n/batchSize)
	for j := 0; j < n; j += batchSize {
		work <- items[j : j+batchSize]
	}
	close(work)
	start := time.Now()
	run(invocations, func() {
		for batch := range work {
			var wg sync.WaitGroup
			for _, it := range batch {
				wg.Add(1)
				go func() { defer wg.Done(); put(it) }()
			}
			wg.Wait()
		}
	})
	return float64(n) / time.Since(start).Seconds()
}

// conditionalPut is ingest's first-arrival write without ingest: a PutItem
// of an item into table only if no item holds its dlq_id.
func conditionalPut(ctx context.Context, b *testing.B, ddb *dynamodb.Client, table string) func(map[string]ddbtypes.AttributeValue) {
	cond, _ := expression.NewBuilder().WithCondition(expression.AttributeNotExists(expression.Name("dlq_id"))).Build()
	return func(it map[string]ddbtypes.AttributeValue) {
		if _, err := ddb.PutItem(ctx, &dynamodb.PutItemInput{
			TableName: aws.String(table), Item: it, ConditionExpression: cond.Condition(), ExpressionAttributeNames: cond.Names(),
		}); err != nil {
			b.Error(err)
		}
	}
}

// ingestRun hands h n inventory messages of source's DLQ (dead-lettered
// from sourceARN) as Lambda does: batches of batchSize, invocations at
// once; it returns the messages per second.
func ingestRun(ctx context.Context, b *testing.B, h *ingest.Handler, source, sourceARN string, n int) float64 {
	batches := make(chan events.SQSEvent, n/batchSize)
	for j := 0; j < n; j += batchSize {
		var ev events.SQSEvent
		for k := j; k < j+batchSize; k++ {
			ev.Records = append(ev.Records, events.SQSMessage{
				MessageId: fmt.Sprintf("m-%d", k), Body: inventory(k), EventSource: "aws:sqs", EventSourceARN: "arn:aws:sqs:us-east-1:000000000000:" + source + "-dlq",
				Attributes: map[string]string{"ApproximateReceiveCount": "3", "SentTimestamp": "1764400000000", "DeadLetterQueueSourceArn": sourceARN},
			})
		}
		batches <- ev
	}
	close(batches)
	start := time.Now()
	run(invocations, func() {
		for ev := range batches {
			resp, err := h.Handle(ctx, ev)
			if err != nil || len(resp.BatchItemFailures) > 0 {
				b.Errorf("batch failed: %v %v", err, resp.BatchItemFailures)
			}
		}
	})
	return float64(n) / time.Since(start).Seconds()
}

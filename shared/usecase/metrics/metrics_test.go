package metrics_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatch"
	cwtypes "github.com/aws/aws-sdk-go-v2/service/cloudwatch/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/dlqquarantine/dlqq/shared/adapter/dynamostore"
	"github.com/dlqquarantine/dlqq/shared/adapter/s3store"
	"github.com/dlqquarantine/dlqq/shared/dev/countstream"
	"github.com/dlqquarantine/dlqq/shared/dev/embedded"
	"github.com/dlqquarantine/dlqq/shared/dev/storetest"
	"github.com/dlqquarantine/dlqq/shared/domain/policy"
	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
	"github.com/dlqquarantine/dlqq/shared/runtime/clock"
	"github.com/dlqquarantine/dlqq/shared/usecase/ingest"
	"github.com/dlqquarantine/dlqq/shared/usecase/metrics"
	"github.com/dlqquarantine/dlqq/shared/usecase/redrive"
	"github.com/dlqquarantine/dlqq/shared/usecase/sweeper"
)

var stack *embedded.Stack

func TestMain(m *testing.M) { embedded.Main(m, embedded.Options{NoS3: true}, &stack) }

type env struct {
	src   *quarantine.Source
	store *dynamostore.Store
	list  *dynamostore.Lister
	q     *ingest.Quarantiner
	clock *clock.Fake
	dlq   string
}

func newEnv(t *testing.T) *env {
	t.Helper()
	name := embedded.RandomName("m")
	out, err := stack.Clients.SQS.CreateQueue(context.Background(), &sqs.CreateQueueInput{QueueName: aws.String(name + "-dlq")})
	if err != nil {
		t.Fatal(err)
	}
	table := stack.Names["QuarantineTable"]
	e := &env{
		src:   &quarantine.Source{Name: name, ARN: "arn:aws:sqs:us-east-1:000000000000:" + name, DLQName: name + "-dlq", IdempotencyPointer: "/k", RedriveCap: 1},
		store: dynamostore.New(stack.Clients.DynamoDB, table), list: dynamostore.NewLister(stack.Clients.DynamoDB, table),
		clock: clock.NewFake(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)), dlq: aws.ToString(out.QueueUrl),
	}
	e.q = ingest.NewQuarantiner(e.store, nil, e.clock.Now, ingest.QuarantinerConfig{Sources: map[string]*quarantine.Source{name: e.src}})
	return e
}

func (e *env) service(c *counting) *metrics.Service {
	s := &metrics.Service{SQS: stack.Clients.SQS, Counters: countstream.NewReader(stack), Marks: e.store, Signatures: countstream.NewReader(stack), Lister: e.list, Store: e.store,
		CloudWatch: stack.Clients.CloudWatch, Sources: map[string]*quarantine.Source{e.src.Name: e.src}, Now: e.clock.Now,
		Log: slog.New(slog.NewJSONHandler(io.Discard, nil))}
	if c != nil {
		c.wrap(s)
	}
	return s
}

// at quarantines key with the consumer's reason at the clock's time.
func (e *env) at(t *testing.T, offset time.Duration, key, reason, body string) *quarantine.Record {
	t.Helper()
	e.clock = clock.NewFake(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC).Add(offset))
	e.q = ingest.NewQuarantiner(e.store, nil, e.clock.Now, ingest.QuarantinerConfig{Sources: map[string]*quarantine.Source{e.src.Name: e.src}})
	attrs := map[string]quarantine.Attribute{}
	if reason != "" {
		attrs[quarantine.AttrFailureReason] = quarantine.Attribute{DataType: "String", StringValue: reason}
	}
	if body == "" {
		body = `{"k":"` + key + `"}`
	}
	out, err := e.q.Quarantine(context.Background(), ingest.Message{MessageID: key + offset.String(), SourceARN: e.src.ARN, Attributes: attrs, Body: []byte(body)})
	if err != nil {
		t.Fatal(err)
	}
	return out.Record
}

func (e *env) step(t *testing.T, id string, f func(r *quarantine.Record) (*quarantine.Record, error)) {
	t.Helper()
	r, err := e.store.Get(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	next, err := f(r)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.store.Replace(context.Background(), r, next); err != nil {
		t.Fatal(err)
	}
}

// A known scenario: each published metric, read back from the emulator's
// CloudWatch, equals what the scenario implies.
func TestKnownScenario(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	t0 := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	a1 := e.at(t, 0, "a1", "timeout", "")
	e.at(t, time.Minute, "a2", "timeout", "")
	p1 := e.at(t, 2*time.Minute, "p1", "timeout", "")
	r1 := e.at(t, 3*time.Minute, "r1", "timeout", "")
	c1 := e.at(t, 3*time.Minute, "c1", "timeout", "")
	e.step(t, p1.DLQID, func(r *quarantine.Record) (*quarantine.Record, error) {
		return r.ParkPoison("t", t0.Add(5*time.Minute))
	})
	for _, id := range []string{r1.DLQID, c1.DLQID} {
		e.step(t, id, func(r *quarantine.Record) (*quarantine.Record, error) {
			return r.Claim("t", t0.Add(4*time.Minute), time.Minute)
		})
		e.step(t, id, func(r *quarantine.Record) (*quarantine.Record, error) {
			return r.MarkRedriven("t", "m", t0.Add(4*time.Minute))
		})
	}
	e.step(t, r1.DLQID, func(r *quarantine.Record) (*quarantine.Record, error) {
		return r.Settle(t0.Add(6*time.Minute), time.Minute)
	})
	e.at(t, 7*time.Minute, "c1", "timeout", "") // c1's replay came back
	e.at(t, 9*time.Minute+10*time.Second, "a3", "timeout", "")
	e.at(t, 9*time.Minute+20*time.Second, "b1", "", "not json")
	for range 3 {
		if _, err := stack.Clients.SQS.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(e.dlq), MessageBody: aws.String("x")}); err != nil {
			t.Fatal(err)
		}
	}
	e.clock = clock.NewFake(t0.Add(10*time.Minute + 30*time.Second))
	reps, err := e.service(nil).Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	_ = a1
	want := map[string]float64{
		metrics.MetricDLQDepth: 3, metrics.MetricDLQInFlight: 0, metrics.MetricOldestAge: 630, metrics.MetricArrivals: 2,
		metrics.MetricSuccessRate: 50, metrics.MetricPoison: 1, metrics.MetricNewPoison: 1, metrics.MetricDominantShare: 80,
	}
	for name, v := range want {
		if got := readBack(t, name, e.src.Name); got != v {
			t.Errorf("%s = %v, want %v (report %+v)", name, got, v, reps[0])
		}
	}
	for key, v := range map[[2]string]float64{
		{"QUARANTINED", "exhausted"}: 4, {"QUARANTINED", "validation"}: 1, {"PARKED", "poison"}: 1, {"RESOLVED", "exhausted"}: 1, {"REDRIVEN", "exhausted"}: 0,
	} {
		if got := readBack(t, metrics.MetricRecords, e.src.Name, metrics.DimStatus, key[0], metrics.DimClass, key[1]); got != v {
			t.Errorf("Records %v = %v, want %v", key, got, v)
		}
	}
	if reps[0].DominantSignature != "consumer|timeout|" {
		t.Errorf("dominant signature %q", reps[0].DominantSignature)
	}
}

// A replay that settled (RESOLVED) and then came back after all is a
// failure, not a success and a failure: the success rate over both hours is
// 0, the standing policy that sent it sees the comeback, and the counters
// still equal a recount. (It runs before TestCallsDoNotGrowWithTheTable,
// whose 100,000 QUARANTINED records of another source the oldest-record
// listing would read past on the emulator.)
func TestComebackAfterResolvedIsNoSuccess(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	t0 := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	r1 := e.at(t, 0, "r1", "timeout", "")
	const actor = quarantine.PolicyActorPrefix + "p-late"
	e.step(t, r1.DLQID, func(r *quarantine.Record) (*quarantine.Record, error) {
		return r.Claim(actor, t0.Add(4*time.Minute), time.Minute)
	})
	e.step(t, r1.DLQID, func(r *quarantine.Record) (*quarantine.Record, error) {
		return r.MarkRedriven(actor, "m-1", t0.Add(4*time.Minute))
	})
	e.step(t, r1.DLQID, func(r *quarantine.Record) (*quarantine.Record, error) {
		return r.Settle(t0.Add(30*time.Minute), 15*time.Minute) // resolved in the 12:00 hour
	})
	back := e.at(t, 70*time.Minute, "r1", "timeout", "") // back in the 13:00 hour
	if back.Status != quarantine.StatusQuarantined {
		t.Fatalf("came back as %s", back.Status)
	}
	e.clock = clock.NewFake(t0.Add(80 * time.Minute))
	reps, err := e.service(nil).Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if rate := reps[0].RedriveSuccessRate; rate == nil || *rate != 0 {
		got := "none"
		if rate != nil {
			got = fmt.Sprintf("%.0f %%", *rate)
		}
		t.Fatalf("success rate %s, want 0: the only replay came back", got)
	}
	if sent, cameBack, err := policy.Counts(ctx, countstream.NewReader(stack), e.src.Name, "p-late"); err != nil || sent != 1 || cameBack != 1 {
		t.Fatalf("policy counters sent %d, came back %d (%v); want 1 and 1", sent, cameBack, err)
	}
	// The recount: the one record is QUARANTINED/exhausted.
	for _, st := range []quarantine.Status{quarantine.StatusQuarantined, quarantine.StatusRedriving, quarantine.StatusRedriven,
		quarantine.StatusResolved, quarantine.StatusParked, quarantine.StatusArchived} {
		for _, c := range []quarantine.Class{quarantine.ClassValidation, quarantine.ClassExhausted, quarantine.ClassPoison} {
			want := int64(0)
			if st == back.Status && c == back.FailureClass {
				want = 1
			}
			if got := storetest.StateCount(t, countstream.NewReader(stack), e.src.Name, st, c); got != want {
				t.Errorf("state counter %s/%s = %d, recount %d", st, c, got, want)
			}
		}
	}
}

func readBack(t *testing.T, name, source string, dims ...string) float64 {
	t.Helper()
	ds := []cwtypes.Dimension{{Name: aws.String(metrics.DimSource), Value: aws.String(source)}}
	for i := 0; i < len(dims); i += 2 {
		ds = append(ds, cwtypes.Dimension{Name: aws.String(dims[i]), Value: aws.String(dims[i+1])})
	}
	out, err := stack.Clients.CloudWatch.GetMetricStatistics(context.Background(), &cloudwatch.GetMetricStatisticsInput{
		Namespace: aws.String("DLQQuarantine"), MetricName: aws.String(name), Dimensions: ds,
		StartTime: aws.Time(time.Now().Add(-time.Hour)), EndTime: aws.Time(time.Now().Add(time.Hour)),
		Period: aws.Int32(60), Statistics: []cwtypes.Statistic{cwtypes.StatisticMaximum},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Datapoints) != 1 {
		t.Fatalf("%s %v: %d datapoints", name, dims, len(out.Datapoints))
	}
	return aws.ToFloat64(out.Datapoints[0].Maximum)
}

// counting wraps every client the service uses and counts its calls.
type counting struct{ n atomic.Int64 }

type countSQS struct {
	metrics.QueueAPI
	c *counting
}

func (s countSQS) GetQueueUrl(ctx context.Context, in *sqs.GetQueueUrlInput, o ...func(*sqs.Options)) (*sqs.GetQueueUrlOutput, error) {
	s.c.n.Add(1)
	return s.QueueAPI.GetQueueUrl(ctx, in, o...)
}

func (s countSQS) GetQueueAttributes(ctx context.Context, in *sqs.GetQueueAttributesInput, o ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error) {
	s.c.n.Add(1)
	return s.QueueAPI.GetQueueAttributes(ctx, in, o...)
}

type countDDB struct {
	*dynamodb.Client
	c *counting
}

func (d countDDB) BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, o ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error) {
	d.c.n.Add(1)
	return d.Client.BatchGetItem(ctx, in, o...)
}

func (d countDDB) Query(ctx context.Context, in *dynamodb.QueryInput, o ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	d.c.n.Add(1)
	return d.Client.Query(ctx, in, o...)
}

func (d countDDB) GetItem(ctx context.Context, in *dynamodb.GetItemInput, o ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	d.c.n.Add(1)
	return d.Client.GetItem(ctx, in, o...)
}

func (d countDDB) PutItem(ctx context.Context, in *dynamodb.PutItemInput, o ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	d.c.n.Add(1)
	return d.Client.PutItem(ctx, in, o...)
}

type countCW struct {
	metrics.MetricsAPI
	c *counting
}

func (w countCW) PutMetricData(ctx context.Context, in *cloudwatch.PutMetricDataInput, o ...func(*cloudwatch.Options)) (*cloudwatch.PutMetricDataOutput, error) {
	w.c.n.Add(1)
	return w.MetricsAPI.PutMetricData(ctx, in, o...)
}

func (c *counting) wrap(s *metrics.Service) {
	ddb := countDDB{stack.Clients.DynamoDB, c}
	table := stack.Names["QuarantineTable"]
	store, list := dynamostore.New(ddb, table), dynamostore.NewLister(ddb, table)
	s.SQS, s.CloudWatch = countSQS{s.SQS, c}, countCW{s.CloudWatch, c}
	// The counters are the ledger's, caught up with the stream (its reads
	// are not the metrics function's).
	drained := &countstream.Reader{Stack: stack, Counters: store, Signatures: list}
	s.Counters, s.Signatures, s.Lister, s.Store, s.Marks = drained, drained, list, store, store
}

// seed writes n quarantined records of the source straight into the table.
func (e *env) seed(t *testing.T, n int) {
	t.Helper()
	ctx := context.Background()
	table := stack.Names["QuarantineTable"]
	base := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	var batch []ddbtypes.WriteRequest
	flush := func() {
		if len(batch) == 0 {
			return
		}
		req := map[string][]ddbtypes.WriteRequest{table: batch}
		for len(req) > 0 {
			out, err := stack.Clients.DynamoDB.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: req})
			if err != nil {
				t.Fatal(err)
			}
			req = out.UnprocessedItems
		}
		batch = nil
	}
	for i := range n {
		id := fmt.Sprintf("%s#k%07d", e.src.Name, i)
		batch = append(batch, ddbtypes.WriteRequest{PutRequest: &ddbtypes.PutRequest{Item: map[string]ddbtypes.AttributeValue{
			"dlq_id": &ddbtypes.AttributeValueMemberS{Value: id},
			"status": &ddbtypes.AttributeValueMemberS{Value: "QUARANTINED"},
			// In the source index, as the store writes a record.
			dynamostore.IndexKeyAttr: &ddbtypes.AttributeValueMemberS{Value: dynamostore.RecordPartition(e.src.Name, quarantine.StatusQuarantined, dynamostore.IndexShard(id))},
			"source":                 &ddbtypes.AttributeValueMemberS{Value: e.src.Name},
			"first_seen":             &ddbtypes.AttributeValueMemberS{Value: quarantine.At(base.Add(time.Duration(i) * time.Millisecond)).String()},
		}}})
		if len(batch) == 25 {
			flush()
		}
	}
	flush()
}

// The AWS calls of a run grow with the number of sources, by the same
// amount for each source, and not with their records: runs over 1, 4 and
// 16 sources, each with its DLQ and its records, and the 4 again with ten
// times the records. A record older than all of theirs (of a source no
// run configures) keeps every source's oldest-record query alike; theirs
// are older than any other test's, newer each source than the one before.
func TestCallsGrowWithSourcesNotRecords(t *testing.T) {
	ctx := context.Background()
	newEnv(t).at(t, -5000*24*time.Hour, "sentinel", "timeout", "")
	created := 0
	add := func(e *env, from, to int) {
		for r := from; r < to; r++ {
			e.at(t, -time.Duration(4000-created)*24*time.Hour+time.Duration(r)*time.Second, fmt.Sprint("k", r), "timeout", "")
		}
	}
	calls := func(svc *metrics.Service, c *counting, sources int) int64 {
		t.Helper()
		if _, err := svc.Run(ctx); err != nil { // warm: the DLQ URLs are cached
			t.Fatal(err)
		}
		c.n.Store(0)
		reps, err := svc.Run(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(reps) < sources {
			t.Fatalf("%d reports for %d sources", len(reps), sources)
		}
		return c.n.Load()
	}
	run := func(sources int) (int64, func(records int) int64) {
		t.Helper()
		var envs []*env
		for range sources {
			e := newEnv(t)
			add(e, 0, 2)
			created++
			envs = append(envs, e)
		}
		c := &counting{}
		svc := envs[0].service(c)
		for _, e := range envs[1:] {
			svc.Sources[e.src.Name] = e.src
		}
		n := calls(svc, c, sources)
		t.Logf("%d sources of 2 records: %d AWS calls", sources, n)
		more := func(records int) int64 {
			for _, e := range envs {
				add(e, 2, records)
			}
			n := calls(svc, c, sources)
			t.Logf("%d sources of %d records: %d AWS calls", sources, records, n)
			return n
		}
		return n, more
	}
	one, _ := run(1)
	four, more := run(4)
	sixteen, _ := run(16)
	if per := four - one; per <= 0 || sixteen-four != 4*per {
		t.Fatalf("calls for 1, 4 and 16 sources: %d, %d, %d: not the same number per source", one, four, sixteen)
	}
	if n := more(20); n != four {
		t.Fatalf("4 sources: %d calls with 2 records each, %d with 20", four, n)
	}
}

// attrCalls counts GetQueueAttributes calls by queue URL.
type attrCalls struct {
	metrics.QueueAPI
	mu   sync.Mutex
	urls map[string]int
}

func (a *attrCalls) GetQueueAttributes(ctx context.Context, in *sqs.GetQueueAttributesInput, o ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error) {
	a.mu.Lock()
	a.urls[aws.ToString(in.QueueUrl)]++
	a.mu.Unlock()
	return a.QueueAPI.GetQueueAttributes(ctx, in, o...)
}

// datapoints is how many datapoints metric name has under Source source
// in the last hour.
func datapoints(t *testing.T, name, source string) int {
	t.Helper()
	out, err := stack.Clients.CloudWatch.GetMetricStatistics(context.Background(), &cloudwatch.GetMetricStatisticsInput{
		Namespace: aws.String("DLQQuarantine"), MetricName: aws.String(name),
		Dimensions: []cwtypes.Dimension{{Name: aws.String(metrics.DimSource), Value: aws.String(source)}},
		StartTime:  aws.Time(time.Now().Add(-time.Hour)), EndTime: aws.Time(time.Now().Add(time.Hour)),
		Period: aws.Int32(60), Statistics: []cwtypes.Statistic{cwtypes.StatisticMaximum},
	})
	if err != nil {
		t.Fatal(err)
	}
	return len(out.Datapoints)
}

// A DLQ that two sources share is read once per run, and its depth is
// published under the DLQ's name, not under either source (an alarm on it
// names the queue that backs up); a source with a DLQ of its own keeps its
// depth under its name. Every source's other metrics stay its own.
func TestASharedDLQIsReadOnceAndPublishedUnderItsName(t *testing.T) {
	ctx := context.Background()
	a, b, own := newEnv(t), newEnv(t), newEnv(t)
	b.src.DLQName = a.src.DLQName // b's own DLQ stays unused
	for i := range 3 {
		if _, err := stack.Clients.SQS.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(a.dlq), MessageBody: aws.String(fmt.Sprint("m", i))}); err != nil {
			t.Fatal(err)
		}
	}
	svc := a.service(nil)
	svc.Sources[b.src.Name], svc.Sources[own.src.Name] = b.src, own.src
	calls := &attrCalls{QueueAPI: svc.SQS, urls: map[string]int{}}
	svc.SQS = calls
	reps, err := svc.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if calls.urls[a.dlq] != 1 || calls.urls[own.dlq] != 1 || len(calls.urls) != 2 {
		t.Fatalf("GetQueueAttributes by queue: %v; want the shared DLQ and the own one once each", calls.urls)
	}
	for _, r := range reps {
		if want := map[string]int64{a.src.Name: 3, b.src.Name: 3, own.src.Name: 0}[r.Source]; r.DLQDepth != want {
			t.Errorf("report of %s: depth %d, want %d", r.Source, r.DLQDepth, want)
		}
	}
	if got := readBack(t, metrics.MetricDLQDepth, a.src.DLQName); got != 3 {
		t.Errorf("DLQDepth of the shared DLQ %s: %v, want 3", a.src.DLQName, got)
	}
	for _, src := range []string{a.src.Name, b.src.Name} {
		if n := datapoints(t, metrics.MetricDLQDepth, src); n != 0 {
			t.Errorf("DLQDepth published under %s, which shares its DLQ", src)
		}
		if n := datapoints(t, metrics.MetricOldestAge, src); n != 1 {
			t.Errorf("%s: %d datapoints of its own metrics", src, n)
		}
	}
	if n := datapoints(t, metrics.MetricDLQDepth, own.src.Name); n != 1 {
		t.Errorf("DLQDepth of %s, whose DLQ is its own: %d datapoints", own.src.Name, n)
	}
}

// A run that its invocation's deadline cuts short (more sources than one
// run measures) still publishes the shared DLQ's depth, which it reads
// first: DLQDepthAlarm never goes without data. The sources it did not
// start are named as not measured, and a later minute starts at another
// source.
func TestARunCutShortStillPublishesTheSharedDLQ(t *testing.T) {
	ctx := context.Background()
	a, b := newEnv(t), newEnv(t)
	b.src.DLQName = a.src.DLQName
	for i := range 2 {
		if _, err := stack.Clients.SQS.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(a.dlq), MessageBody: aws.String(fmt.Sprint("m", i))}); err != nil {
			t.Fatal(err)
		}
	}
	svc := a.service(nil)
	svc.Sources[b.src.Name] = b.src
	// Less than DeadlineMargin left: no source is started.
	short, cancel := context.WithTimeout(ctx, metrics.DeadlineMargin/2)
	defer cancel()
	reps, err := svc.Run(short)
	if len(reps) != 0 || err == nil || !strings.Contains(err.Error(), "source "+a.src.Name+": not measured") || !strings.Contains(err.Error(), "source "+b.src.Name+": not measured") {
		t.Fatalf("a run with no time: %d reports, %v", len(reps), err)
	}
	if got := readBack(t, metrics.MetricDLQDepth, a.src.DLQName); got != 2 {
		t.Fatalf("DLQDepth of the shared DLQ %s: %v, want 2", a.src.DLQName, got)
	}
	// With time, every source is measured, whichever comes first.
	for range 2 {
		a.clock.Advance(time.Minute)
		reps, err = svc.Run(ctx)
		if err != nil || len(reps) != 2 || reps[0].Source > reps[1].Source {
			t.Fatalf("a run with time: %+v, %v", reps, err)
		}
	}
}

// The AWS calls of one run are the same with 1,000 and 100,000 records.
func TestCallsDoNotGrowWithTheTable(t *testing.T) {
	ctx := context.Background()
	// A stack of its own: the emulator's Query reads every item of the
	// table, and 101,000 records left behind would make every later test
	// of the package slow.
	shared := stack
	stack = embedded.ForTest(t, embedded.Options{NoS3: true})
	defer func() { stack = shared }()
	calls := map[int]int64{}
	for i, n := range []int{1000, 100000} {
		e := newEnv(t)
		e.seed(t, n)
		// The record the oldest-age query finds, a full record, older than
		// anything else in the shared table (one source per table, as the
		// template deploys; see the comment in metrics.go).
		e.at(t, -time.Duration(30+i)*24*time.Hour, "oldest", "timeout", "")
		c := &counting{}
		svc := e.service(c)
		if _, err := svc.Run(ctx); err != nil { // warm: the DLQ URL is cached
			t.Fatal(err)
		}
		c.n.Store(0)
		start := time.Now()
		if _, err := svc.Run(ctx); err != nil {
			t.Fatal(err)
		}
		calls[n] = c.n.Load()
		t.Logf("%d records: %d AWS calls in %s", n, calls[n], time.Since(start))
	}
	if calls[1000] != calls[100000] || calls[1000] == 0 {
		t.Fatalf("calls per run: %v", calls)
	}
}

// A record set aside by an integrity hold is counted once per source, from
// the counter (no scan), however often it is held again.
func TestIntegrityHoldsArePublished(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	// Older than anything else in the shared table, so the oldest-age
	// query reads no other test's records (see the comment in metrics.go).
	forged := e.at(t, -90*24*time.Hour, "h1", "timeout", "")
	e.at(t, -90*24*time.Hour+time.Minute, "h2", "timeout", "")
	holdBehindTheSeal(t, e, forged.DLQID)
	reps, err := e.service(nil).Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if reps[0].IntegrityHolds != 1 {
		t.Fatalf("report %+v", reps[0])
	}
	if got := readBack(t, metrics.MetricIntegrityHolds, e.src.Name); got != 1 {
		t.Fatalf("%s = %v, want 1", metrics.MetricIntegrityHolds, got)
	}
	// The alarm watches new holds: those no run published before.
	if reps[0].NewIntegrityHolds != 1 {
		t.Fatalf("new holds %d, want 1", reps[0].NewIntegrityHolds)
	}
	if got := readBack(t, metrics.MetricNewIntegrityHolds, e.src.Name); got != 1 {
		t.Fatalf("%s = %v, want 1", metrics.MetricNewIntegrityHolds, got)
	}
	// Published once: the next run has nothing new (the alarm is OK
	// again), while the record is still held.
	e.clock.Advance(time.Minute)
	if reps, err = e.service(nil).Run(ctx); err != nil || reps[0].NewIntegrityHolds != 0 || reps[0].IntegrityHolds != 1 {
		t.Fatalf("the next minute: new holds %d, held %d, %v", reps[0].NewIntegrityHolds, reps[0].IntegrityHolds, err)
	}
	// A hold the ledger counts late, or one set between the runs of a
	// slower schedule, is new to the first run that reads it, whenever
	// that is: the hold of h3 is dated ten minutes before the run (the
	// minute buckets the runs used to read held none of it).
	holdBehindTheSeal(t, e, e.at(t, -90*24*time.Hour+2*time.Minute, "h3", "timeout", "").DLQID)
	e.clock.Advance(10 * time.Minute)
	if reps, err = e.service(nil).Run(ctx); err != nil || reps[0].NewIntegrityHolds != 1 || reps[0].IntegrityHolds != 2 {
		t.Fatalf("ten minutes after a second hold: new holds %d, held %d, %v", reps[0].NewIntegrityHolds, reps[0].IntegrityHolds, err)
	}
	// A run whose publish fails leaves the hold new for the next run.
	holdBehindTheSeal(t, e, e.at(t, -90*24*time.Hour+3*time.Minute, "h4", "timeout", "").DLQID)
	refused := e.service(nil)
	refused.CloudWatch = refusingCW{}
	if _, err := refused.Run(ctx); err == nil {
		t.Fatal("a run whose publish was refused did not fail")
	}
	if reps, err = e.service(nil).Run(ctx); err != nil || reps[0].NewIntegrityHolds != 1 || reps[0].IntegrityHolds != 3 {
		t.Fatalf("after a refused publish: new holds %d, held %d, %v", reps[0].NewIntegrityHolds, reps[0].IntegrityHolds, err)
	}
	// A store that refuses the marks: the run publishes the hold and
	// fails (MetricsErrorsAlarm), and the next publishes it again.
	holdBehindTheSeal(t, e, e.at(t, -90*24*time.Hour+4*time.Minute, "h5", "timeout", "").DLQID)
	stuck := e.service(nil)
	stuck.Marks = refusingMarks{e.store}
	if reps, err = stuck.Run(ctx); err == nil || len(reps) != 1 || reps[0].NewIntegrityHolds != 1 {
		t.Fatalf("with the marks refused: %+v, %v; want the hold published and the run failed", reps, err)
	}
	if reps, err = e.service(nil).Run(ctx); err != nil || reps[0].NewIntegrityHolds != 1 {
		t.Fatalf("after the marks were refused: new holds %d, %v", reps[0].NewIntegrityHolds, err)
	}
	// Marks that do not read: the run publishes every hold as new, and
	// fails.
	if _, err := stack.Clients.DynamoDB.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(stack.Names["QuarantineTable"]), Item: map[string]ddbtypes.AttributeValue{
		dynamostore.KeyAttr: &ddbtypes.AttributeValueMemberS{Value: dynamostore.MarksKey(e.src.Name)}, "held": &ddbtypes.AttributeValueMemberS{Value: "x"}}}); err != nil {
		t.Fatal(err)
	}
	if reps, err = e.service(nil).Run(ctx); !errors.Is(err, quarantine.ErrMarksMalformed) || len(reps) != 1 || reps[0].NewIntegrityHolds != 4 {
		t.Fatalf("with malformed marks: %+v, %v", reps, err)
	}
	if reps, err = e.service(nil).Run(ctx); err != nil || reps[0].NewIntegrityHolds != 0 {
		t.Fatalf("after the marks were written over: new holds %d, %v", reps[0].NewIntegrityHolds, err)
	}
}

// refusingMarks reads the marks and refuses to store them.
type refusingMarks struct{ metrics.MarkStore }

func (refusingMarks) WriteMetricMarks(context.Context, string, string, quarantine.MetricMarks) error {
	return errors.New("AccessDenied")
}

// refusingCW refuses every publish.
type refusingCW struct{ metrics.MetricsAPI }

func (refusingCW) PutMetricData(context.Context, *cloudwatch.PutMetricDataInput, ...func(*cloudwatch.Options)) (*cloudwatch.PutMetricDataOutput, error) {
	return nil, errors.New("throttled")
}

// holdBehindTheSeal changes record id behind its seal and holds it, twice
// (counted once), at the clock's time.
func holdBehindTheSeal(t *testing.T, e *env, id string) {
	t.Helper()
	ctx := context.Background()
	r, err := e.store.Get(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	r.RedriveCap = 99 // behind the seal
	item, err := dynamostore.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := stack.Clients.DynamoDB.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(stack.Names["QuarantineTable"]), Item: item}); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := e.store.Hold(ctx, quarantine.IntegrityHold{ID: r.DLQID, Version: r.Version, Reason: quarantine.HoldReason(quarantine.Verify(r)), At: e.clock.Now()}); err != nil {
			t.Fatal(err)
		}
	}
}

// Counters stay exact while the real ingest path, redrive runs and sweeps
// work on the same records at once: compared with a full recount.
func TestCountersExactUnderConcurrentFunctions(t *testing.T) {
	ctx := context.Background()
	st := embedded.ForTest(t, embedded.Options{})
	table := st.Names["QuarantineTable"]
	store, list := dynamostore.New(st.Clients.DynamoDB, table), dynamostore.NewLister(st.Clients.DynamoDB, table)
	payloads := s3store.New(st.Clients.S3, st.Names["PayloadBucket"], "")
	name := embedded.RandomName("cc")
	// No redrive policy and no visibility timeout: the settle window the
	// queue needs is the margin alone, so replays settle within the run.
	if _, err := st.Clients.SQS.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name), Attributes: map[string]string{"VisibilityTimeout": "0"}}); err != nil {
		t.Fatal(err)
	}
	src := &quarantine.Source{Name: name, ARN: "arn:aws:sqs:us-east-1:000000000000:" + name, IdempotencyPointer: "/k", RedriveCap: 1}
	srcs := map[string]*quarantine.Source{name: src}
	q := ingest.NewQuarantiner(store, payloads, nil, ingest.QuarantinerConfig{Sources: srcs})
	log := slog.New(slog.NewJSONHandler(io.Discard, nil))
	rd := redrive.New(store, list, payloads, st.Clients.SQS, srcs, nil, log, redrive.Config{ApprovalThreshold: 10000, SettleWindow: time.Millisecond, SettleMargin: time.Millisecond})
	sw := sweeper.New(store, list, payloads, s3store.Archiver{API: st.Clients.S3}, nil, nil, log, sweeper.Config{Bucket: st.Names["ArchiveBucket"], Retention: 30 * 24 * time.Hour})

	var wg sync.WaitGroup
	stop := make(chan struct{})
	for w := range 6 { // ingest: arrivals and re-failures of 60 keys
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 40 {
				key := fmt.Sprintf("k%02d", (w*13+i)%60)
				if _, err := q.Quarantine(ctx, ingest.Message{MessageID: fmt.Sprintf("m%d-%d", w, i), SourceARN: src.ARN, Body: []byte(`{"k":"` + key + `"}`)}); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	for range 2 { // redrive and settle, and the sweeper, over and over
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := rd.Run(ctx, redrive.Request{Source: name, RequestedBy: "t", MaxMessages: 50, BatchSize: 10}); err != nil {
					t.Error(err)
					return
				}
				if _, err := sw.Run(ctx); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	time.Sleep(3 * time.Second)
	close(stop)
	wg.Wait()

	// Full recount against the counters.
	want := map[string]int64{}
	keys := map[string]int{}
	var successors []*quarantine.Record
	for _, stt := range []quarantine.Status{quarantine.StatusQuarantined, quarantine.StatusRedriving, quarantine.StatusRedriven,
		quarantine.StatusResolved, quarantine.StatusParked, quarantine.StatusArchived} {
		lq := quarantine.ListQuery{Status: stt, Source: name}
		ids, err := quarantine.ListIDs(ctx, list, lq)
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range ids {
			r, err := store.Get(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			want[string(r.Status)+"/"+string(r.FailureClass)]++
			keys[r.IdempotencyKey]++
			if r.Predecessor != nil {
				successors = append(successors, r)
			}
		}
	}
	// One record per key, plus one successor for each re-failure of an
	// archived record (linked to it).
	if len(keys) != 60 {
		t.Fatalf("records for %d keys, want 60", len(keys))
	}
	n := 0
	for _, c := range keys {
		n += c
	}
	if n != 60+len(successors) {
		t.Fatalf("%d records for 60 keys and %d successors", n, len(successors))
	}
	for _, r := range successors {
		if p, err := store.Get(ctx, r.Predecessor.ID); err != nil || p.Status != quarantine.StatusArchived || p.Seal != r.Predecessor.Seal {
			t.Fatalf("successor linked to a record that is not its archived predecessor: %v", err)
		}
	}
	for _, stt := range []quarantine.Status{quarantine.StatusQuarantined, quarantine.StatusRedriving, quarantine.StatusRedriven,
		quarantine.StatusResolved, quarantine.StatusParked, quarantine.StatusArchived} {
		for _, c := range []quarantine.Class{quarantine.ClassValidation, quarantine.ClassExhausted, quarantine.ClassPoison} {
			if got := storetest.StateCount(t, countstream.NewReader(st), name, stt, c); got != want[string(stt)+"/"+string(c)] {
				t.Errorf("counter %s/%s = %d, recount %d", stt, c, got, want[string(stt)+"/"+string(c)])
			}
		}
	}
	t.Logf("recount %v, %d successors", want, len(successors))
}

// A source that has records and no configuration (a DLQ message from a
// queue missing from SOURCES is quarantined under its name) is measured
// too when the service is asked to (the function's wiring does): its
// records and oldest record, no DLQ.
func TestUnconfiguredSourcesAreMeasured(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	e.at(t, 0, "known", "timeout", "")
	r := storetest.Record(t, storetest.UniqueID("stray"))
	r.Source = embedded.RandomName("stray")
	r.DLQID = r.Source + "#" + r.IdempotencyKey
	if err := quarantine.SealRecord(r); err != nil {
		t.Fatal(err)
	}
	if err := e.store.Create(ctx, r); err != nil {
		t.Fatal(err)
	}
	e.clock = clock.NewFake(r.FirstSeen.Add(time.Hour))
	for _, all := range []bool{false, true} {
		svc := e.service(nil)
		svc.Unconfigured = all
		reps, err := svc.Run(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var stray, known *metrics.Report
		for i := range reps {
			switch reps[i].Source {
			case r.Source:
				stray = &reps[i]
			case e.src.Name:
				known = &reps[i]
			}
		}
		if known == nil || known.Unconfigured {
			t.Fatalf("Unconfigured %v: the configured source's report %+v", all, known)
		}
		if !all {
			if stray != nil {
				t.Fatalf("the unconfigured source measured without Unconfigured: %+v", stray)
			}
			continue
		}
		if stray == nil || !stray.Unconfigured || stray.OldestAgeSeconds != 3600 || stray.DLQDepth != 0 {
			t.Fatalf("the unconfigured source's report %+v, want unconfigured, oldest 3600 s", stray)
		}
	}
}

// A source whose DLQ cannot be read (its DLQ not granted to the metrics
// role, deleted, throttled) fails the run, named, but never silences the
// sources measured after it: each of them is still published.
func TestASourceThatFailsNeverSilencesTheOthers(t *testing.T) {
	ctx := context.Background()
	broken, after := newEnv(t), newEnv(t)
	if broken.src.Name > after.src.Name { // sources are measured in name order
		broken, after = after, broken
	}
	// The broken source has a record held: what its counters say is
	// published (its new hold pages) although its DLQ cannot be read, and
	// nothing its DLQ or listings would say.
	holdBehindTheSeal(t, broken, broken.at(t, -90*24*time.Hour, "b1", "timeout", "").DLQID)
	broken.src.DLQName = "no-such-dlq-" + broken.src.Name
	svc := broken.service(nil)
	svc.Sources[after.src.Name] = after.src
	reps, err := svc.Run(ctx)
	if err == nil || !strings.Contains(err.Error(), "source "+broken.src.Name) {
		t.Fatalf("run: %v, want an error naming source %s", err, broken.src.Name)
	}
	if len(reps) != 2 || reps[0].Source != broken.src.Name || reps[1].Source != after.src.Name {
		t.Fatalf("reports %+v, want %s's in part and %s's", reps, broken.src.Name, after.src.Name)
	}
	if n := datapoints(t, metrics.MetricOldestAge, after.src.Name); n != 1 {
		t.Errorf("%s, measured after a failing source: %d datapoints, want 1", after.src.Name, n)
	}
	for name, want := range map[string]int{metrics.MetricNewIntegrityHolds: 1, metrics.MetricIntegrityHolds: 1, metrics.MetricDLQDepth: 0, metrics.MetricOldestAge: 0, metrics.MetricDominantShare: 0} {
		if n := datapoints(t, name, broken.src.Name); n != want {
			t.Errorf("%s of the source whose DLQ is unreadable: %d datapoints, want %d", name, n, want)
		}
	}
	if got := readBack(t, metrics.MetricNewIntegrityHolds, broken.src.Name); got != 1 {
		t.Errorf("%s of the source whose DLQ is unreadable: %v, want 1", metrics.MetricNewIntegrityHolds, got)
	}
}

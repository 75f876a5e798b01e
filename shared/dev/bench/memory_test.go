package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/dlqquarantine/dlqq/shared/adapter/dynamostore"
	"github.com/dlqquarantine/dlqq/shared/adapter/s3store"
	"github.com/dlqquarantine/dlqq/shared/dev/capacity"
	"github.com/dlqquarantine/dlqq/shared/dev/embedded"
	"github.com/dlqquarantine/dlqq/shared/dev/lambdatest"
	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
	"github.com/dlqquarantine/dlqq/shared/usecase/ingest"
	"github.com/dlqquarantine/dlqq/shared/usecase/redrive"
	"github.com/dlqquarantine/dlqq/shared/usecase/sweeper"
)

const (
	// largeBody is SQS's largest message body (1 MiB since August 2025).
	largeBody = 1 << 20
	// ingestBatch is the ingest mapping's batch size: ten bodies of 1 MiB
	// are more than Lambda hands one invocation (6 MB of event), so this
	// bounds what one can hold.
	ingestBatch = 10
	// sweptLarge records of 1 MiB are archived in one sweeper run: more
	// than sweeper.Concurrency, each with corrections.
	sweptLarge = 12
	// sweptCorrections of 1 MiB each of those records has too.
	sweptCorrections = 2
	// memoryHeadroom is the share of a function's memory setting its peak
	// may use: the rest is room to spare (the runtime's own share of the
	// sandbox, a larger batch of attributes, a slower garbage collector).
	memoryHeadroom = 0.75
	// replayedLarge records of 1 MiB are replayed in one redrive run:
	// three batches of at most redrive.MaxBatchBytes, so that a batch's
	// claims beside the sends of the one before are measured too.
	replayedLarge = 40
)

// bigJSON is a JSON object of about size bytes made of many small values
// (the costliest shape to decode and canonicalize): the inventory fields
// and a list of lines.
func bigJSON(id string, size int) string {
	var b strings.Builder
	fmt.Fprintf(&b, `{"event_id":%q,"ndc":"00409-4888-02","lot":"LOT-1","quantity_delta":-1,"schedule":"CII","facility":"FAC-1","occurred_at":"2026-11-29T09:58:12Z","lines":[`, id)
	for i := 0; b.Len() < size-64; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"n":%d,"sku":"SKU-%06d","qty":%d}`, i, i, i%7+1)
	}
	b.WriteString(`]}`)
	return b.String()
}

// escapedJSON is a JSON object of about size bytes whose one long string
// is every byte one that json.Marshal writes as six (\u003c): the archive
// envelope's worst case.
func escapedJSON(id string, size int) string {
	return fmt.Sprintf(`{"event_id":%q,"note":"%s"}`, id, strings.Repeat("<", size-64))
}

// memorySetting is the template's MemorySize of a function, in bytes.
func memorySetting(tb testing.TB, st *embedded.Stack, logicalID string) int64 {
	tb.Helper()
	mb, err := capacity.MemoryMB(st, logicalID)
	if err != nil {
		tb.Fatal(err)
	}
	return int64(mb) << 20
}

// peaks are the functions whose peak memory is measured: each one's
// logical id, short name and load.
var peaks = []struct {
	fn, name string
	peak     func(testing.TB, *embedded.Stack) int64
}{{"IngestFunction", "ingest", ingestPeak}, {"SweeperFunction", "sweeper", sweeperPeak}, {"RedriveFunction", "redrive", redrivePeak}}

// ingestPeak runs the real ingest bootstrap with the template's
// environment on one batch of ten 1 MiB bodies from the stack's DLQ and
// returns its peak RSS after the batch.
func ingestPeak(tb testing.TB, st *embedded.Stack) int64 {
	tb.Helper()
	ctx := context.Background()
	f := lambdatest.ForTest(tb, st, "ingest", "IngestFunction", 60*time.Second)
	arn := func(q string) string {
		return fmt.Sprintf("arn:aws:sqs:%s:%s:%s", st.Env.Region, st.Env.Account, st.Names[q])
	}
	var ev events.SQSEvent
	for i := range ingestBatch {
		ev.Records = append(ev.Records, events.SQSMessage{
			MessageId: fmt.Sprintf("big-%d", i), Body: bigJSON(fmt.Sprintf("big-%d", i), largeBody), EventSource: "aws:sqs", EventSourceARN: arn("DeadLetterQueue"),
			Attributes: map[string]string{"ApproximateReceiveCount": "3", "SentTimestamp": "1764400000000", "DeadLetterQueueSourceArn": arn("SourceQueue")},
		})
	}
	payload, err := json.Marshal(ev)
	if err != nil {
		tb.Fatal(err)
	}
	var resp events.SQSEventResponse
	if err := json.Unmarshal(f.MustInvoke(tb, payload), &resp); err != nil || len(resp.BatchItemFailures) > 0 {
		tb.Fatalf("ingest of %d bodies of 1 MiB: %v %+v\n%s", ingestBatch, err, resp.BatchItemFailures, f.Output())
	}
	// Every body was sealed and kept, out of the item (S3).
	store := dynamostore.New(st.Clients.DynamoDB, st.Names["QuarantineTable"])
	for i := range ingestBatch {
		r, err := store.Get(ctx, quarantine.RecordID(st.Names["SourceQueue"], fmt.Sprintf("big-%d", i)))
		if err != nil || r.BodyRef == nil {
			tb.Fatalf("big-%d: %v (body kept at %v)", i, err, r)
		}
	}
	return f.MustPeakRSS(tb)
}

// largeRecords quarantines n records of the stack's source, configured
// without a schema (any JSON: a body of 1 MiB passes no schema of the
// example's), whose bodies body(i) are kept in the payload bucket as
// ingest keeps them, each with corrections corrections (body(i) less a
// byte or more), and returns the records' ids and the source's name and
// ARN.
func largeRecords(tb testing.TB, st *embedded.Stack, n, corrections int, body func(i int) string) (ids []string, name, arn string) {
	tb.Helper()
	ctx := context.Background()
	store := dynamostore.New(st.Clients.DynamoDB, st.Names["QuarantineTable"])
	payloads := s3store.New(st.Clients.S3, st.Names["PayloadBucket"], "")
	name = st.Names["SourceQueue"]
	arn = fmt.Sprintf("arn:aws:sqs:%s:%s:%s", st.Env.Region, st.Env.Account, name)
	srcs := map[string]*quarantine.Source{name: {Name: name, ARN: arn, IdempotencyPointer: "/event_id", RedriveCap: 3}}
	q := ingest.NewQuarantiner(store, payloads, nil, ingest.QuarantinerConfig{Sources: srcs})
	fix := quarantine.Corrector{Store: store, Payloads: payloads, Sources: srcs}
	for i := range n {
		b := body(i)
		out, err := q.Quarantine(ctx, ingest.Message{MessageID: fmt.Sprint("large-", i), Body: []byte(b), SourceARN: arn})
		if err != nil {
			tb.Fatal(err)
		}
		if out.Record.BodyRef == nil {
			tb.Fatalf("record %d keeps its body of %d bytes in the item", i, len(b))
		}
		for c := range corrections {
			if _, err := fix.Correct(ctx, out.Record.DLQID, quarantine.CorrectionRequest{Actor: "bench", Reason: "fix", Body: []byte(b[:len(b)-c-3] + `"}`)}); err != nil {
				tb.Fatal(err)
			}
		}
		ids = append(ids, out.Record.DLQID)
	}
	return ids, name, arn
}

// sweeperPeak parks sweptLarge records with 1 MiB bodies of "<" (six bytes
// each in the archive's JSON; in the payload bucket, as ingest keeps them)
// and sweptCorrections corrections as large, runs the real sweeper
// bootstrap once on its schedule's event, checks that it archived them
// all, and returns its peak RSS after the run. The stack must park at age
// 0.
func sweeperPeak(tb testing.TB, st *embedded.Stack) int64 {
	tb.Helper()
	ctx := context.Background()
	store := dynamostore.New(st.Clients.DynamoDB, st.Names["QuarantineTable"])
	ids, _, _ := largeRecords(tb, st, sweptLarge, sweptCorrections, func(i int) string { return escapedJSON(fmt.Sprintf("sw-%d", i), largeBody) })
	for _, id := range ids {
		if _, err := store.Update(ctx, id, func(r *quarantine.Record) (*quarantine.Record, error) {
			return r.ParkPoison("bench", time.Now().Add(-time.Minute))
		}); err != nil {
			tb.Fatal(err)
		}
	}
	f := lambdatest.ForTest(tb, st, "sweeper", "SweeperFunction", 5*time.Minute)
	var rep sweeper.Report
	if err := json.Unmarshal(f.MustInvoke(tb, lambdatest.ScheduledSample(tb, "sweeper-scheduled.json")), &rep); err != nil {
		tb.Fatal(err)
	}
	if len(rep.Archived) < sweptLarge {
		tb.Fatalf("the sweeper archived %d of %d records (report %+v)\n%s", len(rep.Archived), sweptLarge, rep, f.Output())
	}
	return f.MustPeakRSS(tb)
}

// redrivePeak quarantines replayedLarge records with bodies of 1 MiB less
// 8 KiB (room for the attributes a replay adds: a body of the full 1 MiB
// is parked, "the message exceeds the SQS size limit"), kept in the
// payload bucket as ingest keeps them, for the stack's source configured
// without a schema (any JSON: a body of 1 MiB passes no schema of the
// example's), runs the real redrive bootstrap, so configured, once on a
// request that replays them all, checks that it sent them all, and
// returns its peak RSS after the run.
func redrivePeak(tb testing.TB, st *embedded.Stack) int64 {
	tb.Helper()
	ids, name, arn := largeRecords(tb, st, replayedLarge, 0, func(i int) string { return bigJSON(fmt.Sprintf("rd-%d", i), largeBody-8<<10) })
	sources := fmt.Sprintf(`{%q:{"arn":%q,"dlq":%q,"idempotency_pointer":"/event_id","redrive_cap":3}}`, name, arn, st.Names["DeadLetterQueue"])
	f := lambdatest.ForTest(tb, st, "redrive", "RedriveFunction", 5*time.Minute, "SOURCES="+sources)
	raw, err := json.Marshal(map[string]any{"source": name, "ids": ids, "requested_by": "bench"})
	if err != nil {
		tb.Fatal(err)
	}
	var rep redrive.Report
	if err := json.Unmarshal(f.MustInvoke(tb, raw), &rep); err != nil {
		tb.Fatal(err)
	}
	if rep.Redriven.Count != replayedLarge {
		tb.Fatalf("redrive sent %d of %d records: held %d, failed %d, unknown %d, deferred %d, stopped %q\n%s", rep.Redriven.Count, replayedLarge,
			rep.Held.Count, rep.Failed.Count, rep.Unknown.Count, rep.Deferred.Count, rep.Stopped, f.Output())
	}
	return f.MustPeakRSS(tb)
}

// memoryStack is an embedded stack whose sweeper archives what is parked
// at once.
func memoryStack(tb testing.TB) *embedded.Stack {
	return embedded.ForTest(tb, embedded.Options{Params: map[string]any{"ParkAgeSeconds": 0}})
}

// The real ingest bootstrap on ten 1 MiB bodies, the real sweeper
// archiving twelve and the real redrive replaying forty, each peak
// well under the template's memory setting
// (memoryHeadroom of it). Memory, not time: the figure does not depend on
// the machine's load.
func TestPeakMemoryFitsTheTemplate(t *testing.T) {
	st := memoryStack(t)
	for _, c := range peaks {
		peak, limit := c.peak(t, st), memorySetting(t, st, c.fn)
		t.Logf("%s: peak RSS %.1f MiB of MemorySize %d MiB", c.fn, float64(peak)/(1<<20), limit>>20)
		if float64(peak) > memoryHeadroom*float64(limit) {
			t.Errorf("%s: peak RSS %.1f MiB, above %.0f%% of its MemorySize %d MiB", c.fn, float64(peak)/(1<<20), 100*memoryHeadroom, limit>>20)
		}
	}
}

// BenchmarkPeakMemory reports the peak RSS of the real ingest bootstrap on
// ten 1 MiB bodies, of the real sweeper archiving twelve and of the real
// redrive replaying forty, in MiB and as a share of the template's
// MemorySize.
func BenchmarkPeakMemory(b *testing.B) {
	for range b.N {
		st := memoryStack(b)
		for _, c := range peaks {
			peak := c.peak(b, st)
			b.ReportMetric(float64(peak)/(1<<20), c.name+"-peak-MiB")
			b.ReportMetric(float64(peak)/float64(memorySetting(b, st, c.fn)), c.name+"-of-memory")
		}
	}
}

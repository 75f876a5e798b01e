package localrunner_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/dlqquarantine/dlqq/shared/adapter/dynamostore"
	"github.com/dlqquarantine/dlqq/shared/dev/embedded"
	"github.com/dlqquarantine/dlqq/shared/dev/localrunner"
	"github.com/dlqquarantine/dlqq/shared/dev/storetest"
	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
	"github.com/dlqquarantine/dlqq/shared/usecase/ledger"
)

// streamStack is a stack without S3 whose quarantine table streams.
func streamStack(t *testing.T) (*embedded.Stack, string, string) {
	t.Helper()
	// (No index backfill: its state item would be one more change in the
	// stream than the tests write.)
	st, err := embedded.Start(context.Background(), embedded.Options{NoS3: true, NoIndexBackfill: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	arn := st.StreamARNs["QuarantineTable"]
	if arn == "" {
		t.Fatalf("the quarantine table has no stream: %v", st.StreamARNs)
	}
	return st, st.Names["QuarantineTable"], arn
}

// putRecords writes n records with plain PutItems (kumo streams those)
// and then a second version of the first; it returns the ids in write order.
func putRecords(t *testing.T, st *embedded.Stack, table string, n int) []*quarantine.Record {
	t.Helper()
	var out []*quarantine.Record
	put := func(r *quarantine.Record) {
		item, err := dynamostore.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.Clients.DynamoDB.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: aws.String(table), Item: item}); err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	for i := 0; i < n; i++ {
		put(storetest.Record(t, storetest.UniqueID(fmt.Sprintf("s%d", i))))
	}
	next, err := out[0].ParkManual("operator:test", "by hand", out[0].LastSeen.Time)
	if err != nil {
		t.Fatal(err)
	}
	put(next)
	return out
}

func TestStreamPollerDeliversEveryChangeInOrderWithItsImages(t *testing.T) {
	st, table, arn := streamStack(t)
	written := putRecords(t, st, table, 5)
	var got []events.DynamoDBEventRecord
	var shards []string
	p := &localrunner.StreamPoller{API: st.Clients.DynamoDBStreams, StreamARN: arn, BatchSize: 4,
		Handler: func(_ context.Context, ev events.DynamoDBTimeWindowEvent) (events.DynamoDBTimeWindowEventResponse, error) {
			if ev.ShardID == "" || ev.EventSourceARN != arn || ev.State == nil {
				return events.DynamoDBTimeWindowEventResponse{}, fmt.Errorf("event without its window properties: %+v", ev.TimeWindowProperties)
			}
			shards = append(shards, ev.ShardID)
			got = append(got, ev.Records...)
			return events.DynamoDBTimeWindowEventResponse{TimeWindowEventResponseProperties: events.TimeWindowEventResponseProperties{State: map[string]string{}}}, nil
		}}
	n, err := p.Drain(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if n != len(written) || len(got) != len(written) {
		t.Fatalf("acknowledged %d, delivered %d, written %d", n, len(got), len(written))
	}
	if len(shards) != 2 {
		t.Fatalf("%d invocations for 6 records in batches of 4", len(shards))
	}
	for i, e := range got {
		if i > 0 && !lessSeq(got[i-1].Change.SequenceNumber, e.Change.SequenceNumber) {
			t.Fatalf("record %d out of order: %s after %s", i, e.Change.SequenceNumber, got[i-1].Change.SequenceNumber)
		}
		img, err := dynamostore.FromStreamImage(e.Change.NewImage)
		if err != nil {
			t.Fatal(err)
		}
		r, err := dynamostore.Unmarshal(img)
		if err != nil {
			t.Fatal(err)
		}
		if want := written[i]; r.DLQID != want.DLQID || r.Version != want.Version || r.Seal != want.Seal || quarantine.Verify(r) != nil {
			t.Fatalf("record %d decodes as %s v%d (verify: %v), want %s v%d", i, r.DLQID, r.Version, quarantine.Verify(r), want.DLQID, want.Version)
		}
	}
	if last := got[len(got)-1]; last.EventName != "MODIFY" || last.Change.OldImage == nil {
		t.Fatalf("the second version is %s with old image %v", last.EventName, last.Change.OldImage != nil)
	}
	if n, err := p.Drain(context.Background()); err != nil || n != 0 {
		t.Fatalf("a second drain delivered %d (%v): every record was acknowledged", n, err)
	}
}

func TestStreamPollerRedeliversFailedBatchesHalvedAndFromTheFailedRecord(t *testing.T) {
	st, table, arn := streamStack(t)
	putRecords(t, st, table, 7) // 8 changes
	var sizes []int
	acked := map[string]int{}
	calls := 0
	p := &localrunner.StreamPoller{API: st.Clients.DynamoDBStreams, StreamARN: arn, BatchSize: 8, Bisect: true, MaxRetries: 5,
		Handler: func(_ context.Context, ev events.DynamoDBTimeWindowEvent) (events.DynamoDBTimeWindowEventResponse, error) {
			calls++
			sizes = append(sizes, len(ev.Records))
			resp := events.DynamoDBTimeWindowEventResponse{TimeWindowEventResponseProperties: events.TimeWindowEventResponseProperties{State: map[string]string{}}}
			switch calls {
			case 1, 2:
				return resp, errors.New("crash")
			case 3:
				// The first record is done, the second failed.
				acked[ev.Records[0].Change.SequenceNumber]++
				resp.BatchItemFailures = []events.DynamoDBBatchItemFailure{{ItemIdentifier: ev.Records[1].Change.SequenceNumber}}
				return resp, nil
			}
			for _, r := range ev.Records {
				acked[r.Change.SequenceNumber]++
			}
			return resp, nil
		}}
	n, err := p.Drain(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if n != 8 || len(acked) != 8 {
		t.Fatalf("acknowledged %d, %d distinct, want 8", n, len(acked))
	}
	for seq, k := range acked {
		if k != 1 {
			t.Fatalf("record %s handled %d times to success", seq, k)
		}
	}
	if sizes[0] != 8 || sizes[1] != 4 || sizes[2] != 2 {
		t.Fatalf("batch sizes %v: a failed batch is halved (8, 4, 2, ...)", sizes)
	}
	if got := p.Stats(); got.Failed != 3 || got.Records != 8 {
		t.Fatalf("stats %+v", got)
	}
}

func TestStreamPollerGivesUpADrainButKeepsTheRecords(t *testing.T) {
	st, table, arn := streamStack(t)
	putRecords(t, st, table, 2)
	fail := true
	p := &localrunner.StreamPoller{API: st.Clients.DynamoDBStreams, StreamARN: arn, MaxRetries: 2,
		Handler: func(_ context.Context, ev events.DynamoDBTimeWindowEvent) (events.DynamoDBTimeWindowEventResponse, error) {
			if fail {
				return events.DynamoDBTimeWindowEventResponse{}, errors.New("down")
			}
			return events.DynamoDBTimeWindowEventResponse{TimeWindowEventResponseProperties: events.TimeWindowEventResponseProperties{State: map[string]string{}}}, nil
		}}
	if _, err := p.Drain(context.Background()); !errors.Is(err, localrunner.ErrStreamBatchFailed) {
		t.Fatalf("drain with a failing handler: %v", err)
	}
	fail = false
	if n, err := p.Drain(context.Background()); err != nil || n != 3 {
		t.Fatalf("the next drain acknowledged %d (%v), want the 3 records kept", n, err)
	}
}

func TestFromStreamImageReadsEveryType(t *testing.T) {
	img := map[string]events.DynamoDBAttributeValue{
		"s": events.NewStringAttribute("x"), "n": events.NewNumberAttribute("12"), "b": events.NewBinaryAttribute([]byte{1}),
		"t": events.NewBooleanAttribute(true), "z": events.NewNullAttribute(), "ss": events.NewStringSetAttribute([]string{"a", "b"}),
		"ns": events.NewNumberSetAttribute([]string{"1"}), "bs": events.NewBinarySetAttribute([][]byte{{2}}),
		"l": events.NewListAttribute([]events.DynamoDBAttributeValue{events.NewStringAttribute("y")}),
		"m": events.NewMapAttribute(map[string]events.DynamoDBAttributeValue{"k": events.NewNumberAttribute("3")}),
	}
	got, err := dynamostore.FromStreamImage(img)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(img) {
		t.Fatalf("%d of %d attributes", len(got), len(img))
	}
	m, ok := got["m"].(*ddbtypes.AttributeValueMemberM)
	if !ok || m.Value["k"].(*ddbtypes.AttributeValueMemberN).Value != "3" {
		t.Fatalf("map: %#v", got["m"])
	}
	if l := got["l"].(*ddbtypes.AttributeValueMemberL); l.Value[0].(*ddbtypes.AttributeValueMemberS).Value != "y" {
		t.Fatalf("list: %#v", l)
	}
	if z := got["z"].(*ddbtypes.AttributeValueMemberNULL); !z.Value {
		t.Fatal("null")
	}
}

func lessSeq(a, b string) bool { return len(a) < len(b) || len(a) == len(b) && a < b }

func TestTheTemplatesLedgerLedgersAndSignsOnTheStack(t *testing.T) {
	ctx := context.Background()
	st, err := embedded.Start(ctx, embedded.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	f, err := localrunner.NewFunctions(st, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if f.LedgerStream.BatchSize != 1000 || !f.LedgerStream.Bisect || f.LedgerStream.Window <= 0 || !f.LedgerStream.ReportBatchItemFailures {
		t.Fatalf("the ledger's mapping as read from the template: %+v", f.LedgerStream)
	}
	// The two functions as the template configures them: the digest
	// function knows the stream function by name, and its own.
	if f.DigestConfig.StreamFunctionName != st.Env.StackName+"-ledger" || f.DigestConfig.FunctionName != st.Env.StackName+"-digest" ||
		f.LedgerConfig.StreamFunctionName != "" || f.LedgerConfig.FunctionName != "" {
		t.Fatalf("the stream function's names %q %q, the digest function's %q %q", f.LedgerConfig.StreamFunctionName, f.LedgerConfig.FunctionName,
			f.DigestConfig.StreamFunctionName, f.DigestConfig.FunctionName)
	}
	stream, err := f.NewLedger(st.Clients, nil)
	if err != nil {
		t.Fatal(err)
	}
	digest, err := f.NewDigest(st.Clients, nil)
	if err != nil {
		t.Fatal(err)
	}
	r := storetest.Record(t, storetest.UniqueID("ledgered"))
	if err := dynamostore.New(st.Clients.DynamoDB, st.Names["QuarantineTable"]).Create(ctx, r); err != nil {
		t.Fatal(err)
	}
	if n, err := f.LedgerPoller(st.Clients, stream.HandleStream).Drain(ctx); err != nil || n < 1 {
		t.Fatalf("drained %d: %v", n, err)
	}
	out0, err := digest.DigestEntry(ctx, []byte(`{"action":"digest"}`))
	if rep, ok := out0.(ledger.DigestReport); err != nil || !ok || !rep.Written {
		t.Fatalf("digest %#v: %v", out0, err)
	}
	out, err := st.Clients.S3.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String(f.LedgerConfig.Bucket), Prefix: aws.String("ledger/")})
	if err != nil {
		t.Fatal(err)
	}
	var segments, digests int
	for _, o := range out.Contents {
		switch k := aws.ToString(o.Key); {
		case strings.HasPrefix(k, "ledger/segments/"):
			segments++
		case strings.HasPrefix(k, "ledger/digests/"):
			digests++
		}
	}
	if segments < 1 || digests != 1 {
		t.Fatalf("%d segments and %d digests in %s", segments, digests, f.LedgerConfig.Bucket)
	}
}

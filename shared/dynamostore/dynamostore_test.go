package dynamostore_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/dlqquarantine/dlqq/shared/dynamostore"
	"github.com/dlqquarantine/dlqq/shared/embedded"
	"github.com/dlqquarantine/dlqq/shared/memstore"
	"github.com/dlqquarantine/dlqq/shared/quarantine"
	"github.com/dlqquarantine/dlqq/shared/s3payload"
	"github.com/dlqquarantine/dlqq/shared/storetest"
)

var stack *embedded.Stack

func TestMain(m *testing.M) {
	st, err := embedded.Start(context.Background(), embedded.Options{})
	if err != nil {
		panic(err)
	}
	stack = st
	code := m.Run()
	st.Close()
	os.Exit(code)
}

func TestStoreContract(t *testing.T) {
	storetest.RunStore(t, dynamostore.New(stack.Clients.DynamoDB, stack.Names["QuarantineTable"]))
}

func TestPayloadsContract(t *testing.T) {
	bucket := stack.Names["PayloadBucket"]
	p := s3payload.New(stack.Clients.S3, bucket, stack.Names["QuarantineKey"])
	storetest.RunPayloads(t, p, func(t *testing.T, ref quarantine.ObjectRef, data []byte) {
		if _, err := stack.Clients.S3.PutObject(context.Background(), &s3.PutObjectInput{
			Bucket: aws.String(ref.Bucket), Key: aws.String(ref.Key), Body: bytes.NewReader(data),
		}); err != nil {
			t.Fatal(err)
		}
	})
}

func TestItemSizeGuard(t *testing.T) {
	t.Parallel()
	s := dynamostore.New(stack.Clients.DynamoDB, stack.Names["QuarantineTable"])
	r := storetest.Record(t, storetest.UniqueID("big"))
	r.Body = string(bytes.Repeat([]byte("x"), dynamostore.MaxItemBytes))
	if err := quarantine.SealRecord(r); err != nil {
		t.Fatal(err)
	}
	if err := s.Create(context.Background(), r); !errors.Is(err, quarantine.ErrItemTooLarge) {
		t.Fatalf("oversized create = %v", err)
	}
}

// DynamoDB refuses items over 400 KB (dynamostore checks it, as kumo
// does not): a message with huge texts must still be stored.
func TestBoundedTexts(t *testing.T) {
	s := dynamostore.New(stack.Clients.DynamoDB, stack.Names["QuarantineTable"])
	p := s3payload.New(stack.Clients.S3, stack.Names["PayloadBucket"], stack.Names["QuarantineKey"])
	storetest.RunBoundedTexts(t, s, p)
}

// A record that passed the quarantiner's budget stays under the item limit
// however it grows: a full history of arrivals and actions, every text at
// its bound, and a full list of reads.
func TestRecordGrowthStaysUnderTheItemLimit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, maxAttempts := range []int{0, quarantine.MaxMaxAttempts} {
		store, payloads := memstore.New(), memstore.NewPayloads()
		now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
		src := &quarantine.Source{Name: "grow", ARN: "arn:aws:sqs:us-east-1:000000000000:grow", DLQName: "grow-dlq", Opaque: true, RedriveCap: 1000}
		q := quarantine.NewQuarantiner(store, payloads, func() time.Time { return now }, quarantine.Config{Sources: map[string]*quarantine.Source{src.Name: src}, MaxAttempts: maxAttempts})
		body := strings.Repeat("b", quarantine.DefaultBodyInlineMax)
		long := strings.Repeat("r", 4<<10)
		var rec *quarantine.Record
		for i := 0; i < quarantine.MaxMaxAttempts+5; i++ {
			out, err := q.Quarantine(ctx, quarantine.Message{
				MessageID: fmt.Sprintf("%d-%s", i, long), Body: []byte(body), DLQARN: "arn:aws:sqs:us-east-1:000000000000:grow-dlq",
				Attributes: map[string]quarantine.Attribute{
					"idempotency-key":            {DataType: "String", StringValue: "k"},
					quarantine.AttrFailureReason: {DataType: "String", StringValue: fmt.Sprintf("%d %s", i, long)},
					quarantine.AttrFailureStage:  {DataType: "String", StringValue: long},
					"pad":                        {DataType: "String", StringValue: strings.Repeat("p", 20<<10)},
				},
			})
			if err != nil {
				t.Fatal(err)
			}
			rec = out.Record
		}
		for i := 0; i < quarantine.DefaultMaxReads+5; i++ {
			next, err := rec.NotePayloadRead(long, now)
			if err != nil {
				t.Fatal(err)
			}
			if err := store.Replace(ctx, next, rec.Version); err != nil {
				t.Fatal(err)
			}
			rec = next
		}
		item, err := dynamostore.Marshal(rec)
		if err != nil {
			t.Fatal(err)
		}
		n := dynamostore.ItemSize(item)
		t.Logf("max attempts %d: %d bytes, %d attempts kept, body inline %v, attributes inline %v", maxAttempts, n, len(rec.Attempts), rec.BodyRef == nil, rec.AttributesRef == nil)
		if n > dynamostore.MaxItemBytes {
			t.Fatalf("max attempts %d: the record grew to %d bytes (%d attempts kept, body inline %v)", maxAttempts, n, len(rec.Attempts), rec.BodyRef == nil)
		}
	}
}

// Times are stored fixed-width, so the index's sort key sorts as time does.
func TestTimesSortAsStored(t *testing.T) {
	t.Parallel()
	r := storetest.Record(t, "times")
	r.FirstSeen = quarantine.At(time.Date(2026, 1, 2, 3, 4, 5, 100000000, time.UTC))
	item, err := dynamostore.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	got := item["first_seen"].(*ddbtypes.AttributeValueMemberS).Value
	if got != "2026-01-02T03:04:05.100000000Z" {
		t.Fatalf("first_seen stored as %q", got)
	}
	later := quarantine.At(time.Date(2026, 1, 2, 3, 4, 5, 120000000, time.UTC)).String()
	whole := quarantine.At(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)).String()
	if !(whole < got && got < later) {
		t.Fatalf("stored times do not sort: %s %s %s", whole, got, later)
	}
	back, err := dynamostore.Unmarshal(item)
	if err != nil || !back.FirstSeen.Equal(r.FirstSeen.Time) {
		t.Fatalf("round trip: %v %v", back, err)
	}
}

func TestListerContract(t *testing.T) {
	table := stack.Names["QuarantineTable"]
	storetest.RunLister(t, dynamostore.New(stack.Clients.DynamoDB, table), dynamostore.NewLister(stack.Clients.DynamoDB, table))
}

func TestCountersContract(t *testing.T) {
	table := stack.Names["QuarantineTable"]
	s, l := dynamostore.New(stack.Clients.DynamoDB, table), dynamostore.NewLister(stack.Clients.DynamoDB, table)
	storetest.RunCounters(t, s, l, s, l)
}

package dynamostore_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/dlqquarantine/dlqq/shared/dynamostore"
	"github.com/dlqquarantine/dlqq/shared/embedded"
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

// TamperItem rewrites a record's item with one plain PutItem, as someone
// with write access to the table would: no seal, no version bump, no
// counters.
func TamperItem(t *testing.T, id string, change func(*quarantine.Record)) {
	t.Helper()
	ctx := context.Background()
	s := dynamostore.New(stack.Clients.DynamoDB, stack.Names["QuarantineTable"])
	r, err := s.Get(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	change(r)
	item, err := dynamostore.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := stack.Clients.DynamoDB.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(stack.Names["QuarantineTable"]), Item: item}); err != nil {
		t.Fatal(err)
	}
}

func TestHoldContract(t *testing.T) {
	table := stack.Names["QuarantineTable"]
	s, l := dynamostore.New(stack.Clients.DynamoDB, table), dynamostore.NewLister(stack.Clients.DynamoDB, table)
	storetest.RunHold(t, s, l, s, TamperItem)
}

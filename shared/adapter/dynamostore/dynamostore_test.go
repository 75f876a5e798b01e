package dynamostore_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/dlqquarantine/dlqq/shared/adapter/dynamostore"
	"github.com/dlqquarantine/dlqq/shared/adapter/s3store"
	"github.com/dlqquarantine/dlqq/shared/dev/countstream"
	"github.com/dlqquarantine/dlqq/shared/dev/embedded"
	"github.com/dlqquarantine/dlqq/shared/dev/faults"
	"github.com/dlqquarantine/dlqq/shared/dev/memstore"
	"github.com/dlqquarantine/dlqq/shared/dev/storetest"
	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
	"github.com/dlqquarantine/dlqq/shared/runtime/awsclients"
	"github.com/dlqquarantine/dlqq/shared/usecase/ingest"
)

var stack *embedded.Stack

func TestMain(m *testing.M) { embedded.Main(m, embedded.Options{}, &stack) }

func TestStoreContract(t *testing.T) {
	storetest.RunStore(t, dynamostore.New(stack.Clients.DynamoDB, stack.Names["QuarantineTable"]))
}

func TestPayloadsContract(t *testing.T) {
	bucket := stack.Names["PayloadBucket"]
	p := s3store.New(stack.Clients.S3, bucket, stack.Names["QuarantineKey"])
	storetest.RunPayloads(t, p, func(t *testing.T, ref quarantine.ObjectRef, data []byte) {
		if _, err := stack.Clients.S3.PutObject(context.Background(), &s3.PutObjectInput{
			Bucket: aws.String(ref.Bucket), Key: aws.String(ref.Key), Body: bytes.NewReader(data),
		}); err != nil {
			t.Fatal(err)
		}
	})
}

// lossyTransport forwards requests, and for the first conditional PutObject
// to key it lets S3 apply the put and then answers 500 in its place: the
// answer was lost. The SDK retries.
type lossyTransport struct {
	next http.RoundTripper
	key  string
	mu   sync.Mutex
	puts int
}

func (l *lossyTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method != http.MethodPut || !strings.HasSuffix(req.URL.Path, "/"+l.key) || req.Header.Get("If-None-Match") != "*" {
		return l.next.RoundTrip(req)
	}
	l.mu.Lock()
	l.puts++
	first := l.puts == 1
	l.mu.Unlock()
	resp, err := l.next.RoundTrip(req)
	if err != nil || !first {
		return resp, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("the first put was not applied: %d", resp.StatusCode)
	}
	body := `<?xml version="1.0" encoding="UTF-8"?><Error><Code>InternalError</Code><Message>We encountered an internal error. Please try again.</Message></Error>`
	return &http.Response{
		StatusCode: http.StatusInternalServerError, Status: "500 Internal Server Error", Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: http.Header{"Content-Type": {"application/xml"}}, Body: io.NopCloser(strings.NewReader(body)),
		ContentLength: int64(len(body)), Request: req,
	}, nil
}

// On versitygw, through the real SDK: S3 applies a conditional put and its
// answer is lost (500); the SDK retries, gets 412, and PutPayload returns a
// reference to the one version the first attempt made.
func TestPayloadPutAppliedThenAnswerLost(t *testing.T) {
	ctx := context.Background()
	bucket := stack.Names["PayloadBucket"]
	key := "bodies/src/" + storetest.UniqueID("lost")
	lossy := &lossyTransport{next: http.DefaultTransport, key: key}
	cfg := stack.AWS.Copy()
	cfg.HTTPClient = &http.Client{Transport: lossy}
	p := s3store.New(awsclients.New(cfg, awsclients.Options{Local: true}).S3, bucket, "")
	data := bytes.Repeat([]byte("lost answer "), 20000)
	ref, err := p.PutPayload(ctx, key, data)
	if err != nil {
		t.Fatal(err)
	}
	if lossy.puts != 2 {
		t.Fatalf("%d conditional puts reached S3, want the lost one and the SDK's retry", lossy.puts)
	}
	out, err := stack.Clients.S3.ListObjectVersions(ctx, &s3.ListObjectVersionsInput{Bucket: aws.String(bucket), Prefix: aws.String(key)})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Versions) != 1 || len(out.DeleteMarkers) != 0 || aws.ToString(out.Versions[0].VersionId) != ref.VersionID {
		t.Fatalf("versions %+v, ref %+v", out.Versions, ref)
	}
	if got, err := p.GetPayload(ctx, ref); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("get: %v", err)
	}
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
	p := s3store.New(stack.Clients.S3, stack.Names["PayloadBucket"], stack.Names["QuarantineKey"])
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
		q := ingest.NewQuarantiner(store, payloads, func() time.Time { return now }, ingest.QuarantinerConfig{Sources: map[string]*quarantine.Source{src.Name: src}, MaxAttempts: maxAttempts})
		body := strings.Repeat("b", quarantine.DefaultBodyInlineMax)
		long := strings.Repeat("r", 4<<10)
		var rec *quarantine.Record
		for i := 0; i < quarantine.MaxMaxAttempts+5; i++ {
			out, err := q.Quarantine(ctx, ingest.Message{
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
			if err := store.Replace(ctx, rec, next); err != nil {
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

func TestListerPagingContract(t *testing.T) {
	t.Parallel()
	table := stack.Names["QuarantineTable"]
	storetest.RunListerPaging(t, dynamostore.New(stack.Clients.DynamoDB, table), dynamostore.NewLister(stack.Clients.DynamoDB, table))
}

func TestUpdateContract(t *testing.T) {
	s := dynamostore.New(stack.Clients.DynamoDB, stack.Names["QuarantineTable"])
	storetest.RunUpdate(t, s, countstream.NewReader(stack))
}

func TestCountersContract(t *testing.T) {
	table := stack.Names["QuarantineTable"]
	s, l := dynamostore.New(stack.Clients.DynamoDB, table), dynamostore.NewLister(stack.Clients.DynamoDB, table)
	// The counters are counted from the table's stream (the ledger's
	// work): the reader drains it before each read.
	cr := countstream.NewReader(stack)
	storetest.RunCounters(t, s, l, cr, cr)
}

// ownSourceRecord is a storetest.Record under a source of its own, so
// that its counters are its own; id and source are prefixes made unique.
func ownSourceRecord(t *testing.T, id, source string) *quarantine.Record {
	t.Helper()
	r := storetest.Record(t, storetest.UniqueID(id))
	r.Source = storetest.UniqueID(source)
	r.DLQID = r.Source + "#" + r.IdempotencyKey
	return r
}

// A create and a replace whose first try was applied and unanswered: the
// SDK's retry fails the condition, and the store recognizes the item as
// its own write (not ErrExists, not ErrVersionConflict); the stream holds
// each write once, so each is counted once.
func TestAppliedButUnansweredWriteIsOurs(t *testing.T) {
	t.Parallel()
	ddb, lose := faults.LoseDynamoDBAnswers(stack.AWS, "PutItem", 2)
	s := dynamostore.New(ddb, stack.Names["QuarantineTable"])
	ctx := context.Background()
	r := ownSourceRecord(t, "lost", "lostsrc")
	r.WriteID = quarantine.NewWriteID()
	if err := quarantine.SealRecord(r); err != nil {
		t.Fatal(err)
	}
	if err := s.Create(ctx, r); err != nil {
		t.Fatalf("create whose answer was lost = %v", err)
	}
	next, err := r.Arrive(quarantine.Attempt{At: quarantine.At(r.FirstSeen.Add(time.Second)), Stage: "s", Reason: "r", MessageID: "m2", Actor: "ingest"},
		quarantine.Classification{Class: quarantine.ClassValidation, Stage: "s", Reason: "r", Signature: "s|r|"}, 20, r.FirstSeen.Add(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Replace(ctx, r, next); err != nil {
		t.Fatalf("replace whose answer was lost = %v", err)
	}
	if lose.Lost() != 2 {
		t.Fatalf("%d answers lost", lose.Lost())
	}
	got, err := s.Get(ctx, r.DLQID)
	if err != nil || got.Seal != next.Seal {
		t.Fatalf("stored %v: %v", got, err)
	}
	// Each write's counters were applied once.
	cr := countstream.NewReader(stack)
	if n := storetest.StateCount(t, cr, r.Source, quarantine.StatusQuarantined, quarantine.ClassValidation); n != 1 {
		t.Fatalf("state counter %d, want 1", n)
	}
	if n := storetest.StateCount(t, cr, r.Source, quarantine.StatusQuarantined, quarantine.ClassExhausted); n != 0 {
		t.Fatalf("old state counter %d, want 0", n)
	}
}

// A hold whose first try was applied and unanswered: the SDK's retry fails
// the condition, the read-back finds the record held, and the hold is
// counted once.
func TestAppliedButUnansweredHoldIsOurs(t *testing.T) {
	t.Parallel()
	ddb, lose := faults.LoseDynamoDBAnswers(stack.AWS, "UpdateItem", 1)
	s := dynamostore.New(ddb, stack.Names["QuarantineTable"])
	ctx := context.Background()
	r := ownSourceRecord(t, "losthold", "holdsrc")
	if err := quarantine.SealRecord(r); err != nil {
		t.Fatal(err)
	}
	if err := s.Create(ctx, r); err != nil {
		t.Fatal(err)
	}
	if err := s.Hold(ctx, quarantine.IntegrityHold{ID: r.DLQID, Version: r.Version, Reason: "seal_mismatch", At: r.FirstSeen.Time}); err != nil {
		t.Fatalf("hold whose answer was lost = %v", err)
	}
	if lose.Lost() != 1 {
		t.Fatalf("%d answers lost", lose.Lost())
	}
	if n := storetest.HeldCount(t, countstream.NewReader(stack), r.Source); n != 1 {
		t.Fatalf("held counter %d, want 1", n)
	}
}

// No record write is a transaction: one conditional PutItem or UpdateItem
// each, so that every one of them streams (kumo streams no transaction).
func TestRecordWritesAreSingleWrites(t *testing.T) {
	t.Parallel()
	api := &opCounting{API: stack.Clients.DynamoDB}
	s := dynamostore.New(api, stack.Names["QuarantineTable"])
	ctx := context.Background()
	r := storetest.Record(t, storetest.UniqueID("single"))
	if err := s.Create(ctx, r); err != nil {
		t.Fatal(err)
	}
	next, err := r.ParkManual("ops", "looked at", r.FirstSeen.Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Replace(ctx, r, next); err != nil {
		t.Fatal(err)
	}
	if err := s.Hold(ctx, quarantine.IntegrityHold{ID: r.DLQID, Version: next.Version, Reason: "seal_mismatch", At: r.FirstSeen.Time}); err != nil {
		t.Fatal(err)
	}
	// 3 PutItem: the source's marker (once per Store and source), the
	// record's first version, its second.
	if api.puts != 3 || api.updates != 1 || api.txs != 0 {
		t.Fatalf("%d PutItem, %d UpdateItem, %d TransactWriteItems: want 3, 1, 0", api.puts, api.updates, api.txs)
	}
	// The next record of the source is one PutItem.
	if err := s.Create(ctx, storetest.Record(t, storetest.UniqueID("single"))); err != nil {
		t.Fatal(err)
	}
	if api.puts != 4 {
		t.Fatalf("%d PutItem after a second record, want 4", api.puts)
	}
}

// opCounting counts the writes a store makes.
type opCounting struct {
	dynamostore.API
	mu                 sync.Mutex
	puts, updates, txs int
}

func (o *opCounting) PutItem(ctx context.Context, in *dynamodb.PutItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	o.mu.Lock()
	o.puts++
	o.mu.Unlock()
	return o.API.PutItem(ctx, in, opts...)
}

func (o *opCounting) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	o.mu.Lock()
	o.updates++
	o.mu.Unlock()
	return o.API.UpdateItem(ctx, in, opts...)
}

func (o *opCounting) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, opts ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	o.mu.Lock()
	o.txs++
	o.mu.Unlock()
	return o.API.TransactWriteItems(ctx, in, opts...)
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
	storetest.RunHold(t, s, l, countstream.NewReader(stack), TamperItem)
}

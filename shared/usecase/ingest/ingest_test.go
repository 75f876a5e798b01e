package ingest_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/dlqquarantine/dlqq/shared/adapter/dynamostore"
	"github.com/dlqquarantine/dlqq/shared/adapter/s3store"
	"github.com/dlqquarantine/dlqq/shared/dev/embedded"
	"github.com/dlqquarantine/dlqq/shared/dev/memstore"
	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
	"github.com/dlqquarantine/dlqq/shared/runtime/awsclients"
	"github.com/dlqquarantine/dlqq/shared/runtime/clock"
	"github.com/dlqquarantine/dlqq/shared/usecase/ingest"
	"github.com/dlqquarantine/dlqq/shared/wire"
)

// fixture is one isolated source (unique names: emulator state is global).
type fixture struct {
	source, dlq, sourceARN, dlqARN string
	handler                        *ingest.Handler
	metrics                        *syncBuffer
	store                          *dynamostore.Store
	payloads                       *s3store.Store
}

func newFixture(t *testing.T, clients *awsclients.Clients) *fixture {
	t.Helper()
	if clients == nil {
		clients = stack.Clients
	}
	name := embedded.RandomName("inv")
	f := &fixture{
		source: name, dlq: name + "-dlq",
		sourceARN: "arn:aws:sqs:us-east-1:000000000000:" + name,
		dlqARN:    "arn:aws:sqs:us-east-1:000000000000:" + name + "-dlq",
		metrics:   &syncBuffer{},
	}
	cfg := ingest.Config{
		TableName:       stack.Names["QuarantineTable"],
		PayloadBucket:   stack.Names["PayloadBucket"],
		PayloadKMSKeyID: stack.Names["QuarantineKey"],
		Sources: map[string]ingest.SourceConfig{
			name: {ARN: f.sourceARN, DLQ: f.dlq, IdempotencyPointer: "/event_id", Schema: "inventory-movement.v1", RedriveCap: 3},
		},
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	h, err := wire.Ingest(context.Background(), cfg, wire.From(clients), wire.Runtime{Log: testLogger(), Metrics: f.metrics})
	if err != nil {
		t.Fatal(err)
	}
	f.handler = h
	f.store = dynamostore.New(stack.Clients.DynamoDB, cfg.TableName)
	f.payloads = s3store.New(stack.Clients.S3, cfg.PayloadBucket, "")
	return f
}

func (f *fixture) message(id, body string) events.SQSMessage {
	return events.SQSMessage{
		MessageId: id, Body: body, EventSource: "aws:sqs", EventSourceARN: f.dlqARN, AWSRegion: "us-east-1",
		Attributes: map[string]string{
			"ApproximateReceiveCount": "1", "SentTimestamp": "1764400000000",
			"DeadLetterQueueSourceArn": f.sourceARN, "AWSTraceHeader": "Root=1-5759e988-bd862e3fe1be46a994272793",
		},
	}
}

func inventory(eventID, lot string) string {
	return fmt.Sprintf(`{"event_id":%q,"ndc":"12345-678-90","lot":%q,"quantity_delta":-5,"schedule":"CII","facility":"F1","occurred_at":"2026-11-29T10:00:00Z"}`, eventID, lot)
}

func (f *fixture) get(t *testing.T, key string) *quarantine.Record {
	t.Helper()
	r, err := f.store.Get(context.Background(), quarantine.RecordID(f.source, key))
	if err != nil {
		t.Fatal(err)
	}
	if err := quarantine.Verify(r); err != nil {
		t.Fatalf("stored record does not verify: %v", err)
	}
	return r
}

func handle(t *testing.T, f *fixture, msgs ...events.SQSMessage) events.SQSEventResponse {
	t.Helper()
	resp, err := f.handler.Handle(context.Background(), events.SQSEvent{Records: msgs})
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

func TestDuplicateDeliveryOneRecordBatchAcknowledged(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	id := secret("dup")
	m := f.message("msg-1", inventory(id, secret("dup-lot")))
	if resp := handle(t, f, m); len(resp.BatchItemFailures) != 0 {
		t.Fatalf("failures: %+v", resp.BatchItemFailures)
	}
	// Delivered again (the ack was lost), and twice in one batch.
	if resp := handle(t, f, m, m); len(resp.BatchItemFailures) != 0 {
		t.Fatalf("failures on redelivery: %+v", resp.BatchItemFailures)
	}
	r := f.get(t, id)
	if r.Version != 1 || r.AttemptCount != 1 {
		t.Fatalf("duplicate delivery changed the record: version %d, attempts %d", r.Version, r.AttemptCount)
	}
	if !strings.Contains(f.metrics.String(), `"Duplicates":2`) {
		t.Fatalf("duplicates metric missing: %s", f.metrics.String())
	}
}

func TestConcurrentIngestsOfOneKey(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	id := secret("conc")
	body := inventory(id, "L1")
	var wg sync.WaitGroup
	failures := make(chan events.SQSEventResponse, 32)
	for i := range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := f.handler.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{f.message(fmt.Sprintf("m-%d", i), body)}})
			if err != nil {
				t.Error(err)
			}
			failures <- resp
		}()
	}
	wg.Wait()
	close(failures)
	for resp := range failures {
		if len(resp.BatchItemFailures) != 0 {
			t.Fatalf("a concurrent ingest failed: %+v", resp.BatchItemFailures)
		}
	}
	r := f.get(t, id)
	if r.AttemptCount != 32 || r.Version != 32 {
		t.Fatalf("attempt count %d, version %d; want 32, 32", r.AttemptCount, r.Version)
	}
	seen := map[string]bool{}
	for _, a := range r.Attempts {
		seen[a.MessageID] = true
	}
	if len(seen) != len(r.Attempts) {
		t.Fatalf("an attempt was recorded twice")
	}
}

func TestRefailureAppendsKeepsFirstSeenAndChains(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	id := secret("refail")
	body := inventory(id, "L1")
	handle(t, f, f.message("first", body))
	before := f.get(t, id)
	time.Sleep(2 * time.Millisecond)
	second := f.message("second", body)
	second.Attributes["ApproximateReceiveCount"] = "4"
	handle(t, f, second)
	after := f.get(t, id)
	if after.AttemptCount != 2 || !after.FirstSeen.Equal(before.FirstSeen.Time) || !after.LastSeen.After(before.LastSeen.Time) {
		t.Fatalf("after re-failure: attempts %d first %v→%v last %v→%v", after.AttemptCount, before.FirstSeen, after.FirstSeen, before.LastSeen, after.LastSeen)
	}
	if err := quarantine.VerifyChain(before, after); err != nil {
		t.Fatal(err)
	}
	if got := after.Attempts[1]; got.MessageID != "second" || got.ReceiveCount != 4 {
		t.Fatalf("appended attempt = %+v", got)
	}
}

// faultTransport fails every request whose body contains marker, the way a
// dead connection would; everything else goes to the emulator.
type faultTransport struct {
	marker string
	hits   sync.Map
}

func (ft *faultTransport) Do(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		raw, err := io.ReadAll(req.Body)
		if err != nil {
			return nil, err
		}
		req.Body = io.NopCloser(bytes.NewReader(raw))
		target := req.Header.Get("X-Amz-Target")
		if bytes.Contains(raw, []byte(ft.marker)) && (strings.HasSuffix(target, ".PutItem") || strings.HasSuffix(target, ".TransactWriteItems")) {
			ft.hits.Store("write", true)
			return nil, errors.New("injected fault: connection reset")
		}
	}
	return http.DefaultTransport.RoundTrip(req)
}

func TestStoreFailureReportsExactlyThatMessage(t *testing.T) {
	t.Parallel()
	fail := secret("fault")
	ft := &faultTransport{marker: fail}
	cfg := stack.AWS.Copy()
	cfg.Retryer = func() aws.Retryer {
		return retry.NewStandard(func(o *retry.StandardOptions) {
			o.MaxAttempts = 3
			o.Backoff = retry.NewExponentialJitterBackoff(20 * time.Millisecond)
		})
	}
	f := newFixture(t, awsclients.New(cfg, awsclients.Options{Local: true, HTTPClient: ft}))
	var msgs []events.SQSMessage
	var ids []string
	for i := range 5 {
		id := secret(fmt.Sprintf("ok-%d", i))
		ids = append(ids, id)
		msgs = append(msgs, f.message(fmt.Sprintf("ok-%d", i), inventory(id, "L1")))
	}
	msgs = append(msgs[:2], append([]events.SQSMessage{f.message("the-bad-one", inventory(fail, "L1"))}, msgs[2:]...)...)
	resp := handle(t, f, msgs...)
	if len(resp.BatchItemFailures) != 1 || resp.BatchItemFailures[0].ItemIdentifier != "the-bad-one" {
		t.Fatalf("BatchItemFailures = %+v, want exactly the-bad-one", resp.BatchItemFailures)
	}
	if _, ok := ft.hits.Load("write"); !ok {
		t.Fatal("the fault was never injected")
	}
	for _, id := range ids {
		f.get(t, id)
	}
	if _, err := f.store.Get(context.Background(), quarantine.RecordID(f.source, fail)); !errors.Is(err, quarantine.ErrNotFound) {
		t.Fatalf("the failed message has a record: %v", err)
	}
	if !strings.Contains(f.metrics.String(), `"StoreFailures":1`) {
		t.Fatalf("store failure metric missing: %s", f.metrics.String())
	}
}

func TestBadInputIsQuarantinedVerbatim(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	tenAttrs := map[string]events.SQSMessageAttribute{}
	for i := range 10 {
		v := secret(fmt.Sprintf("attr-%d", i))
		tenAttrs[fmt.Sprintf("a%d", i)] = events.SQSMessageAttribute{DataType: "String", StringValue: &v}
	}
	binAttrs := map[string]events.SQSMessageAttribute{
		"blob": {DataType: "Binary", BinaryValue: []byte{0, 0xff, 0x10, 0x80}},
		"note": {DataType: "String.custom", StringValue: aws.String(secret("note"))},
	}
	forgedID, forgedCount := "someone-else#key", "0"
	forged := map[string]events.SQSMessageAttribute{
		quarantine.AttrRecordID:     {DataType: "String", StringValue: &forgedID},
		quarantine.AttrRedriveCount: {DataType: "Number", StringValue: &forgedCount},
	}
	deep := strings.Repeat(`{"a":`, 10000) + "1" + strings.Repeat("}", 10000)
	big := `{"event_id":"` + secret("big") + `","pad":"` + strings.Repeat("x", 1<<20-64) + `"}`
	tests := []struct {
		name   string
		body   string
		attrs  map[string]events.SQSMessageAttribute
		class  quarantine.Class
		reason string
		note   string
	}{
		{"not json", "not json " + secret("text"), nil, quarantine.ClassValidation, quarantine.ReasonNotJSON, ""},
		{"invalid utf-8", "\xff\xfe" + secret("bin"), nil, quarantine.ClassValidation, quarantine.ReasonNotUTF8, ""},
		{"empty", "", nil, quarantine.ClassValidation, quarantine.ReasonEmpty, ""},
		{"1 MiB", big, nil, quarantine.ClassValidation, "schema / additionalProperties", ""},
		{"10000 deep", deep, nil, quarantine.ClassValidation, quarantine.ReasonTooDeep, ""},
		{"duplicate keys", `{"event_id":"x","event_id":"` + secret("dupkey") + `"}`, nil, quarantine.ClassValidation, quarantine.ReasonDuplicateKey, ""},
		{"10 attributes", inventory(secret("ten"), "L1"), tenAttrs, quarantine.ClassExhausted, quarantine.ReasonExhausted, ""},
		{"binary attributes", inventory(secret("binattr"), "L1"), binAttrs, quarantine.ClassExhausted, quarantine.ReasonExhausted, ""},
		{"forged redrive attributes", inventory(secret("forged"), "L1"), forged, quarantine.ClassExhausted, quarantine.ReasonExhausted, "forged redrive attributes ignored"},
	}
	var msgs []events.SQSMessage
	for i, tt := range tests {
		m := f.message(fmt.Sprintf("bad-%d", i), tt.body)
		m.MessageAttributes = tt.attrs
		msgs = append(msgs, m)
	}
	// All of them in one batch: one bad message never fails the others.
	resp := handle(t, f, msgs[:5]...)
	resp2 := handle(t, f, msgs[5:]...)
	if len(resp.BatchItemFailures)+len(resp2.BatchItemFailures) != 0 {
		t.Fatalf("failures: %+v %+v", resp.BatchItemFailures, resp2.BatchItemFailures)
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := ingest.ToMessage(msgs[i])
			src := &quarantine.Source{Name: f.source, ARN: f.sourceARN, IdempotencyPointer: "/event_id"}
			key, _ := quarantine.DeriveKey(src, quarantine.DefaultKeyAttribute, m.Attributes, src.Check(m.Body).Doc, f.sourceARN, m.Body)
			r := f.get(t, key)
			if r.FailureClass != tt.class || r.FailureReason != tt.reason {
				t.Fatalf("class %s reason %q, want %s %q", r.FailureClass, r.FailureReason, tt.class, tt.reason)
			}
			body, err := quarantine.LoadBody(context.Background(), f.payloads, r)
			if err != nil || !bytes.Equal(body, []byte(tt.body)) {
				t.Fatalf("body not verbatim (%v)", err)
			}
			if len(r.Attributes) != len(tt.attrs) {
				t.Fatalf("attributes: got %d, want %d", len(r.Attributes), len(tt.attrs))
			}
			for name, a := range tt.attrs {
				got := r.Attributes[name]
				if got.DataType != a.DataType || got.StringValue != aws.ToString(a.StringValue) || !bytes.Equal(got.BinaryValue, a.BinaryValue) {
					t.Fatalf("attribute %s = %+v, want %+v", name, got, a)
				}
			}
			if r.Attempts[0].Note != tt.note {
				t.Fatalf("note %q, want %q", r.Attempts[0].Note, tt.note)
			}
		})
	}
}

func TestLargeBodyGoesThroughS3(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	id := secret("large")
	body := `{"event_id":"` + id + `","ndc":"12345-678-90","lot":"L1","quantity_delta":1,"schedule":"CII","facility":"F1","occurred_at":"2026-11-29T10:00:00Z","note":"` + strings.Repeat("n", 1000) + `"}`
	body += strings.Repeat(" ", 900<<10-len(body))
	handle(t, f, f.message("large-1", body))
	r := f.get(t, id)
	if r.BodyRef == nil || r.Body != "" {
		t.Fatal("900 KB body was not stored through the S3 pointer")
	}
	out, err := stack.Clients.DynamoDB.GetItem(context.Background(), &dynamodb.GetItemInput{
		TableName: aws.String(stack.Names["QuarantineTable"]),
		Key:       map[string]ddbtypes.AttributeValue{"dlq_id": &ddbtypes.AttributeValueMemberS{Value: r.DLQID}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if n := dynamostore.ItemSize(out.Item); n >= dynamostore.MaxItemBytes {
		t.Fatalf("item is %d bytes", n)
	}
	got, err := quarantine.LoadBody(context.Background(), f.payloads, r)
	if err != nil || string(got) != body {
		t.Fatalf("payload read back: %v", err)
	}
	if r.BodyRef.SHA256 != quarantine.BodySHA256([]byte(body)) {
		t.Fatal("pointer hash differs from the body hash")
	}
}

func TestTamperedRecordFailsVerify(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	id := secret("tamper")
	handle(t, f, f.message("t-1", inventory(id, "L1")))
	r := f.get(t, id)
	for _, field := range []string{"failure_class", "body", "first_seen", "status"} {
		t.Run(field, func(t *testing.T) {
			item, err := dynamostore.Marshal(r)
			if err != nil {
				t.Fatal(err)
			}
			item[field] = &ddbtypes.AttributeValueMemberS{Value: "tampered"}
			got, err := dynamostore.Unmarshal(item)
			if err != nil {
				// A wrong type is also detected, just earlier.
				return
			}
			var se *quarantine.SealError
			if err := quarantine.Verify(got); !errors.As(err, &se) {
				t.Fatalf("tampered %s verifies: %v", field, err)
			}
		})
	}
	// Behind the store's back, in the table itself.
	item, _ := dynamostore.Marshal(r)
	item["lot_changed"] = &ddbtypes.AttributeValueMemberS{Value: "ignored"}
	item["body"] = &ddbtypes.AttributeValueMemberS{Value: strings.Replace(r.Body, `"L1"`, `"L9"`, 1)}
	if _, err := stack.Clients.DynamoDB.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: aws.String(stack.Names["QuarantineTable"]), Item: item}); err != nil {
		t.Fatal(err)
	}
	got, err := f.store.Get(context.Background(), r.DLQID)
	if err != nil {
		t.Fatal(err)
	}
	if err := quarantine.Verify(got); err == nil {
		t.Fatal("a record changed in the table still verifies")
	}
}

func TestEMFMetrics(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	handle(t, f, f.message("e1", inventory(secret("emf1"), "L1")), f.message("e2", "nope "+secret("emf2")), f.message("e3", inventory(secret("emf3"), "L1")))
	counts := map[string]float64{}
	for _, line := range strings.Split(strings.TrimSpace(f.metrics.String()), "\n") {
		var doc map[string]any
		if err := json.Unmarshal([]byte(line), &doc); err != nil {
			t.Fatal(err)
		}
		meta := doc["_aws"].(map[string]any)["CloudWatchMetrics"].([]any)[0].(map[string]any)
		if meta["Namespace"] != "DLQQuarantine" {
			t.Fatalf("namespace %v", meta["Namespace"])
		}
		if v, ok := doc["Quarantined"]; ok {
			counts[doc["Class"].(string)] += v.(float64)
		}
	}
	if counts["exhausted"] != 2 || counts["validation"] != 1 {
		t.Fatalf("Quarantined by class = %v", counts)
	}
}

func TestConfigValidateReportsEveryProblem(t *testing.T) {
	t.Parallel()
	cfg := ingest.Config{Sources: map[string]ingest.SourceConfig{
		"a#b": {DLQ: "d"},
		"ok":  {DLQ: "d", IdempotencyPointer: "event_id", Schema: "no-such-schema", RedriveCap: -1},
		"x":   {},
	}}
	err := cfg.Validate()
	if err == nil {
		t.Fatal("invalid config accepted")
	}
	for _, want := range []string{"TABLE_NAME is required", `"a#b": not a queue name`, "arn is required", "must start with /", "no-such-schema", "redrive_cap", `"x": dlq is required`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not mention %q:\n%v", want, err)
		}
	}
	if strings.Contains(err.Error(), "share") {
		t.Errorf("sources that share a DLQ refused: %v", err)
	}
	// A source whose DLQ ingest takes no batches from is refused, named; a
	// DLQ that DLQ_ARNS lists is not.
	mapped := ingest.Config{TableName: "t", DLQARNs: []string{"arn:aws:sqs:us-east-1:111122223333:stack-dlq"}, Sources: map[string]ingest.SourceConfig{
		"own":    {ARN: "arn:aws:sqs:us-east-1:111122223333:own", DLQ: "own-dlq"},
		"shares": {ARN: "arn:aws:sqs:us-east-1:111122223333:shares", DLQ: "stack-dlq"},
	}}
	err = mapped.Validate()
	if err == nil || !strings.Contains(err.Error(), `source "own": dlq "own-dlq" is not one ingest takes batches from`) || strings.Contains(err.Error(), `"shares"`) {
		t.Errorf("a source whose DLQ is not ingested: %v", err)
	}
	// A DLQ ingest takes batches from, registered as a source (the stack's
	// FIFO DLQ that no source uses, say): refused.
	dlqAsSource := ingest.Config{TableName: "t", DLQARNs: []string{"arn:aws:sqs:us-east-1:111122223333:stack-dlq", "arn:aws:sqs:us-east-1:111122223333:stack-dlq.fifo"},
		Sources: map[string]ingest.SourceConfig{"stack-dlq.fifo": {ARN: "arn:aws:sqs:us-east-1:111122223333:stack-dlq.fifo", DLQ: "stack-dlq.fifo"}}}
	if err := dlqAsSource.Validate(); err == nil || !strings.Contains(err.Error(), `source "stack-dlq.fifo" is a DLQ ingest takes batches from`) {
		t.Errorf("a DLQ registered as a source: %v", err)
	}
	if _, err := ingest.ParseSources(`{"s":{"dlq":"d","surprise":1}}`); err == nil {
		t.Error("unknown field in SOURCES accepted")
	}
}

// failingStore fails every write of a record whose id contains marker.
type failingStore struct {
	*memstore.Store
	marker string
}

func (f failingStore) Create(ctx context.Context, r *quarantine.Record) error {
	if strings.Contains(r.DLQID, f.marker) {
		return errors.New("injected")
	}
	return f.Store.Create(ctx, r)
}

// On a FIFO DLQ a failure also fails every later message of the same group,
// so the group is redelivered in order; other groups are unaffected.
func TestFIFOFailureFailsTheRestOfItsGroup(t *testing.T) {
	t.Parallel()
	src := &quarantine.Source{Name: "orders.fifo", ARN: "arn:aws:sqs:us-east-1:000000000000:orders.fifo", DLQName: "orders-dlq.fifo"}
	store := memstore.New()
	q := ingest.NewQuarantiner(failingStore{store, "key-bad"}, nil, nil, ingest.QuarantinerConfig{Sources: map[string]*quarantine.Source{src.Name: src}})
	h := ingest.NewHandler(q, slog.New(slog.NewJSONHandler(io.Discard, nil)), io.Discard, nil, 10)
	msg := func(id, group, key string) events.SQSMessage {
		k := key
		return events.SQSMessage{
			MessageId: id, Body: `{"n":"` + id + `"}`, EventSource: "aws:sqs", EventSourceARN: "arn:aws:sqs:us-east-1:000000000000:orders-dlq.fifo",
			Attributes:        map[string]string{"MessageGroupId": group},
			MessageAttributes: map[string]events.SQSMessageAttribute{"idempotency-key": {DataType: "String", StringValue: &k}},
		}
	}
	resp, err := h.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{
		msg("a1", "A", "key-1"), msg("b1", "B", "key-2"), msg("a2", "A", "key-bad"), msg("b2", "B", "key-3"), msg("a3", "A", "key-4"),
	}})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, f := range resp.BatchItemFailures {
		ids = append(ids, f.ItemIdentifier)
	}
	if strings.Join(ids, ",") != "a2,a3" {
		t.Fatalf("failures = %v, want a2,a3", ids)
	}
	// a3 is not stored before a2 is: the group stops at its failure, so
	// the redelivered group is recorded in its order.
	for key, stored := range map[string]bool{"key-1": true, "key-2": true, "key-3": true, "key-4": false} {
		if _, err := store.Get(context.Background(), "orders.fifo#"+key); (err == nil) != stored {
			t.Errorf("%s stored: %v, want %v", key, err == nil, stored)
		}
	}
}

// Ingest takes only SQS batches: a redrive request, an S3 notification or
// anything else sent to it is a function error, and nothing is written (no
// record, no counter, no metric). The sample batch is still taken.
func TestRefusesEventsThatAreNotSQSBatches(t *testing.T) {
	t.Parallel()
	redriveRequest, err := os.ReadFile("../../../events/redrive-ids.json")
	if err != nil {
		t.Fatal(err)
	}
	s3, err := json.Marshal(events.S3Event{Records: []events.S3EventRecord{{
		EventVersion: "2.1", EventSource: "aws:s3", AWSRegion: "us-east-1", EventName: "ObjectCreated:Put",
		S3: events.S3Entity{Bucket: events.S3Bucket{Name: "dlqq-archive", Arn: "arn:aws:s3:::dlqq-archive"}, Object: events.S3Object{Key: "archive/x/v1.json", Size: 10}},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	sqsRecord := func(edit func(m map[string]any)) []byte {
		m := map[string]any{"messageId": "m1", "body": "{}", "eventSource": "aws:sqs", "eventSourceARN": "arn:aws:sqs:us-east-1:000000000000:orders-dlq", "awsRegion": "us-east-1"}
		edit(m)
		raw, _ := json.Marshal(map[string]any{"Records": []any{m}})
		return raw
	}
	refused := map[string][]byte{
		"redrive request": redriveRequest,
		"S3 notification": s3,
		"empty object":    []byte(`{}`),
		"no records":      []byte(`{"Records":[]}`),
		"not an object":   []byte(`"Records"`),
		"no messageId":    sqsRecord(func(m map[string]any) { delete(m, "messageId") }),
		"SNS source":      sqsRecord(func(m map[string]any) { m["eventSource"] = "aws:sns" }),
		"not a queue ARN": sqsRecord(func(m map[string]any) { m["eventSourceARN"] = "arn:aws:sns:us-east-1:000000000000:orders" }),
		"no ARN":          sqsRecord(func(m map[string]any) { delete(m, "eventSourceARN") }),
	}
	for name, raw := range refused {
		t.Run(name, func(t *testing.T) {
			store := memstore.New()
			var metrics bytes.Buffer
			q := ingest.NewQuarantiner(store, nil, nil, ingest.QuarantinerConfig{})
			h := ingest.NewHandler(q, slog.New(slog.NewJSONHandler(io.Discard, nil)), &metrics, nil, 10)
			if resp, err := h.HandleRaw(context.Background(), raw); !errors.Is(err, ingest.ErrNotSQSBatch) || len(resp.BatchItemFailures) != 0 {
				t.Fatalf("HandleRaw = %+v, %v; want ErrNotSQSBatch", resp, err)
			}
			// The typed entry point (the local runner's) refuses it too.
			var ev events.SQSEvent
			if json.Unmarshal(raw, &ev) == nil {
				if _, err := h.Handle(context.Background(), ev); err == nil {
					t.Fatal("Handle took it")
				}
			}
			if n := len(store.All()); n != 0 || metrics.Len() != 0 {
				t.Fatalf("%d records and %d bytes of metrics written", n, metrics.Len())
			}
		})
	}
	t.Run("sample batch", func(t *testing.T) {
		raw, err := os.ReadFile("../../../events/ingest-dlq-batch.json")
		if err != nil {
			t.Fatal(err)
		}
		store := memstore.New()
		q := ingest.NewQuarantiner(store, nil, nil, ingest.QuarantinerConfig{})
		h := ingest.NewHandler(q, slog.New(slog.NewJSONHandler(io.Discard, nil)), io.Discard, nil, 10)
		resp, err := h.HandleRaw(context.Background(), raw)
		if err != nil || len(resp.BatchItemFailures) != 0 || len(store.All()) != 6 {
			t.Fatalf("sample batch: %+v %v, %d records", resp, err, len(store.All()))
		}
	})
}

// Within a FIFO message group, messages are stored in batch (DLQ) order:
// each one's first_seen is strictly after the previous one's, even when
// the clock does not move between them, and the SQS sequence number is
// kept for redrive to replay them in that order.
func TestFIFOGroupsAreStoredInBatchOrder(t *testing.T) {
	t.Parallel()
	store := memstore.New()
	clk := clock.NewFake(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)) // never advanced: one clock tick
	src := &quarantine.Source{Name: "orders.fifo", ARN: "arn:aws:sqs:us-east-1:000000000000:orders.fifo", DLQName: "orders-dlq.fifo"}
	q := ingest.NewQuarantiner(store, nil, clk.Now, ingest.QuarantinerConfig{Sources: map[string]*quarantine.Source{src.Name: src}})
	h := ingest.NewHandler(q, slog.New(slog.NewJSONHandler(io.Discard, nil)), io.Discard, nil, 10)
	var batch []events.SQSMessage
	seq := map[string]string{}
	for i, g := range []string{"A", "B", "A", "A", "B", "C", "A", "B", "C", "A"} {
		id := fmt.Sprintf("m%d", i)
		k := "key-" + id
		seq[k] = fmt.Sprintf("1844674407370955161%d", 5+i) // beyond uint64, increasing
		batch = append(batch, events.SQSMessage{
			MessageId: id, Body: `{"n":"` + id + `"}`, EventSource: "aws:sqs", EventSourceARN: "arn:aws:sqs:us-east-1:000000000000:orders-dlq.fifo",
			Attributes:        map[string]string{"MessageGroupId": g, "SequenceNumber": seq[k]},
			MessageAttributes: map[string]events.SQSMessageAttribute{"idempotency-key": {DataType: "String", StringValue: &k}},
		})
	}
	resp, err := h.Handle(context.Background(), events.SQSEvent{Records: batch})
	if err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("%+v %v", resp, err)
	}
	last := map[string]*quarantine.Record{}
	for _, m := range batch {
		r, err := store.Get(context.Background(), "orders.fifo#key-"+m.MessageId)
		if err != nil {
			t.Fatal(err)
		}
		if r.SequenceNumber != m.Attributes["SequenceNumber"] || r.MessageGroupID != m.Attributes["MessageGroupId"] {
			t.Fatalf("%s: sequence %q group %q", m.MessageId, r.SequenceNumber, r.MessageGroupID)
		}
		if p := last[r.MessageGroupID]; p != nil {
			if !p.FirstSeen.Before(r.FirstSeen.Time) {
				t.Fatalf("group %s: %s first_seen %s not after %s's %s", r.MessageGroupID, m.MessageId, r.FirstSeen, p.DLQID, p.FirstSeen)
			}
			if quarantine.CompareFIFO(p, r) >= 0 {
				t.Fatalf("group %s: %s does not sort after %s", r.MessageGroupID, r.DLQID, p.DLQID)
			}
		}
		last[r.MessageGroupID] = r
	}
}

// Issue 26 review: an event source mapping pointed at ingest from a queue
// that is not a configured DLQ (someone's own queue, whose messages ingest
// would otherwise seal with its writer proof, as genuine dead letters) is
// refused whole: ErrUnknownDLQ, nothing written. A batch from a configured
// DLQ is taken; the configuration refuses a DLQ_ARNS entry that is no queue.
func TestRefusesBatchesFromAQueueThatIsNoConfiguredDLQ(t *testing.T) {
	t.Parallel()
	const dlq, extra = "arn:aws:sqs:us-east-1:000000000000:orders-dlq", "arn:aws:sqs:us-east-1:000000000000:legacy-dlq"
	batch := func(arns ...string) events.SQSEvent {
		var ev events.SQSEvent
		for i, a := range arns {
			ev.Records = append(ev.Records, events.SQSMessage{MessageId: fmt.Sprintf("m%d", i), Body: `{"event_id":"e` + fmt.Sprint(i) + `"}`,
				EventSource: "aws:sqs", EventSourceARN: a, AWSRegion: "us-east-1",
				Attributes: map[string]string{"SentTimestamp": "1764590000000", "ApproximateReceiveCount": "1"}})
		}
		return ev
	}
	for _, c := range []struct {
		name string
		ev   events.SQSEvent
		ok   bool
	}{
		{"the DLQ", batch(dlq, dlq), true},
		{"the attached DLQ", batch(extra), true},
		{"someone's queue", batch("arn:aws:sqs:us-east-1:000000000000:mine"), false},
		{"one record of someone's queue", batch(dlq, "arn:aws:sqs:us-east-1:000000000000:mine"), false},
		{"the DLQ's name in another account", batch("arn:aws:sqs:us-east-1:111122223333:orders-dlq"), false},
	} {
		t.Run(c.name, func(t *testing.T) {
			store := memstore.New()
			q := ingest.NewQuarantiner(store, nil, nil, ingest.QuarantinerConfig{})
			h := ingest.NewHandler(q, slog.New(slog.NewJSONHandler(io.Discard, nil)), io.Discard, nil, 10).AcceptOnly([]string{dlq, extra})
			resp, err := h.Handle(context.Background(), c.ev)
			switch {
			case c.ok && (err != nil || len(resp.BatchItemFailures) != 0 || len(store.All()) == 0):
				t.Fatalf("refused a batch of a configured DLQ: %+v %v (%d records)", resp, err, len(store.All()))
			case !c.ok && (!errors.Is(err, ingest.ErrUnknownDLQ) || len(store.All()) != 0):
				t.Fatalf("took a batch of another queue: %+v %v (%d records)", resp, err, len(store.All()))
			}
		})
	}
	for _, env := range []map[string]string{{"TABLE_NAME": "t", "DLQ_ARNS": dlq + ", " + extra}, {"TABLE_NAME": "t", "DLQ_ARNS": "orders-dlq"}} {
		cfg, err := ingest.ConfigFromEnv(func(k string) string { return env[k] })
		if env["DLQ_ARNS"] == "orders-dlq" {
			if err == nil {
				t.Error("DLQ_ARNS orders-dlq (no ARN) was taken")
			}
			continue
		}
		if err != nil || len(cfg.DLQARNs) != 2 || cfg.DLQARNs[1] != extra {
			t.Errorf("DLQ_ARNS %q: %v %v", env["DLQ_ARNS"], cfg.DLQARNs, err)
		}
	}
}

package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/dlqquarantine/dlqq/shared/adapter/dynamostore"
	"github.com/dlqquarantine/dlqq/shared/dev/embedded"
	"github.com/dlqquarantine/dlqq/shared/dev/faults"
	"github.com/dlqquarantine/dlqq/shared/dev/localrunner"
	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
	"github.com/dlqquarantine/dlqq/shared/runtime/awsclients"
	"github.com/dlqquarantine/dlqq/shared/usecase/ingest"
	"github.com/dlqquarantine/dlqq/shared/wire"
)

// DynamoDB's billing rules, as documented:
//   - a standard write costs one write unit per 1 KB of the item, rounded up
//     (for an update, of the larger of the item before and after);
//     a transactional write (TransactWriteItems) costs two per 1 KB
//     (https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/read-write-operations.html,
//     "Capacity unit consumption for write operations"; transaction-apis.html,
//     "Capacity management for transactions");
//   - a write that puts an item into a global secondary index, or changes
//     a projected attribute of an item in it, is billed again on the index
//     for the index entry: the table's key, the index's key attributes and
//     the projected attributes, plus 100 bytes of overhead, per 1 KB
//     (GSI.html, "Provisioned throughput considerations for global
//     secondary indexes"; the table's write cost is the sum of the table's
//     and the indexes' writes). Index writes are counted as standard
//     writes, for a transaction too.

// statusIndexProjected are the status index's attributes (infra/template.yaml:
// status-first-seen-v2, keys status and first_seen, INCLUDE projection).
var statusIndexProjected = []string{"source", "failure_class", "failure_signature", "status_since", "last_seen", "version", "redrive_count", "n",
	"integrity_hold", "message_group_id", "idempotency_key", "sequence_number", "lease_until"}

const indexEntryOverhead = 100

// writeUnits is the cost of one standard write of an item of size bytes.
func writeUnits(size int) int { return max(1, (size+1023)/1024) }

// indexEntrySize is the size of item's entry in the status index (false:
// the item is not in it, it lacks a key attribute of the index).
func indexEntrySize(item map[string]ddbtypes.AttributeValue) (int, bool) {
	if item["status"] == nil || item["first_seen"] == nil {
		return 0, false
	}
	entry := map[string]ddbtypes.AttributeValue{}
	for _, k := range append([]string{dynamostore.KeyAttr, "status", "first_seen"}, statusIndexProjected...) {
		if v, ok := item[k]; ok {
			entry[k] = v
		}
	}
	return dynamostore.ItemSize(entry) + indexEntryOverhead, true
}

// itemWrite is what one write of item costs: the table's units (doubled
// in a transaction) and the index's.
func itemWrite(item map[string]ddbtypes.AttributeValue, transactional bool) (table, index int) {
	table = writeUnits(dynamostore.ItemSize(item))
	if transactional {
		table *= 2
	}
	if n, ok := indexEntrySize(item); ok {
		index = writeUnits(n)
	}
	return table, index
}

// write is one item write a counted client saw succeed.
type write struct {
	op, key       string
	transactional bool
}

// countingClient counts requests by operation ("dynamodb PutItem", "s3
// PutObject", "kms Sign") and records the keys of the DynamoDB writes
// that succeeded.
type countingClient struct {
	base   aws.HTTPClient
	mu     sync.Mutex
	ops    map[string]int
	writes []write
}

func newCountingClient(base aws.HTTPClient) *countingClient {
	return &countingClient{base: base, ops: map[string]int{}}
}

func (c *countingClient) Do(req *http.Request) (*http.Response, error) {
	op := faults.Service(req)
	var body []byte
	if t := req.Header.Get("X-Amz-Target"); t != "" {
		op += " " + t[strings.LastIndexByte(t, '.')+1:]
		if req.Body != nil {
			body, _ = io.ReadAll(req.Body)
			req.Body.Close()
			req.Body = io.NopCloser(bytes.NewReader(body))
		}
	} else if id := req.URL.Query().Get("x-id"); id != "" {
		op += " " + id
	} else {
		op += " " + req.Method
	}
	resp, err := c.base.Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		return resp, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ops[op]++
	c.writes = append(c.writes, writesOf(op, body)...)
	return resp, nil
}

// take returns the counts and writes so far and starts again.
func (c *countingClient) take() (map[string]int, []write) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ops, writes := c.ops, c.writes
	c.ops, c.writes = map[string]int{}, nil
	return ops, writes
}

type keyed struct {
	Key  map[string]map[string]string `json:"Key"`
	Item map[string]map[string]any    `json:"Item"`
}

func (k keyed) id() string {
	if v := k.Key[dynamostore.KeyAttr]["S"]; v != "" {
		return v
	}
	s, _ := k.Item[dynamostore.KeyAttr]["S"].(string)
	return s
}

// writesOf reads the items a DynamoDB write request names.
func writesOf(op string, body []byte) []write {
	switch op {
	case "dynamodb PutItem", "dynamodb UpdateItem", "dynamodb DeleteItem":
		var k keyed
		if json.Unmarshal(body, &k) == nil {
			return []write{{op: op, key: k.id()}}
		}
	case "dynamodb TransactWriteItems":
		var in struct {
			TransactItems []map[string]keyed `json:"TransactItems"`
		}
		if json.Unmarshal(body, &in) != nil {
			return nil
		}
		var out []write
		for _, ti := range in.TransactItems {
			for kind, k := range ti {
				if kind != "ConditionCheck" {
					out = append(out, write{op: op + " " + kind, key: k.id(), transactional: true})
				}
			}
		}
		return out
	}
	return nil
}

// units prices writes on the items as the table holds them now (an update's
// item after it: counters and heads only grow). A write of a counter the
// table does not hold (the design before, whose counters are priced, and
// some of which the ledger's counting never writes) is priced on the
// counter item it would be: its key and a count.
func units(ctx context.Context, b *testing.B, api *dynamodb.Client, table string, writes []write) (tableUnits, indexUnits int) {
	b.Helper()
	for _, w := range writes {
		out, err := api.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true),
			Key: map[string]ddbtypes.AttributeValue{dynamostore.KeyAttr: &ddbtypes.AttributeValueMemberS{Value: w.key}}})
		if err == nil && out.Item == nil && strings.HasPrefix(w.key, "#ctr#") {
			out.Item = map[string]ddbtypes.AttributeValue{dynamostore.KeyAttr: &ddbtypes.AttributeValueMemberS{Value: w.key}, "n": &ddbtypes.AttributeValueMemberN{Value: "1"}}
		}
		if err != nil || out.Item == nil {
			b.Fatalf("read %s back: %v", w.key, err)
		}
		t, i := itemWrite(out.Item, w.transactional)
		tableUnits, indexUnits = tableUnits+t, indexUnits+i
	}
	return tableUnits, indexUnits
}

// writeBatch is a realistic ledger batch: 100 first arrivals.
const writeBatch = 100

// BenchmarkWriteUnits prices the DynamoDB writes of a dead-lettered
// message by DynamoDB's rules, from the sizes of the items written:
// before (one TransactWriteItems: the record's Put and one Update per
// CounterDeltas(nil, r) delta), on the hot path now (ingest's one
// conditional PutItem, counted through the client), and the ledger's
// writes for a batch of 100 arrivals (its counter transaction, checkpoint
// and head update, counted through the client), per message. It also
// reports the ledger's S3 PUTs and KMS Sign calls: per message for the
// segments, per digest run for the digests (one every 5 minutes).
func BenchmarkWriteUnits(b *testing.B) {
	ctx := context.Background()
	st := embedded.ForTest(b, embedded.Options{})
	counter := newCountingClient(awshttp.NewBuildableClient())
	clients := awsclients.New(st.AWS.Copy(), awsclients.Options{Local: true, HTTPClient: counter})
	log := slog.New(slog.NewJSONHandler(io.Discard, nil))
	fns, err := localrunner.NewFunctions(st, clients, log, io.Discard)
	if err != nil {
		b.Fatal(err)
	}
	table := fns.IngestConfig.TableName
	ledgerSvc, err := fns.NewLedger(clients, io.Discard)
	if err != nil {
		b.Fatal(err)
	}
	poller := fns.LedgerPoller(st.Clients, ledgerSvc.HandleStream)
	poller.BatchSize = writeBatch
	// Whatever the stack's creation left on the stream is ledgered first.
	if _, err := poller.Drain(ctx); err != nil {
		b.Fatal(err)
	}
	for i := 0; i < b.N; i++ {
		source := embedded.RandomName("wcu")
		cfg := ingest.Config{TableName: table, Sources: map[string]ingest.SourceConfig{
			source: {ARN: "arn:aws:sqs:us-east-1:000000000000:" + source, DLQ: source + "-dlq", IdempotencyPointer: "/event_id", Schema: "inventory-movement.v1"},
		}}
		h, err := wire.Ingest(ctx, cfg, wire.From(clients), wire.Runtime{Log: log, Metrics: io.Discard})
		if err != nil {
			b.Fatal(err)
		}
		counter.take()
		for n := 0; n < writeBatch; n += batchSize {
			var ev events.SQSEvent
			for j := n; j < n+batchSize; j++ {
				ev.Records = append(ev.Records, events.SQSMessage{
					MessageId: fmt.Sprintf("w-%d-%d", i, j), Body: inventory(j), EventSource: "aws:sqs", EventSourceARN: "arn:aws:sqs:us-east-1:000000000000:" + source + "-dlq",
					Attributes: map[string]string{"ApproximateReceiveCount": "3", "SentTimestamp": "1764400000000", "DeadLetterQueueSourceArn": cfg.Sources[source].ARN},
				})
			}
			if resp, err := h.Handle(ctx, ev); err != nil || len(resp.BatchItemFailures) > 0 {
				b.Fatalf("ingest: %v %v", err, resp.BatchItemFailures)
			}
		}
		hotOps, hotWrites := counter.take()
		// One conditional PutItem per record, and the new source's marker
		// (dynamostore's source index: written once per source).
		records := 0
		for _, w := range hotWrites {
			if !strings.HasPrefix(w.key, "#src#") {
				records++
			}
		}
		if records != writeBatch || hotOps["dynamodb PutItem"] != len(hotWrites) || len(hotWrites) > writeBatch+1 || hotOps["dynamodb TransactWriteItems"] != 0 {
			b.Fatalf("ingest's writes for %d first arrivals: %v (%d of records)", writeBatch, hotOps, records)
		}
		// The ledger, on the batch of 100 and the head update's own change
		// (which writes nothing).
		if _, err := poller.Drain(ctx); err != nil {
			b.Fatal(err)
		}
		ledgerOps, ledgerWrites := counter.take()
		digest, err := ledgerSvc.Digest(ctx)
		if err != nil || !digest.Written {
			b.Fatalf("digest %+v: %v", digest, err)
		}
		digestOps, _ := counter.take()

		hotTable, hotIndex := units(ctx, b, st.Clients.DynamoDB, table, hotWrites)
		ledgerTable, ledgerIndex := units(ctx, b, st.Clients.DynamoDB, table, ledgerWrites)
		// Before: the same records, each in one transaction with its
		// counters' updates (the counter items as the ledger left them).
		var beforeWrites []write
		for _, w := range hotWrites {
			out, err := st.Clients.DynamoDB.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true),
				Key: map[string]ddbtypes.AttributeValue{dynamostore.KeyAttr: &ddbtypes.AttributeValueMemberS{Value: w.key}}})
			if err != nil {
				b.Fatal(err)
			}
			r, err := dynamostore.Unmarshal(out.Item)
			if err != nil {
				b.Fatal(err)
			}
			beforeWrites = append(beforeWrites, write{key: w.key, transactional: true})
			for _, d := range quarantine.CounterDeltas(nil, r) {
				beforeWrites = append(beforeWrites, write{key: dynamostore.CounterItemKey(d.CounterKey), transactional: true})
			}
		}
		beforeTable, beforeIndex := units(ctx, b, st.Clients.DynamoDB, table, beforeWrites)

		per := func(n int) float64 { return float64(n) / writeBatch }
		b.ReportMetric(per(beforeTable+beforeIndex), "wcu-before/msg")
		b.ReportMetric(per(hotTable+hotIndex), "wcu-hot/msg")
		b.ReportMetric(per(ledgerTable+ledgerIndex), "wcu-ledger/msg")
		b.ReportMetric(per(hotTable+hotIndex+ledgerTable+ledgerIndex), "wcu-after/msg")
		b.ReportMetric(per(beforeIndex), "wcu-before-gsi/msg")
		b.ReportMetric(per(hotIndex+ledgerIndex), "wcu-after-gsi/msg")
		b.ReportMetric(float64(ledgerOps["dynamodb TransactWriteItems"]), "ledger-txn/batch")
		b.ReportMetric(float64(len(ledgerWrites)), "ledger-items/batch")
		b.ReportMetric(per(hotOps["dynamodb GetItem"]), "ingest-reads/msg")
		b.ReportMetric(per(ledgerOps["s3 PutObject"])*1e6, "s3-puts/Mmsg")
		// ListObjectsV2 (the ledger looks for a segment an earlier try left)
		// is billed with the PUTs.
		b.ReportMetric(per(ledgerOps["s3 GET"])*1e6, "s3-lists/Mmsg")
		b.ReportMetric(float64(digestOps["s3 PutObject"]), "s3-puts/digest")
		b.ReportMetric(float64(digestOps["kms Sign"]), "kms-sign/digest")
		b.Logf("ingest requests for %d arrivals: %v", writeBatch, sorted(hotOps))
		b.Logf("ledger requests for them: %v; item writes %d", sorted(ledgerOps), len(ledgerWrites))
		b.Logf("digest run requests: %v", sorted(digestOps))
	}
}

func sorted(m map[string]int) string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		out = append(out, fmt.Sprintf("%s %d", k, m[k]))
	}
	return strings.Join(out, ", ")
}

// The pricing follows DynamoDB's rules: 1 KB units rounded up, doubled in a
// transaction, the index entry billed apart with its 100 bytes of overhead,
// and only for an item that has the index's keys.
func TestWriteUnitsRules(t *testing.T) {
	for size, want := range map[int]int{0: 1, 1: 1, 1024: 1, 1025: 2, 4096: 4, 4097: 5} {
		if got := writeUnits(size); got != want {
			t.Errorf("writeUnits(%d) = %d, want %d", size, got, want)
		}
	}
	s := func(v string) ddbtypes.AttributeValue { return &ddbtypes.AttributeValueMemberS{Value: v} }
	big := strings.Repeat("x", 1500)
	record := map[string]ddbtypes.AttributeValue{"dlq_id": s("q#1"), "status": s("QUARANTINED"), "first_seen": s("2026"), "body": s(big), "source": s("q")}
	table, index := itemWrite(record, false)
	if table != 2 || index != 1 {
		t.Errorf("a 1.5 KB record: table %d, index %d; want 2, 1", table, index)
	}
	if table, _ := itemWrite(record, true); table != 4 {
		t.Errorf("in a transaction: %d, want 4", table)
	}
	// The body is not projected: the entry is the keys, source and 100 bytes.
	if n, ok := indexEntrySize(record); !ok || n != len("dlq_idq#1statusQUARANTINEDfirst_seen2026sourceq")+100 {
		t.Errorf("index entry %d %v", n, ok)
	}
	record["failure_signature"] = s(big)
	if _, index := itemWrite(record, false); index != 2 {
		t.Errorf("a projected 1.5 KB attribute: index %d, want 2", index)
	}
	if _, index := itemWrite(map[string]ddbtypes.AttributeValue{"dlq_id": s("#ctr#q#state#1"), "n": &ddbtypes.AttributeValueMemberN{Value: "3"}}, true); index != 0 {
		t.Errorf("an item outside the index costs the index %d", index)
	}
	got := writesOf("dynamodb TransactWriteItems", []byte(`{"TransactItems":[{"Update":{"Key":{"dlq_id":{"S":"#led#ctr#s"}}}},{"Put":{"Item":{"dlq_id":{"S":"q#1"},"n":{"N":"1"}}}},{"ConditionCheck":{"Key":{"dlq_id":{"S":"c"}}}}]}`))
	want := []write{{"dynamodb TransactWriteItems Update", "#led#ctr#s", true}, {"dynamodb TransactWriteItems Put", "q#1", true}}
	if !slices.Equal(got, want) {
		t.Errorf("writesOf: %v, want %v", got, want)
	}
}

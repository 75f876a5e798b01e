package capacity_test

import (
	"strings"

	"context"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/dlqquarantine/dlqq/shared/adapter/dynamostore"
	"github.com/dlqquarantine/dlqq/shared/dev/capacity"
	"github.com/dlqquarantine/dlqq/shared/dev/embedded"
	"github.com/dlqquarantine/dlqq/shared/dev/latency"
	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
)

// Reads are priced by DynamoDB's rules: 4 KB units rounded up, half when
// eventually consistent, a key not found at the minimum, a Query on the
// sum of what it read (filtered items at the returned items' mean size).
func TestReadUnitsRules(t *testing.T) {
	for _, c := range []struct {
		size       int
		consistent bool
		want       float64
	}{{0, true, 1}, {4096, true, 1}, {4097, true, 2}, {4097, false, 1}, {100, false, 0.5}} {
		if got := capacity.ReadUnits(c.size, c.consistent); got != c.want {
			t.Errorf("ReadUnits(%d, %v) = %v, want %v", c.size, c.consistent, got, c.want)
		}
	}
}

// A small lifecycle on the emulator: every message ingested, replayed
// once, settled and archived, each step metered; the per-million figures
// follow from what each step did.
func TestLifecycleOnTheEmulator(t *testing.T) {
	ctx := context.Background()
	st := embedded.ForTest(t, embedded.Options{Params: capacity.LifecycleParams})
	const n = 40
	res, err := capacity.Lifecycle(ctx, st, n, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Unmodelled != "" {
		t.Errorf("calls without a latency in the model: %s", res.Unmodelled)
	}
	byFn := map[string]capacity.Phase{}
	for _, p := range res.Phases {
		byFn[p.Function] = p
		t.Logf("%s: %d invocations, %s, %d WRU, %.1f RRU, %s", p.Function, p.Invocations, p.Duration, p.WriteUnits, p.ReadUnits, p.Calls)
	}
	in := byFn["IngestFunction"]
	if in.Invocations != n/10 || in.Calls.Ops["dynamodb PutItem"] < n || in.WriteUnits < n {
		t.Errorf("ingest: %+v", in)
	}
	if rd := byFn["RedriveFunction"]; rd.Calls.Ops["sqs SendMessageBatch"] == 0 || rd.WriteUnits < 2*n {
		t.Errorf("redrive: %+v", rd)
	}
	if sw := byFn["SweeperFunction"]; sw.Calls.Ops["s3 PutObject"] < n {
		t.Errorf("sweeper: %d archive PUTs for %d records", sw.Calls.Ops["s3 PutObject"], n)
	}
	if l := byFn["LedgerFunction"]; l.Invocations == 0 || l.Calls.Ops["s3 PutObject"] == 0 {
		t.Errorf("ledger: %+v", l)
	}
	// Every record ends archived.
	page, err := dynamostore.NewLister(st.Clients.DynamoDB, st.Names["QuarantineTable"]).List(ctx, quarantine.ListQuery{Source: st.Names["SourceQueue"], Status: quarantine.StatusArchived, Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.IDs) != n {
		t.Fatalf("%d records archived, want %d", len(page.IDs), n)
	}
	m := res.PerMillion()
	for _, l := range m.Lines() {
		t.Log(l)
	}
	if m.GBSeconds <= 0 || m.WriteUnits < 4e6 || m.ReadUnits <= 0 || m.S3Tier1 < 1e6 || m.Dollars <= 0 {
		t.Fatalf("per million: %+v", m)
	}
}

// An S3 request the SDK names by its method is named by its subresource,
// so that it is priced right: a listing and a tagging are PUT-priced, a
// retention read GET-priced, a delete free.
func TestS3RequestsArePricedByWhatTheyAre(t *testing.T) {
	calls := capacity.NewCalls(okClient{}, latency.Model{})
	for _, u := range []struct{ method, url string }{
		{"GET", "http://s3.local/b?list-type=2&prefix=ledger%2F"},
		{"GET", "http://s3.local/b?versions&prefix=ledger%2F"},
		{"PUT", "http://s3.local/b/k?tagging"},
		{"GET", "http://s3.local/b/k?retention"},
		{"GET", "http://s3.local/b/k"},
		{"DELETE", "http://s3.local/b/k"},
		{"PUT", "http://s3.local/b/k?x-id=PutObject"},
	} {
		req := httptest.NewRequest(u.method, u.url, nil)
		req.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential=x/20261207/us-east-1/s3/aws4_request")
		if _, err := calls.Do(req); err != nil {
			t.Fatal(err)
		}
	}
	res := &capacity.LifecycleResult{Messages: 1e6, Phases: []capacity.Phase{{Function: "x", Calls: calls.Snapshot()}}}
	m := res.PerMillion()
	want := map[string]float64{"ListObjectsV2": 1, "ListObjectVersions": 1, "PutObjectTagging": 1, "GetObjectRetention": 1, "GetObject": 1, "DeleteObject": 1, "PutObject": 1}
	for k, v := range want {
		if m.S3[k] != v {
			t.Errorf("%s: %v, want %v (all: %v)", k, m.S3[k], v, m.S3)
		}
	}
	if m.S3Tier1 != 4 || m.S3Tier2 != 2 {
		t.Fatalf("PUT-priced %v, GET-priced %v; want 4 and 2 (the delete free)", m.S3Tier1, m.S3Tier2)
	}
}

type okClient struct{}

func (okClient) Do(*http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: 200, Body: http.NoBody}, nil
}

// The meter prices a projected read of the table on the whole item (read
// again), a key not found at the minimum, and each item of a BatchGetItem
// on its own.
func TestReadsPriceWholeItems(t *testing.T) {
	ctx := context.Background()
	st := embedded.ForTest(t, embedded.Options{NoS3: true})
	table := st.Names["QuarantineTable"]
	reads := &capacity.Reads{Full: st.Clients.DynamoDB, Keys: []string{"dlq_id"}}
	cfg := st.AWS.Copy()
	cfg.APIOptions = append(cfg.APIOptions, reads.APIOption)
	api := dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) { o.BaseEndpoint = aws.String(st.Endpoint) })
	big := map[string]ddbtypes.AttributeValue{"dlq_id": &ddbtypes.AttributeValueMemberS{Value: "price#1"}, "pad": &ddbtypes.AttributeValueMemberS{Value: strings.Repeat("x", 9000)}}
	if _, err := st.Clients.DynamoDB.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: big}); err != nil {
		t.Fatal(err)
	}
	key := func(id string) map[string]ddbtypes.AttributeValue {
		return map[string]ddbtypes.AttributeValue{"dlq_id": &ddbtypes.AttributeValueMemberS{Value: id}}
	}
	step := func(want float64, call func() error) {
		t.Helper()
		before := reads.Units()
		if err := call(); err != nil {
			t.Fatal(err)
		}
		if got := reads.Units(); got-before != want {
			t.Fatalf("priced %v read units, want %v", got-before, want)
		}
	}
	// 9 KB: three 4 KB units, halved when eventually consistent, however
	// little the projection returns.
	step(1.5, func() error {
		_, err := api.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), Key: key("price#1"), ProjectionExpression: aws.String("dlq_id")})
		return err
	})
	step(3, func() error {
		_, err := api.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), Key: key("price#1"), ConsistentRead: aws.Bool(true)})
		return err
	})
	step(0.5, func() error {
		_, err := api.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), Key: key("price#none")})
		return err
	})
	step(2, func() error { // 1.5 for the item, 0.5 for the key not found
		_, err := api.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: map[string]ddbtypes.KeysAndAttributes{
			table: {Keys: []map[string]ddbtypes.AttributeValue{key("price#1"), key("price#none")}, ProjectionExpression: aws.String("dlq_id")}}})
		return err
	})
}

// A call the latency model has no figure for is listed (it waits nothing,
// so the durations would be short of AWS's); a modelled one is not.
func TestCallsListWhatTheModelLacks(t *testing.T) {
	calls := capacity.NewCalls(okClient{}, latency.Model{By: map[string]time.Duration{"dynamodb": time.Microsecond}})
	for _, c := range []struct{ svc, target string }{{"dynamodb", "DynamoDB_20120810.GetItem"}, {"sqs", "AmazonSQS.SendMessage"}} {
		req := httptest.NewRequest("POST", "http://"+c.svc+".local/", nil)
		req.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential=x/20261207/us-east-1/"+c.svc+"/aws4_request, SignedHeaders=host, Signature=0")
		req.Header.Set("X-Amz-Target", c.target)
		if _, err := calls.Do(req); err != nil {
			t.Fatal(err)
		}
	}
	if got := calls.Unmodelled(latency.Model{By: map[string]time.Duration{"dynamodb": time.Microsecond}}); got != "sqs SendMessage 1" {
		t.Fatalf("unmodelled %q, want the SQS call alone", got)
	}
}

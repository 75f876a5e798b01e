package dynamostore_test

import (
	"context"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"

	cfnddb "github.com/awslabs/goformation/v7/cloudformation/dynamodb"

	"github.com/dlqquarantine/dlqq/shared/adapter/dynamostore"
	"github.com/dlqquarantine/dlqq/shared/dev/embedded"
	"github.com/dlqquarantine/dlqq/shared/dev/storetest"
	"github.com/dlqquarantine/dlqq/shared/dev/template"
	"github.com/dlqquarantine/dlqq/shared/domain/policy"
	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
)

// readCounting sums what DynamoDB says each Query read (ScannedCount: the
// items evaluated, before any filter) and notes each index partition
// queried.
type readCounting struct {
	dynamostore.API
	mu      sync.Mutex
	scanned int
	queries int
	indexes []string
	parts   []string
}

var keyCond = regexp.MustCompile(`(#\w+) = (:\w+)`)

func (c *readCounting) Query(ctx context.Context, in *dynamodb.QueryInput, opts ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	out, err := c.API.Query(ctx, in, opts...)
	if err != nil {
		return out, err
	}
	part := ""
	for _, m := range keyCond.FindAllStringSubmatch(aws.ToString(in.KeyConditionExpression), -1) {
		if n := in.ExpressionAttributeNames[m[1]]; n == dynamostore.IndexKeyAttr || n == "status" {
			if v, ok := in.ExpressionAttributeValues[m[2]].(*ddbtypes.AttributeValueMemberS); ok {
				part = v.Value
			}
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.scanned += int(out.ScannedCount)
	c.queries++
	c.indexes = append(c.indexes, aws.ToString(in.IndexName))
	c.parts = append(c.parts, part)
	return out, nil
}

func (c *readCounting) reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.scanned, c.queries, c.indexes, c.parts = 0, 0, nil, nil
}

// sourceRecord is a sealed record of source with first_seen at.
func sourceRecord(t *testing.T, source string, at time.Time, edit func(*quarantine.Record)) *quarantine.Record {
	t.Helper()
	r := storetest.Record(t, storetest.UniqueID("r"))
	r.Source, r.DLQID = source, source+"#"+r.IdempotencyKey
	r.FirstSeen, r.StatusSince, r.LastSeen = quarantine.At(at), quarantine.At(at), quarantine.At(at)
	if edit != nil {
		edit(r)
	}
	if err := quarantine.SealRecord(r); err != nil {
		t.Fatal(err)
	}
	return r
}

// Issue 28's done-means: with 50 sources in one table, a source's listing
// and its oldest-record query read only that source's items (counted with
// DynamoDB's ScannedCount), however many the other sources hold.
func TestFiftySourcesAListingReadsOnlyItsSource(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	table := stack.Names["QuarantineTable"]
	s := dynamostore.New(stack.Clients.DynamoDB, table)
	prefix := storetest.UniqueID("fifty")
	base := time.Date(2026, 9, 1, 0, 0, 0, 0, time.UTC)
	sources := make([]string, 50)
	mine := map[string][]string{} // source → its QUARANTINED ids, oldest first
	total := 0
	for i := range sources {
		sources[i] = fmt.Sprintf("%s-%02d", prefix, i)
		n := 4 + i%5
		if i == 17 {
			n = 40 // the busy one
		}
		for k := range n {
			// Every source's records interleave in time with the others'.
			r := sourceRecord(t, sources[i], base.Add(time.Duration(k*50+i)*time.Second), func(r *quarantine.Record) {
				if k%9 == 8 {
					r.Status = quarantine.StatusParked
				}
			})
			if err := s.Create(ctx, r); err != nil {
				t.Fatal(err)
			}
			total++
			if r.Status == quarantine.StatusQuarantined {
				mine[sources[i]] = append(mine[sources[i]], r.DLQID)
			}
		}
	}
	api := &readCounting{API: stack.Clients.DynamoDB}
	l := dynamostore.NewLister(api, table)
	if _, err := l.List(ctx, quarantine.ListQuery{Status: quarantine.StatusResolved, Source: sources[0], Limit: 1}); err != nil {
		t.Fatal(err) // (reads the index state once: counted by no listing below)
	}
	for _, src := range []string{sources[17], sources[3], sources[49]} {
		api.reset()
		ids, err := quarantine.ListIDs(ctx, l, quarantine.ListQuery{Status: quarantine.StatusQuarantined, Source: src})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(ids, mine[src]) {
			t.Fatalf("%s listed %v, want %v", src, ids, mine[src])
		}
		api.mu.Lock()
		scanned, parts, indexes := api.scanned, slices.Clone(api.parts), slices.Clone(api.indexes)
		api.mu.Unlock()
		if scanned != len(mine[src]) {
			t.Errorf("listing %s read %d items: want exactly its %d QUARANTINED records (the table holds %d records of 50 sources)", src, scanned, len(mine[src]), total)
		}
		checkPartitions(t, src, parts, indexes)

		api.reset()
		id, err := quarantine.FirstID(ctx, l, quarantine.ListQuery{Status: quarantine.StatusQuarantined, Source: src, Limit: 1})
		if err != nil || id != mine[src][0] {
			t.Fatalf("oldest of %s = %q, %v; want %s", src, id, err, mine[src][0])
		}
		api.mu.Lock()
		scanned, parts, indexes = api.scanned, slices.Clone(api.parts), slices.Clone(api.indexes)
		api.mu.Unlock()
		if scanned > dynamostore.IndexShards || scanned > len(mine[src]) {
			t.Errorf("the oldest record of %s read %d items: want at most one per shard of its own", src, scanned)
		}
		checkPartitions(t, src, parts, indexes)
	}
	// Across sources: every source is named, and each record listed once.
	names, err := l.ListSources(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, src := range sources {
		if !slices.Contains(names, src) {
			t.Fatalf("ListSources lacks %s", src)
		}
	}
	var across []string
	for page, err := range quarantine.Pages(ctx, l, quarantine.ListQuery{Status: quarantine.StatusQuarantined, Limit: 100}) {
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range page.IDs {
			if strings.HasPrefix(id, prefix) {
				across = append(across, id)
			}
		}
	}
	var want []string
	for _, src := range sources {
		want = append(want, mine[src]...)
	}
	if !slices.Equal(across, want) {
		t.Fatalf("across sources listed %d of ours, want %d, source by source", len(across), len(want))
	}
}

// checkPartitions fails unless every query read a partition of source's
// QUARANTINED records in the source index.
func checkPartitions(t *testing.T, source string, parts, indexes []string) {
	t.Helper()
	for i, p := range parts {
		if indexes[i] != dynamostore.IndexBySource || !strings.HasPrefix(p, source+"#"+string(quarantine.StatusQuarantined)+"#") {
			t.Errorf("query %d read partition %q of index %s: not one of %s's", i, p, indexes[i], source)
		}
	}
}

// freshTable is a new table with the keys and indexes of a stack deployed
// with LegacyStatusIndex legacy, and no index state: with "keep" as on a
// stack deployed before the source index and updated to this release,
// with "drop" as on a stack created by this release.
func freshTable(t *testing.T, legacy string) string {
	t.Helper()
	tpl, err := template.Open(template.Path(), template.Env{StackName: legacy, Region: embedded.Region, Account: embedded.Account,
		Params: map[string]any{"LegacyStatusIndex": legacy}})
	if err != nil {
		t.Fatal(err)
	}
	tb, err := tpl.GetDynamoDBTableWithName("QuarantineTable")
	if err != nil {
		t.Fatal(err)
	}
	name := storetest.UniqueID("pre-v3")
	in := &dynamodb.CreateTableInput{TableName: aws.String(name), BillingMode: ddbtypes.BillingModePayPerRequest}
	for _, a := range tb.AttributeDefinitions {
		in.AttributeDefinitions = append(in.AttributeDefinitions, ddbtypes.AttributeDefinition{AttributeName: aws.String(a.AttributeName), AttributeType: ddbtypes.ScalarAttributeType(a.AttributeType)})
	}
	keys := func(ks []cfnddb.Table_KeySchema) (out []ddbtypes.KeySchemaElement) {
		for _, k := range ks {
			out = append(out, ddbtypes.KeySchemaElement{AttributeName: aws.String(k.AttributeName), KeyType: ddbtypes.KeyType(k.KeyType)})
		}
		return out
	}
	in.KeySchema = keys(tb.KeySchema)
	for _, g := range tb.GlobalSecondaryIndexes {
		in.GlobalSecondaryIndexes = append(in.GlobalSecondaryIndexes, ddbtypes.GlobalSecondaryIndex{IndexName: aws.String(g.IndexName), KeySchema: keys(g.KeySchema),
			Projection: &ddbtypes.Projection{ProjectionType: ddbtypes.ProjectionType(aws.ToString(g.Projection.ProjectionType)), NonKeyAttributes: g.Projection.NonKeyAttributes}})
	}
	if want := map[string]int{"keep": 2, "drop": 1}[legacy]; len(in.GlobalSecondaryIndexes) != want {
		t.Fatalf("with LegacyStatusIndex=%s the table has %d indexes, want %d", legacy, len(in.GlobalSecondaryIndexes), want)
	}
	if _, err := stack.Clients.DynamoDB.CreateTable(context.Background(), in); err != nil {
		t.Fatal(err)
	}
	return name
}

// preIndexWriter writes as the functions did before the source index:
// no status_key, no source markers.
type preIndexWriter struct{ dynamostore.API }

func (w preIndexWriter) PutItem(ctx context.Context, in *dynamodb.PutItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	if k, _ := in.Item[dynamostore.KeyAttr].(*ddbtypes.AttributeValueMemberS); k != nil && strings.HasPrefix(k.Value, "#src#") {
		return &dynamodb.PutItemOutput{}, nil
	}
	item := maps.Clone(in.Item)
	delete(item, dynamostore.IndexKeyAttr)
	cp := *in
	cp.Item = item
	return w.API.PutItem(ctx, &cp, opts...)
}

// A live stack moves over without losing a listing: items written before
// the source index are listed through the status index until the
// backfill completes; the backfill adds only status_key (each record
// keeps its version and seal, and the change is exactly the one the
// ledger accepts in place); then listings read the source index and find
// the same records, held ones and policies included.
func TestBackfillMovesListingsToTheSourceIndex(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	table := freshTable(t, "keep")
	old := preIndexWriter{API: stack.Clients.DynamoDB}
	s, ps := dynamostore.New(old, table), dynamostore.NewPolicyStore(old, table)
	a, b := storetest.UniqueID("bf-a"), storetest.UniqueID("bf-b")
	base := time.Date(2026, 8, 1, 0, 0, 0, 0, time.UTC)
	var open, all []*quarantine.Record
	for i := range 6 {
		src := a
		if i >= 4 {
			src = b
		}
		r := sourceRecord(t, src, base.Add(time.Duration(i)*time.Minute), nil)
		if err := s.Create(ctx, r); err != nil {
			t.Fatal(err)
		}
		all = append(all, r)
		if src == a && i > 0 {
			open = append(open, r)
		}
	}
	parked, err := all[0].ParkManual("ops", "looked at", base.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Replace(ctx, all[0], parked); err != nil {
		t.Fatal(err)
	}
	all[0] = parked
	held := open[0]
	if err := s.Hold(ctx, quarantine.IntegrityHold{ID: held.DLQID, Version: held.Version, Reason: "seal_mismatch", At: base}); err != nil {
		t.Fatal(err)
	}
	open = open[1:]
	p, err := policy.New(policy.Spec{Source: a, Signatures: []string{"sig-a"}, MaxPerRun: 10, ExpiresAt: base.Add(24 * time.Hour)}, "alice", base)
	if err != nil {
		t.Fatal(err)
	}
	if err := ps.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	raw := func(id string) map[string]ddbtypes.AttributeValue {
		t.Helper()
		out, err := stack.Clients.DynamoDB.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), Key: map[string]ddbtypes.AttributeValue{
			dynamostore.KeyAttr: &ddbtypes.AttributeValueMemberS{Value: id}}, ConsistentRead: aws.Bool(true)})
		if err != nil {
			t.Fatal(err)
		}
		return out.Item
	}
	before := map[string]map[string]ddbtypes.AttributeValue{}
	for _, r := range all {
		before[r.DLQID] = raw(r.DLQID)
		if before[r.DLQID][dynamostore.IndexKeyAttr] != nil {
			t.Fatalf("%s has a status_key before the backfill", r.DLQID)
		}
	}
	ids := func(rs []*quarantine.Record) []string {
		var out []string
		for _, r := range rs {
			out = append(out, r.DLQID)
		}
		return out
	}
	check := func(when, index string) {
		t.Helper()
		api := &readCounting{API: stack.Clients.DynamoDB}
		l := dynamostore.NewLister(api, table)
		got, err := quarantine.ListIDs(ctx, l, quarantine.ListQuery{Status: quarantine.StatusQuarantined, Source: a, Limit: 2})
		if err != nil || !slices.Equal(got, ids(open)) {
			t.Fatalf("%s: open records of %s = %v, %v; want %v", when, a, got, err, ids(open))
		}
		got, err = quarantine.ListIDs(ctx, l, quarantine.ListQuery{Status: quarantine.StatusQuarantined, Source: a, Held: true})
		if err != nil || !slices.Equal(got, []string{held.DLQID}) {
			t.Fatalf("%s: held = %v, %v", when, got, err)
		}
		got, err = quarantine.ListIDs(ctx, l, quarantine.ListQuery{Status: quarantine.StatusParked})
		if err != nil || !slices.Equal(got, []string{all[0].DLQID}) {
			t.Fatalf("%s: parked across sources = %v, %v", when, got, err)
		}
		pols, err := dynamostore.NewPolicyStore(stack.Clients.DynamoDB, table).List(ctx, a)
		if err != nil || len(pols) != 1 || pols[0].ID != p.ID {
			t.Fatalf("%s: policies %v, %v", when, pols, err)
		}
		for i, ix := range api.indexes {
			if ix != index && api.parts[i] != "#idx" { // (the index state is read from the status index)
				t.Fatalf("%s: a listing read %s, want %s only", when, ix, index)
			}
		}
	}
	check("before the backfill", dynamostore.IndexByStatus)

	rep, err := dynamostore.Backfill(ctx, stack.Clients.DynamoDB, table)
	if err != nil || !rep.Complete || rep.Updated != len(all)+1 || !slices.Equal(rep.Sources, []string{a, b}) {
		t.Fatalf("backfill = %+v, %v; want complete, %d items updated, sources %s and %s", rep, err, len(all)+1, a, b)
	}
	for _, r := range all {
		after := raw(r.DLQID)
		k, _ := after[dynamostore.IndexKeyAttr].(*ddbtypes.AttributeValueMemberS)
		if want := dynamostore.RecordPartition(r.Source, r.Status, dynamostore.IndexShard(r.DLQID)); k == nil || k.Value != want {
			t.Fatalf("%s: status_key %v, want %s", r.DLQID, k, want)
		}
		// The ledger's view of the change: the version as it was, plus the
		// status_key its fields derive (ledger.Input.IndexKey accepts it).
		li, err := dynamostore.LedgerItem(after)
		if err != nil {
			t.Fatal(err)
		}
		if dynamostore.IndexKeyOf(li) != k.Value {
			t.Fatalf("%s: IndexKeyOf = %q, the backfill wrote %q", r.DLQID, dynamostore.IndexKeyOf(li), k.Value)
		}
		stripped := maps.Clone(after)
		delete(stripped, dynamostore.IndexKeyAttr)
		x, _ := dynamostore.LedgerItem(stripped)
		y, _ := dynamostore.LedgerItem(before[r.DLQID])
		cx, _ := x.Canonical()
		cy, _ := y.Canonical()
		if string(cx) != string(cy) {
			t.Fatalf("%s: the backfill changed more than status_key", r.DLQID)
		}
		got, err := s.Get(ctx, r.DLQID)
		if err != nil || got.Version != r.Version || got.Seal != r.Seal || quarantine.Verify(got) != nil {
			t.Fatalf("%s after the backfill: %v (version %d, seal %s)", r.DLQID, err, got.Version, got.Seal)
		}
	}
	check("after the backfill", dynamostore.IndexBySource)

	rep, err = dynamostore.Backfill(ctx, stack.Clients.DynamoDB, table)
	if err != nil || !rep.Complete || rep.Updated != 0 || rep.Passes != 1 {
		t.Fatalf("a second backfill = %+v, %v; want complete in one pass, nothing updated", rep, err)
	}
}

// A stack created by this release (LegacyStatusIndex=drop) has no status
// index and nobody runs the backfill on it: its listings read the source
// index from the first one, and find every record, policy and source.
func TestANewStackListsFromTheSourceIndexWithoutABackfill(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	table := freshTable(t, "drop")
	s := dynamostore.New(stack.Clients.DynamoDB, table)
	a, b := storetest.UniqueID("new-a"), storetest.UniqueID("new-b")
	base := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	var ofA []string
	for i := range 5 {
		src := a
		if i%2 == 1 {
			src = b
		}
		r := sourceRecord(t, src, base.Add(time.Duration(i)*time.Minute), nil)
		if err := s.Create(ctx, r); err != nil {
			t.Fatal(err)
		}
		if src == a {
			ofA = append(ofA, r.DLQID)
		}
	}
	p, err := policy.New(policy.Spec{Source: a, Signatures: []string{"sig-a"}, MaxPerRun: 10, ExpiresAt: base.Add(24 * time.Hour)}, "alice", base)
	if err != nil {
		t.Fatal(err)
	}
	if err := dynamostore.NewPolicyStore(stack.Clients.DynamoDB, table).Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	api := &readCounting{API: stack.Clients.DynamoDB}
	l := dynamostore.NewLister(api, table)
	got, err := quarantine.ListIDs(ctx, l, quarantine.ListQuery{Status: quarantine.StatusQuarantined, Source: a})
	if err != nil || !slices.Equal(got, ofA) {
		t.Fatalf("open records of %s = %v, %v; want %v", a, got, err, ofA)
	}
	all, err := quarantine.ListIDs(ctx, l, quarantine.ListQuery{Status: quarantine.StatusQuarantined})
	if err != nil || len(all) != 5 {
		t.Fatalf("open records across sources = %v, %v; want 5", all, err)
	}
	if srcs, err := l.ListSources(ctx); err != nil || !slices.Equal(srcs, []string{a, b}) {
		t.Fatalf("sources = %v, %v", srcs, err)
	}
	pols, err := dynamostore.NewPolicyStore(api, table).List(ctx, a)
	if err != nil || len(pols) != 1 || pols[0].ID != p.ID {
		t.Fatalf("policies %v, %v", pols, err)
	}
	for i, ix := range api.indexes {
		if ix != dynamostore.IndexBySource {
			t.Fatalf("query %d read index %s (partition %q): a table without the status index is read from the source index", i, ix, api.parts[i])
		}
	}
}

// scanAll is every item of table.
func scanAll(t *testing.T, table string) []map[string]ddbtypes.AttributeValue {
	t.Helper()
	var items []map[string]ddbtypes.AttributeValue
	p := dynamodb.NewScanPaginator(stack.Clients.DynamoDB, &dynamodb.ScanInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true)})
	for p.HasMorePages() {
		page, err := p.NextPage(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		items = append(items, page.Items...)
	}
	return items
}

// On a table without the status index, listings read the source index
// from the start, without an index state: so every record must be in it.
// Whoever writes a record without its status_key (any role that writes
// records), or rewrites a source marker (ingest's role, which writes
// them), is named by the index check verify runs; and ingest writes a
// rewritten marker again at its next start.
func TestANewStacksIndexCheckNamesWhatItsListingsMiss(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	table := freshTable(t, "drop")
	api := stack.Clients.DynamoDB
	a := storetest.UniqueID("chk")
	base := time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)
	if err := dynamostore.New(api, table).Create(ctx, sourceRecord(t, a, base, nil)); err != nil {
		t.Fatal(err)
	}
	bySource, err := dynamostore.ReadsSourceIndex(ctx, api, table)
	if err != nil || !bySource {
		t.Fatalf("ReadsSourceIndex on a table without the status index = %v, %v", bySource, err)
	}
	if p := dynamostore.IndexCheck(scanAll(t, table), bySource); len(p) != 0 {
		t.Fatalf("a clean table: %v", p)
	}
	keyless := sourceRecord(t, a, base.Add(time.Minute), nil)
	item, err := dynamostore.Marshal(keyless)
	if err != nil {
		t.Fatal(err)
	}
	delete(item, dynamostore.IndexKeyAttr)
	marker := "#src#" + a
	for _, it := range []map[string]ddbtypes.AttributeValue{item, {
		dynamostore.KeyAttr: &ddbtypes.AttributeValueMemberS{Value: marker}, "status": &ddbtypes.AttributeValueMemberS{Value: "#x"},
		dynamostore.IndexKeyAttr: &ddbtypes.AttributeValueMemberS{Value: "#x"}, "source": &ddbtypes.AttributeValueMemberS{Value: a},
		"first_seen": &ddbtypes.AttributeValueMemberS{Value: "2026-12-02T00:00:00Z"}}} {
		if _, err := api.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: it}); err != nil {
			t.Fatal(err)
		}
	}
	if srcs, err := dynamostore.NewLister(api, table).ListSources(ctx); err != nil || slices.Contains(srcs, a) {
		t.Fatalf("with its marker rewritten, the sources listed are %v, %v: want %s missing (the attack this check names)", srcs, err, a)
	}
	named := map[string]string{}
	for _, p := range dynamostore.IndexCheck(scanAll(t, table), bySource) {
		named[p.ID] += p.What
	}
	if !strings.Contains(named[keyless.DLQID], "no status_key") || !strings.Contains(named[marker], "rewritten") {
		t.Fatalf("index check = %v; want %s without status_key and %s rewritten", named, keyless.DLQID, marker)
	}
	// Without the state and with the status index, nothing is named: the
	// listings read the status index.
	if p := dynamostore.IndexCheck(scanAll(t, table), false); len(p) != 0 {
		t.Fatalf("before the listings read the source index: %v", p)
	}
	// Ingest's next start writes the marker again.
	if err := dynamostore.New(api, table).Create(ctx, sourceRecord(t, a, base.Add(2*time.Minute), nil)); err != nil {
		t.Fatal(err)
	}
	if srcs, err := dynamostore.NewLister(api, table).ListSources(ctx); err != nil || !slices.Contains(srcs, a) {
		t.Fatalf("after ingest's next start, the sources listed are %v, %v; want %s", srcs, err, a)
	}
}

// backfilling answers a Query on the source index as DynamoDB does while
// it builds the index (CREATING), and describes it so.
type backfilling struct{ *dynamodb.Client }

func (b backfilling) Query(ctx context.Context, in *dynamodb.QueryInput, opts ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	if aws.ToString(in.IndexName) == dynamostore.IndexBySource {
		return nil, &smithy.GenericAPIError{Code: "ValidationException", Message: "Cannot read from backfilling global secondary index: " + dynamostore.IndexBySource}
	}
	return b.Client.Query(ctx, in, opts...)
}

func (b backfilling) DescribeTable(ctx context.Context, in *dynamodb.DescribeTableInput, opts ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error) {
	out, err := b.Client.DescribeTable(ctx, in, opts...)
	if err == nil {
		for i, g := range out.Table.GlobalSecondaryIndexes {
			if aws.ToString(g.IndexName) == dynamostore.IndexBySource {
				out.Table.GlobalSecondaryIndexes[i].IndexStatus = ddbtypes.IndexStatusCreating
			}
		}
	}
	return out, err
}

// Step 1 of the move: CloudFormation has completed the update that adds
// the source index while DynamoDB still builds it. The listings keep
// reading the status index (they never query the source index until the
// state says so), and the backfill refuses to write the state until the
// index is ACTIVE.
func TestListingsAndTheBackfillWaitForTheSourceIndex(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	table := freshTable(t, "keep")
	old := preIndexWriter{API: stack.Clients.DynamoDB}
	a := storetest.UniqueID("bf-wait")
	r := sourceRecord(t, a, time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC), nil)
	if err := dynamostore.New(old, table).Create(ctx, r); err != nil {
		t.Fatal(err)
	}
	api := backfilling{Client: stack.Clients.DynamoDB}
	got, err := quarantine.ListIDs(ctx, dynamostore.NewLister(api, table), quarantine.ListQuery{Status: quarantine.StatusQuarantined, Source: a})
	if err != nil || !slices.Equal(got, []string{r.DLQID}) {
		t.Fatalf("listing while the source index is built = %v, %v; want %s", got, err, r.DLQID)
	}
	rep, err := dynamostore.Backfill(ctx, api, table)
	if err == nil || !strings.Contains(err.Error(), "CREATING") || rep.Complete {
		t.Fatalf("backfill while the source index is built = %+v, %v; want refused, naming CREATING", rep, err)
	}
	if bySource, err := dynamostore.ReadsSourceIndex(ctx, stack.Clients.DynamoDB, table); err != nil || bySource {
		t.Fatalf("after the refused backfill the listings read the source index (%v, %v)", bySource, err)
	}
}

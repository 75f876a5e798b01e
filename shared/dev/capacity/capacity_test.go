package capacity_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/dlqquarantine/dlqq/shared/dev/capacity"
	"github.com/dlqquarantine/dlqq/shared/dev/embedded"
	"github.com/dlqquarantine/dlqq/shared/dev/template"
	"github.com/dlqquarantine/dlqq/shared/runtime/awsclients"
)

func s(v string) ddbtypes.AttributeValue { return &ddbtypes.AttributeValueMemberS{Value: v} }
func n(v string) ddbtypes.AttributeValue { return &ddbtypes.AttributeValueMemberN{Value: v} }
func key(id string) capacity.Item        { return capacity.Item{"dlq_id": s(id)} }
func w(target, k string, units int, kind string) capacity.Write {
	return capacity.Write{Target: target, Key: k, Units: units, Kind: kind}
}

// byStatus is a status-partitioned index like the template's first one:
// keys status and first_seen, source and redrive_count projected.
var byStatus = capacity.Layout{Hash: "dlq_id", Indexes: []capacity.Index{{Name: "by-status", Hash: "status", Range: "first_seen",
	Projection: "INCLUDE", NonKey: []string{"source", "redrive_count"}}}}

// record is 1,582 bytes by DynamoDB's rules (name + value of each
// attribute; a number is (digits+1)/2+1 bytes): dlq_id 6+3, status 6+11,
// first_seen 10+20, source 6+1, body 4+1500, redrive_count 13+2. Its
// entry in by-status: 9+17+30+7+15 = 78 bytes + 100 of overhead.
func record() capacity.Item {
	return capacity.Item{"dlq_id": s("q#1"), "status": s("QUARANTINED"), "first_seen": s("2026-12-06T00:00:00Z"), "source": s("q"),
		"body": s(strings.Repeat("x", 1500)), "redrive_count": n("0")}
}

func with(item capacity.Item, k string, v ddbtypes.AttributeValue) capacity.Item {
	out := capacity.Item{}
	for a, b := range item {
		out[a] = b
	}
	out[k] = v
	return out
}

func changed(ws ...capacity.Write) []capacity.Write {
	ws[0].Changed = true
	return ws
}

// Known writes, priced by hand (record's sizes above).
func TestPriceByHand(t *testing.T) {
	rec := record()
	counter := capacity.Item{"dlq_id": s("#ctr#q#state#1"), "n": n("3")} // 6+14 + 1+2 = 23 bytes
	for _, tc := range []struct {
		name          string
		old, new      capacity.Item
		transactional bool
		applied       bool
		want          []capacity.Write
	}{
		{"first arrival: 2 units, one index put of 178 bytes", nil, rec, false, true,
			changed(w("table", "q#1", 2, "write"), w("by-status", "QUARANTINED", 1, "put"))},
		{"status changes: an index key changed is a delete and a put", rec, with(rec, "status", s("REDRIVING")), false, true,
			changed(w("table", "q#1", 2, "write"), w("by-status", "QUARANTINED", 1, "delete"), w("by-status", "REDRIVING", 1, "put"))},
		{"an unprojected attribute grows to 3,082 bytes: 4 units, no index write", rec, with(rec, "body", s(strings.Repeat("y", 3000))), false, true,
			changed(w("table", "q#1", 4, "write"))},
		{"a projected attribute changes: one index update", rec, with(rec, "redrive_count", n("1")), false, true,
			changed(w("table", "q#1", 2, "write"), w("by-status", "QUARANTINED", 1, "update"))},
		{"the same item written again: the table is billed, no index write", rec, rec, false, true,
			[]capacity.Write{w("table", "q#1", 2, "write")}},
		{"a counter in a transaction: twice 1 unit, in no index", counter, with(counter, "n", n("4")), true, true,
			changed(w("table", "#ctr#q#state#1", 2, "write"))},
		{"a failed condition: the existing item's units, no index", rec, nil, false, false,
			[]capacity.Write{w("table", "q#1", 2, "failed")}},
		{"a failed condition on no item: one unit", nil, nil, false, false,
			[]capacity.Write{w("table", "q#1", 1, "failed")}},
		{"a delete: the deleted item, and its index entry", rec, nil, false, true,
			changed(w("table", "q#1", 2, "write"), w("by-status", "QUARANTINED", 1, "delete"))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := byStatus.Price(key(tc.want[0].Key), tc.old, tc.new, tc.transactional, tc.applied)
			for i := range tc.want {
				tc.want[i].Transactional = tc.transactional && tc.want[i].Target == "table"
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("got  %+v\nwant %+v", got, tc.want)
			}
		})
	}
	// A projection of ALL sizes the entry by the whole item (1,582 + 100
	// bytes: 2 units); KEYS_ONLY by the keys (9+17+30 + 100: 1 unit).
	all := capacity.Layout{Hash: "dlq_id", Indexes: []capacity.Index{{Name: "all", Hash: "status", Projection: "ALL"}, {Name: "keys", Hash: "source", Projection: "KEYS_ONLY"}}}
	got := all.Price(key("q#1"), nil, rec, false, true)
	want := changed(w("table", "q#1", 2, "write"), w("all", "QUARANTINED", 2, "put"), w("keys", "q", 1, "put"))
	if !slices.Equal(got, want) {
		t.Errorf("ALL and KEYS_ONLY: got %+v, want %+v", got, want)
	}
	for size, units := range map[int]int{0: 1, 1: 1, 1024: 1, 1025: 2, 4097: 5} {
		if got := capacity.WriteUnits(size); got != units {
			t.Errorf("WriteUnits(%d) = %d, want %d", size, got, units)
		}
	}
}

// The layout is the template's, as the embedded stack creates the table.
func TestLayoutIsTheTemplates(t *testing.T) {
	tpl, err := template.Open(template.Path(), template.Env{StackName: "cap", Region: "us-east-1", Account: "000000000000", Endpoint: "http://localhost:4566"})
	if err != nil {
		t.Fatal(err)
	}
	l, err := capacity.LayoutFromTemplate(tpl, "QuarantineTable")
	if err != nil {
		t.Fatal(err)
	}
	tbl, err := tpl.GetDynamoDBTableWithName("QuarantineTable")
	if err != nil {
		t.Fatal(err)
	}
	if l.Hash != "dlq_id" || len(l.Indexes) != len(tbl.GlobalSecondaryIndexes) || len(l.Indexes) == 0 {
		t.Fatalf("layout %+v of a table with %d indexes", l, len(tbl.GlobalSecondaryIndexes))
	}
	for i, g := range tbl.GlobalSecondaryIndexes {
		ix := l.Indexes[i]
		if ix.Name != g.IndexName || ix.Hash != g.KeySchema[0].AttributeName || ix.Projection != aws.ToString(g.Projection.ProjectionType) || !slices.Equal(ix.NonKey, g.Projection.NonKeyAttributes) {
			t.Errorf("index %d: %+v, template %+v", i, ix, g)
		}
	}
}

// The recorder sees the writes a DynamoDB client makes on the emulator,
// each on its partition keys with its units (record's sizes above).
func TestRecorderOnTheEmulator(t *testing.T) {
	ctx := context.Background()
	st := embedded.ForTest(t, embedded.Options{NoS3: true})
	table := embedded.RandomName("cap-rec")
	_, err := st.Clients.DynamoDB.CreateTable(ctx, &dynamodb.CreateTableInput{TableName: aws.String(table), BillingMode: ddbtypes.BillingModePayPerRequest,
		AttributeDefinitions: []ddbtypes.AttributeDefinition{{AttributeName: aws.String("dlq_id"), AttributeType: "S"}, {AttributeName: aws.String("status"), AttributeType: "S"}, {AttributeName: aws.String("first_seen"), AttributeType: "S"}},
		KeySchema:            []ddbtypes.KeySchemaElement{{AttributeName: aws.String("dlq_id"), KeyType: ddbtypes.KeyTypeHash}},
		GlobalSecondaryIndexes: []ddbtypes.GlobalSecondaryIndex{{IndexName: aws.String("by-status"),
			KeySchema:  []ddbtypes.KeySchemaElement{{AttributeName: aws.String("status"), KeyType: ddbtypes.KeyTypeHash}, {AttributeName: aws.String("first_seen"), KeyType: ddbtypes.KeyTypeRange}},
			Projection: &ddbtypes.Projection{ProjectionType: ddbtypes.ProjectionTypeInclude, NonKeyAttributes: []string{"source", "redrive_count"}}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	rec := capacity.NewRecorder(byStatus, table, st.Clients.DynamoDB)
	cfg := st.AWS.Copy()
	cfg.APIOptions = append(cfg.APIOptions, rec.APIOption)
	api := awsclients.New(cfg, awsclients.Options{Local: true}).DynamoDB
	put := func(item capacity.Item) error {
		_, err := api.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: item, ConditionExpression: aws.String("attribute_not_exists(dlq_id)")})
		return err
	}
	if err := put(record()); err != nil {
		t.Fatal(err)
	}
	var ccf *ddbtypes.ConditionalCheckFailedException
	if err := put(record()); !errors.As(err, &ccf) {
		t.Fatalf("second put: %v", err)
	}
	if _, err := api.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(table), Key: key("q#1"),
		UpdateExpression: aws.String("SET #s = :s"), ExpressionAttributeNames: map[string]string{"#s": "status"},
		ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{":s": s("REDRIVING")}}); err != nil {
		t.Fatal(err)
	}
	if _, err := api.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []ddbtypes.TransactWriteItem{
		{Update: &ddbtypes.Update{TableName: aws.String(table), Key: key("#ctr#q#state#1"), UpdateExpression: aws.String("ADD n :one"),
			ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{":one": n("1")}}},
		{ConditionCheck: &ddbtypes.ConditionCheck{TableName: aws.String(table), Key: key("q#1"), ConditionExpression: aws.String("attribute_exists(dlq_id)")}},
	}}); err != nil {
		t.Fatal(err)
	}
	// A put over an item (no create-only condition): priced on the item it
	// replaced (1,580 bytes with REDRIVING; PARKED makes 1,577).
	if _, err := api.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: with(record(), "status", s("PARKED"))}); err != nil {
		t.Fatal(err)
	}
	if _, err := api.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), Key: key("q#1")}); err != nil {
		t.Fatal(err) // a read: nothing recorded
	}
	if _, err := api.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(st.Names["QuarantineTable"]), Item: key("elsewhere")}); err != nil {
		t.Fatal(err) // another table: nothing recorded
	}
	if _, err := api.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{}); err == nil || !strings.Contains(err.Error(), "not priced") {
		t.Errorf("a BatchWriteItem passed unpriced: %v", err)
	}
	want := []capacity.Write{
		w("table", "q#1", 2, "write"), w("by-status", "QUARANTINED", 1, "put"), // the first arrival
		w("table", "q#1", 2, "failed"), // its condition failed: the existing item's units
		w("table", "q#1", 2, "write"), w("by-status", "QUARANTINED", 1, "delete"), w("by-status", "REDRIVING", 1, "put"),
		w("table", "#ctr#q#state#1", 2, "write"), // a new counter of 6+14 + 1+2 bytes, twice in a transaction
		w("table", "q#1", 4, "check"),            // the condition check: twice the record's 2
		w("table", "q#1", 2, "write"), w("by-status", "REDRIVING", 1, "delete"), w("by-status", "PARKED", 1, "put"),
	}
	want[0].Changed, want[3].Changed, want[6].Changed, want[8].Changed = true, true, true, true
	want[6].Transactional, want[7].Transactional = true, true
	if got := rec.Writes(0); !slices.Equal(got, want) {
		t.Errorf("recorded\n %+v\nwant\n %+v", got, want)
	}
}

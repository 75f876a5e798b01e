package template_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	dtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/dlqquarantine/dlqq/shared/adapter/dynamostore"
	"github.com/dlqquarantine/dlqq/shared/domain/ledger"
	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
)

// ledgerOwnedKeys are keys of every kind the ledger alone writes: a shard
// chain's head, a shard's counters' checkpoint, the digest chain's head and
// a counter shard (dynamostore's layout).
func ledgerOwnedKeys() []string {
	return []string{
		dynamostore.LedgerHeadKey("shard-1"),
		dynamostore.LedgerCountKey("shard-1"),
		dynamostore.LedgerDigestKey,
		dynamostore.CounterItemKey(quarantine.StateCounterKey("prod-source", quarantine.StatusParked, quarantine.ClassPoison, 3)),
		// The canary (issue 25): a change only the ledger writes, whose
		// arrival through the stream the next digest run checks.
		ledger.CanaryKey,
	}
}

// itemWrites are the item writes on one key, one per way to make one, each
// as the requests IAM authorizes it by. The batch and the transaction also
// carry a record's key, so that only the ledger's key can be what refuses
// them.
func itemWrites(tableName, k string) map[string][]request {
	table := aws.String(tableName)
	record := key("prod-source#0123abcd")
	d := func(op string, p any) []request { return describe("", env.Region, env.Account, "DynamoDB", op, p) }
	return map[string][]request{
		"PutItem":    d("PutItem", &dynamodb.PutItemInput{TableName: table, Item: key(k)}),
		"UpdateItem": d("UpdateItem", &dynamodb.UpdateItemInput{TableName: table, Key: key(k)}),
		"DeleteItem": d("DeleteItem", &dynamodb.DeleteItemInput{TableName: table, Key: key(k)}),
		"BatchWriteItem put": d("BatchWriteItem", &dynamodb.BatchWriteItemInput{RequestItems: map[string][]dtypes.WriteRequest{tableName: {
			{PutRequest: &dtypes.PutRequest{Item: record}}, {PutRequest: &dtypes.PutRequest{Item: key(k)}}}}}),
		"BatchWriteItem delete": d("BatchWriteItem", &dynamodb.BatchWriteItemInput{RequestItems: map[string][]dtypes.WriteRequest{tableName: {
			{PutRequest: &dtypes.PutRequest{Item: record}}, {DeleteRequest: &dtypes.DeleteRequest{Key: key(k)}}}}}),
		"TransactWriteItems put": d("TransactWriteItems", &dynamodb.TransactWriteItemsInput{TransactItems: []dtypes.TransactWriteItem{
			{Put: &dtypes.Put{TableName: table, Item: record}}, {Put: &dtypes.Put{TableName: table, Item: key(k)}}}}),
		"TransactWriteItems update": d("TransactWriteItems", &dynamodb.TransactWriteItemsInput{TransactItems: []dtypes.TransactWriteItem{
			{Put: &dtypes.Put{TableName: table, Item: record}}, {Update: &dtypes.Update{TableName: table, Key: key(k)}}}}),
		"TransactWriteItems delete": d("TransactWriteItems", &dynamodb.TransactWriteItemsInput{TransactItems: []dtypes.TransactWriteItem{
			{Put: &dtypes.Put{TableName: table, Item: record}}, {Delete: &dtypes.Delete{TableName: table, Key: key(k)}}}}),
	}
}

// denyAll checks that every item write on key k, alone or in a batch or a
// transaction with a record, is refused role by the explicit deny want.
func denyAll(t *testing.T, s *stack, role, tableName, k, want string) {
	t.Helper()
	for name, qs := range itemWrites(tableName, k) {
		denied := false
		for _, q := range qs {
			why := s.decide(role, q)
			if !strings.Contains(q.Context["dynamodb:leadingkeys"], k) {
				continue // the transaction's record item: judged by the caller
			}
			if why != want {
				t.Errorf("%s: %s on %s (%s): %q, want %q", role, name, k, q, why, want)
			}
			denied = true
		}
		if !denied {
			t.Fatalf("%s on %s: no request carries the key: %v", name, k, qs)
		}
	}
}

// Nothing but the ledger writes the ledger's state (issue 25): every role
// of the stack but the ledger's is refused every item write on a #led# or
// #ctr# key by one explicit Deny attached to each, so that no Allow anywhere (a
// grant added later, another policy of the role) gives it back; a batch
// or a transaction with one such key among others is refused with it. The
// writes the functions make on their own keys, and the ledger's on its
// state, are still granted (TestEveryCallIsGrantedByItsRole checks every
// recorded call).
func TestOnlyTheLedgerWritesItsState(t *testing.T) {
	s := openStack(t, nil)
	tableName := str(props(s.resources["IngestFunction"])["Environment"].(map[string]any)["Variables"].(map[string]any)["TABLE_NAME"])
	if tableName == "" {
		t.Fatal("the ingest function's environment has no TABLE_NAME")
	}
	var others []string
	for _, id := range s.of("AWS::IAM::Role") {
		if id != "LedgerRole" {
			others = append(others, id)
		}
	}
	for _, want := range []string{"IngestRole", "RedriveRole", "SweeperRole", "MetricsRole"} {
		if !slices.Contains(others, want) {
			t.Fatalf("the template has no %s (roles: %q)", want, others)
		}
	}
	for _, role := range others {
		for _, k := range ledgerOwnedKeys() {
			denyAll(t, s, role, tableName, k, "denied by NeverWriteTheLedgersStatePolicy/NeverWriteTheLedgersState")
		}
	}

	table := "arn:aws:dynamodb:" + env.Region + ":" + env.Account + ":table/" + tableName
	write := func(action, k string) request {
		return request{Action: action, Resource: table, Context: map[string]string{"aws:securetransport": "true", "dynamodb:leadingkeys": k}}
	}
	read := func(action, resource string, keys ...string) request {
		ctx := map[string]string{"aws:securetransport": "true"}
		if keys != nil {
			ctx["dynamodb:leadingkeys"] = strings.Join(keys, "\x00")
		}
		return request{Action: action, Resource: resource, Context: ctx}
	}
	counter := ledgerOwnedKeys()[3]
	index := table + "/index/" + indexName(s)
	for _, c := range []struct {
		role string
		q    request
	}{
		// Records and standing policies are the functions' to write.
		{"IngestRole", write("dynamodb:PutItem", "prod-source#0123abcd")},
		{"RedriveRole", write("dynamodb:PutItem", "prod-source#0123abcd")},
		{"RedriveRole", write("dynamodb:UpdateItem", "prod-source#0123abcd")},
		{"RedriveRole", write("dynamodb:PutItem", "#pol#prod-source#p1")},
		{"SweeperRole", write("dynamodb:PutItem", "prod-source#0123abcd")},
		// The ledger's keys are still read where they were.
		{"MetricsRole", read("dynamodb:BatchGetItem", table, counter)},
		{"MetricsRole", read("dynamodb:Query", index)},
		{"RedriveRole", read("dynamodb:BatchGetItem", table, counter)},
		// The ledger writes its state and the counters.
		{"LedgerRole", write("dynamodb:UpdateItem", dynamostore.LedgerHeadKey("shard-1"))},
		{"LedgerRole", write("dynamodb:UpdateItem", dynamostore.LedgerCountKey("shard-1"))},
		{"LedgerRole", write("dynamodb:UpdateItem", dynamostore.LedgerDigestKey)},
		{"LedgerRole", write("dynamodb:UpdateItem", counter)},
		{"LedgerRole", write("dynamodb:UpdateItem", ledger.CanaryKey)},
		{"LedgerRole", read("dynamodb:GetItem", table, ledger.CanaryKey)},
	} {
		if why := s.decide(c.role, c.q); why != "" {
			t.Errorf("%s: %s on %s (keys %q): %s", c.role, c.q.Action, c.q.Resource, c.q.Context["dynamodb:leadingkeys"], why)
		}
	}
}

// Standing policies are the redrive role's: every other function's role
// (ingest, sweeper, metrics) is refused every item write on a #pol# key by
// an explicit Deny, alone or in a batch or a transaction; the redrive role
// still writes them (TestEveryCallIsGrantedByItsRole checks its recorded
// calls) and the other roles still write records.
func TestOnlyRedriveWritesPolicies(t *testing.T) {
	s := openStack(t, nil)
	tableName := str(props(s.resources["IngestFunction"])["Environment"].(map[string]any)["Variables"].(map[string]any)["TABLE_NAME"])
	if tableName == "" {
		t.Fatal("the ingest function's environment has no TABLE_NAME")
	}
	const pol = "#pol#prod-source#p1"
	// Four-eyes approvals (#apr#) are the redrive role's too: a planted
	// approval would let a high-risk action pass verify.
	for _, key := range []string{pol, "#apr#prod-source#chg-4711"} {
		for _, role := range []string{"IngestRole", "SweeperRole", "MetricsRole"} {
			denyAll(t, s, role, tableName, key, "denied by OnlyRedriveWritesPoliciesPolicy/NeverWriteStandingPolicies")
		}
		for name, qs := range itemWrites(tableName, key) {
			for _, q := range qs {
				if why := s.decide("RedriveRole", q); strings.HasPrefix(why, "denied by") {
					t.Errorf("RedriveRole: %s on %s (%s): %q, want no explicit deny", name, key, q, why)
				}
			}
		}
	}
	table := "arn:aws:dynamodb:" + env.Region + ":" + env.Account + ":table/" + tableName
	for _, c := range []struct{ role, action, key string }{
		{"RedriveRole", "dynamodb:PutItem", pol},
		{"RedriveRole", "dynamodb:PutItem", "prod-source#0123abcd"},
		{"IngestRole", "dynamodb:PutItem", "prod-source#0123abcd"},
		{"SweeperRole", "dynamodb:PutItem", "prod-source#0123abcd"},
	} {
		q := request{Action: c.action, Resource: table, Context: map[string]string{"aws:securetransport": "true", "dynamodb:leadingkeys": c.key}}
		if why := s.decide(c.role, q); why != "" {
			t.Errorf("%s: %s on %s: %s", c.role, c.action, c.key, why)
		}
	}
}

// The source index's own items (issue 28): a source marker is ingest's
// alone (the redrive, sweeper and metrics roles are refused it by an
// explicit Deny), and the index's migration state is no function's (it is
// written by `dlqctl index backfill` with an operator's credentials): a
// planted state would switch the readers to the source index before the
// backfill and hide records from the listings.
func TestOnlyIngestWritesSourceMarkersAndNoFunctionTheIndexState(t *testing.T) {
	s := openStack(t, nil)
	tableName := str(props(s.resources["IngestFunction"])["Environment"].(map[string]any)["Variables"].(map[string]any)["TABLE_NAME"])
	if tableName == "" {
		t.Fatal("the ingest function's environment has no TABLE_NAME")
	}
	marker, state := "#src#prod-source", "#idx#"+dynamostore.IndexBySource
	for _, role := range []string{"RedriveRole", "SweeperRole", "MetricsRole"} {
		denyAll(t, s, role, tableName, marker, "denied by OnlyIngestWritesSourceMarkersPolicy/NeverWriteSourceMarkers")
	}
	for _, role := range []string{"IngestRole", "RedriveRole", "SweeperRole", "MetricsRole"} {
		denyAll(t, s, role, tableName, state, "denied by NoFunctionWritesTheIndexStatePolicy/NeverWriteTheIndexState")
	}
	table := "arn:aws:dynamodb:" + env.Region + ":" + env.Account + ":table/" + tableName
	q := request{Action: "dynamodb:PutItem", Resource: table, Context: map[string]string{"aws:securetransport": "true", "dynamodb:leadingkeys": marker}}
	if why := s.decide("IngestRole", q); why != "" {
		t.Errorf("IngestRole: PutItem on %s: %s", marker, why)
	}
	if why := s.decide("LedgerRole", q); why == "" {
		t.Errorf("LedgerRole: PutItem on %s allowed, want refused", marker)
	}
}

// The metrics function's marks (what each source's new holds and poison
// were last published from) are the metrics role's alone: a role that
// could move them ahead would keep the next holds from paging. Every other
// function role is refused every item write on a #mtr# key by an explicit
// Deny, alone or in a batch or a transaction; the metrics role may put
// its marks and no other item.
func TestOnlyMetricsWritesItsMarks(t *testing.T) {
	s := openStack(t, nil)
	tableName := str(props(s.resources["IngestFunction"])["Environment"].(map[string]any)["Variables"].(map[string]any)["TABLE_NAME"])
	if tableName == "" {
		t.Fatal("the ingest function's environment has no TABLE_NAME")
	}
	marks := dynamostore.MarksKey("prod-source")
	for _, id := range s.of("AWS::IAM::Role") {
		if id != "MetricsRole" {
			denyAll(t, s, id, tableName, marks, "denied by OnlyMetricsWritesItsMarksPolicy/NeverWriteTheMetricsMarks")
		}
	}
	table := "arn:aws:dynamodb:" + env.Region + ":" + env.Account + ":table/" + tableName
	put := func(k string, attrs ...string) request {
		return request{Action: "dynamodb:PutItem", Resource: table, Context: map[string]string{"aws:securetransport": "true",
			"dynamodb:leadingkeys": k, "dynamodb:attributes": strings.Join(attrs, "\x00")}}
	}
	if why := s.decide("MetricsRole", put(marks, dynamostore.MarksAttributes...)); why != "" {
		t.Errorf("MetricsRole: PutItem on %s: %s", marks, why)
	}
	// No other key, also none the other Denies leave alone.
	for _, k := range []string{"prod-source#0123abcd", "#pol#prod-source#p1", "#src#prod-source", ledgerOwnedKeys()[3], "#zzz#prod-source", "#mtr", "mtr#prod-source"} {
		if why := s.decide("MetricsRole", put(k, dynamostore.MarksAttributes...)); why == "" {
			t.Errorf("MetricsRole: PutItem on %s allowed, want refused", k)
		}
	}
	// No attribute but the marks': one that would put the item in a
	// listing (a status, an index key) is refused.
	for _, extra := range []string{"status", "status_key", "first_seen", "source"} {
		if why := s.decide("MetricsRole", put(marks, append([]string{extra}, dynamostore.MarksAttributes...)...)); why == "" {
			t.Errorf("MetricsRole: PutItem on %s with %s allowed, want refused", marks, extra)
		}
	}
	for _, op := range []string{"dynamodb:UpdateItem", "dynamodb:DeleteItem"} {
		q := put(marks)
		q.Action = op
		if why := s.decide("MetricsRole", q); why == "" {
			t.Errorf("MetricsRole: %s on %s allowed, want refused (it puts its marks whole)", op, marks)
		}
	}
}

// The sweeper's payload intents (#swp#<id>#<version>) make a later sweeper
// run delete claim-check objects: every role but the sweeper's is refused
// every item write on one by one explicit Deny, and the sweeper may delete
// no other item.
func TestOnlySweeperWritesPayloadIntents(t *testing.T) {
	s := openStack(t, nil)
	tableName := str(props(s.resources["IngestFunction"])["Environment"].(map[string]any)["Variables"].(map[string]any)["TABLE_NAME"])
	if tableName == "" {
		t.Fatal("the ingest function's environment has no TABLE_NAME")
	}
	intent := quarantine.PayloadIntentKey(quarantine.RecordID("prod-source", "e1"), 7)
	for _, id := range s.of("AWS::IAM::Role") {
		if id != "SweeperRole" {
			denyAll(t, s, id, tableName, intent, "denied by OnlySweeperWritesPayloadIntentsPolicy/NeverWriteThePayloadIntents")
		}
	}
	table := "arn:aws:dynamodb:" + env.Region + ":" + env.Account + ":table/" + tableName
	write := func(action, k string, attrs ...string) request {
		return request{Action: action, Resource: table, Context: map[string]string{"aws:securetransport": "true",
			"dynamodb:leadingkeys": k, "dynamodb:attributes": strings.Join(attrs, "\x00")}}
	}
	for _, action := range []string{"dynamodb:PutItem", "dynamodb:DeleteItem"} {
		if why := s.decide("SweeperRole", write(action, intent, dynamostore.PayloadIntentAttributes...)); why != "" {
			t.Errorf("SweeperRole: %s on %s: %s", action, intent, why)
		}
	}
	// It deletes nothing else: no record, counter, policy, marks or ledger item.
	for _, k := range []string{quarantine.RecordID("prod-source", "e1"), "#pol#prod-source#p1", "#src#prod-source", ledgerOwnedKeys()[3], dynamostore.MarksKey("prod-source"), "#swp", "swp#x"} {
		if why := s.decide("SweeperRole", write("dynamodb:DeleteItem", k)); why == "" {
			t.Errorf("SweeperRole: DeleteItem on %s allowed, want refused", k)
		}
	}
}

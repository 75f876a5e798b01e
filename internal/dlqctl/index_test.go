package dlqctl_test

import (
	"context"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/dlqquarantine/dlqq/internal/dlqctl"
	"github.com/dlqquarantine/dlqq/shared/adapter/dynamostore"
	"github.com/dlqquarantine/dlqq/shared/dev/storetest"
	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
)

// The move to the source index on a stack with records written before it
// (docs/operations.md, "Moving to the source index"): dlqctl index
// backfill gives them their status_key, and dlqctl verify accepts the
// backfill's writes (the version as it was, plus the key its fields
// derive) but names a status_key rewritten to hide a record from its
// source's listings.
func TestIndexBackfillPassesVerify(t *testing.T) {
	l := newLedgerFixture(t)
	ctx := context.Background()
	r := storetest.Record(t, storetest.UniqueID("pre"))
	r.Source = storetest.UniqueID("presrc") // a source with no marker yet
	r.DLQID = r.Source + "#" + r.IdempotencyKey
	if err := quarantine.SealRecord(r); err != nil {
		t.Fatal(err)
	}
	item, err := dynamostore.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	delete(item, dynamostore.IndexKeyAttr) // as written before the source index
	if _, err := l.st.Clients.DynamoDB.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(l.table), Item: item}); err != nil {
		t.Fatal(err)
	}
	l.create("new") // written with its status_key
	l.drain()
	l.digest()
	// The embedded stack's table moved to the source index when it was
	// made: a record without status_key is one its listings miss.
	out, errOut, code := l.run(false, "verify")
	if code != dlqctl.ExitMismatch || !strings.Contains(out, r.DLQID) || !strings.Contains(out, "no status_key") || !strings.Contains(out, "has no marker") {
		t.Fatalf("verify before the backfill (exit %d): %s%s", code, out, errOut)
	}

	out, errOut, code = l.run(false, "index", "backfill", "-o", "json")
	doc := jsonDoc(t, "index backfill", out)
	if code != 0 || field(doc, "complete") != true || field(doc, "updated") != float64(1) || field(doc, "index") != dynamostore.IndexBySource {
		t.Fatalf("index backfill (exit %d): %s%s", code, out, errOut)
	}
	out, errOut, code = l.run(false, "index", "backfill")
	if code != 0 || !strings.Contains(out, "0 given their index key") || !strings.Contains(out, "complete: listings read "+dynamostore.IndexBySource) {
		t.Fatalf("index backfill again (exit %d): %s%s", code, out, errOut)
	}
	l.drain()
	l.digest()
	if out, errOut, code := l.run(false, "verify"); code != 0 {
		t.Fatalf("verify after the backfill (exit %d): %s%s", code, out, errOut)
	}

	// Someone with table access moves the record out of its source's
	// listings: verify names it.
	if _, err := l.st.Clients.DynamoDB.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(l.table),
		Key:              map[string]ddbtypes.AttributeValue{dynamostore.KeyAttr: &ddbtypes.AttributeValueMemberS{Value: r.DLQID}},
		UpdateExpression: aws.String("SET #k = :k"), ExpressionAttributeNames: map[string]string{"#k": dynamostore.IndexKeyAttr},
		ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{":k": &ddbtypes.AttributeValueMemberS{Value: "elsewhere#QUARANTINED#00"}},
	}); err != nil {
		t.Fatal(err)
	}
	l.drain()
	l.digest()
	out, errOut, code = l.run(false, "verify")
	if code != dlqctl.ExitMismatch || !strings.Contains(out+errOut, "index key \"elsewhere#QUARANTINED#00\"") {
		t.Fatalf("verify after a status_key rewrite (exit %d): %s%s", code, out, errOut)
	}
}

package dynamostore_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/dlqquarantine/dlqq/shared/adapter/dynamostore"
	"github.com/dlqquarantine/dlqq/shared/domain/ledger"
)

// The baseline's scan: every ledgered item once, counters left out, the
// last page called with no resume key, and a scan resumed after a key
// goes on in the same order.
func TestScanLedgeredForTheBaseline(t *testing.T) {
	ctx := context.Background()
	table := stack.Names["QuarantineTable"]
	s := dynamostore.LedgerState{API: stack.Clients.DynamoDB, Table: table}
	tag := fmt.Sprintf("scan%d", time.Now().UnixNano())
	want := map[string]bool{}
	for i := range 5 {
		id := fmt.Sprintf("%s#k%d", tag, i)
		want[id] = true
		if _, err := stack.Clients.DynamoDB.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: map[string]types.AttributeValue{
			"dlq_id": &types.AttributeValueMemberS{Value: id}, "version": &types.AttributeValueMemberN{Value: "1"}}}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := stack.Clients.DynamoDB.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: map[string]types.AttributeValue{
		"dlq_id": &types.AttributeValueMemberS{Value: "#ctr#" + tag}, "n": &types.AttributeValueMemberN{Value: "1"}}}); err != nil {
		t.Fatal(err)
	}
	scan := func(after string) ([]string, int) {
		var keys []string
		pages, last := 0, "x"
		err := s.ScanLedgered(ctx, after, func(items []ledger.Item, resume string) error {
			pages++
			last = resume
			for _, it := range items {
				keys = append(keys, it.S("dlq_id"))
			}
			return nil
		})
		if err != nil || last != "" {
			t.Fatalf("scan: %v, last resume %q", err, last)
		}
		return keys, pages
	}
	all, pages := scan("")
	if pages < 1 {
		t.Fatal("no page")
	}
	for _, k := range all {
		if k == "#ctr#"+tag {
			t.Fatal("a counter item in the baseline scan")
		}
		delete(want, k)
	}
	if len(want) != 0 {
		t.Fatalf("not scanned: %v", want)
	}
	mine := slices.IndexFunc(all, func(k string) bool { return len(k) > len(tag) && k[:len(tag)] == tag })
	rest, _ := scan(all[mine])
	if !slices.Equal(rest, all[mine+1:]) {
		t.Fatalf("resumed after %s: %v, want %v", all[mine], rest, all[mine+1:])
	}
}

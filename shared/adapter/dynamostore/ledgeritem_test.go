package dynamostore_test

import (
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/dlqquarantine/dlqq/shared/adapter/dynamostore"
	"github.com/dlqquarantine/dlqq/shared/domain/ledger"
)

// The ledger's keys are pinned: existing items depend on them.
func TestLedgerLayoutIsStable(t *testing.T) {
	t.Parallel()
	if got := dynamostore.LedgerHeadKey("shardId-1"); got != "#led#head#shardId-1" {
		t.Errorf("head key %q", got)
	}
	if got := dynamostore.LedgerCountKey("shardId-1"); got != "#led#ctr#shardId-1" {
		t.Errorf("counters' checkpoint key %q", got)
	}
	if dynamostore.LedgerDigestKey != "#led#digest" {
		t.Errorf("digest key %q", dynamostore.LedgerDigestKey)
	}
	// What the ledger ledgers: records and policies, not counters nor its
	// own items.
	for key, want := range map[string]bool{"src#k": true, "#pol#src#p1": true, "#ctr#src#held#0": false, dynamostore.LedgerHeadKey("s"): false, dynamostore.LedgerDigestKey: false, "": false} {
		if got := ledger.Ledgered(key); got != want {
			t.Errorf("Ledgered(%q) = %v", key, got)
		}
		if dynamostore.IsRecordKey(key) && !ledger.Ledgered(key) {
			t.Errorf("record key %q not ledgered", key)
		}
	}
}

func TestLedgerItemFromAStreamImage(t *testing.T) {
	t.Parallel()
	img := map[string]events.DynamoDBAttributeValue{
		"dlq_id": events.NewStringAttribute("src#a"), "n": events.NewNumberAttribute("2"), "ss": events.NewStringSetAttribute([]string{"y", "x"}),
		"m": events.NewMapAttribute(map[string]events.DynamoDBAttributeValue{"b": events.NewBinaryAttribute([]byte{1}), "z": events.NewNullAttribute()}),
		"l": events.NewListAttribute([]events.DynamoDBAttributeValue{events.NewBooleanAttribute(true)}),
	}
	it, err := dynamostore.LedgerItemFromStream(img)
	if err != nil {
		t.Fatal(err)
	}
	c, _ := it.Canonical()
	want := `{"dlq_id":{"S":"src#a"},"l":{"L":[{"BOOL":true}]},"m":{"M":{"b":{"B":"AQ=="},"z":{"NULL":true}}},"n":{"N":"2"},"ss":{"SS":["x","y"]}}`
	if string(c) != want {
		t.Fatalf("canonical %s\nwant %s", c, want)
	}
	back, err := dynamostore.SDKItem(it)
	if err != nil {
		t.Fatal(err)
	}
	again, _ := dynamostore.LedgerItem(back)
	if c2, _ := again.Canonical(); string(c2) != want {
		t.Fatalf("round trip %s", c2)
	}
	if _, err := dynamostore.SDKItem(ledger.Item{"x": {}}); err == nil {
		t.Fatal("an empty value converted")
	}
}

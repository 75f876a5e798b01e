package storetest

import (
	"testing"

	"github.com/dlqquarantine/dlqq/shared/adapter/dynamostore"
	"github.com/dlqquarantine/dlqq/shared/domain/ledger"
	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
)

// LedgerItem is r as the ledger holds it: its DynamoDB item
// (dynamostore.Marshal) in the ledger's form (dynamostore.LedgerItem).
func LedgerItem(tb testing.TB, r *quarantine.Record) ledger.Item {
	tb.Helper()
	item, err := dynamostore.Marshal(r)
	if err != nil {
		tb.Fatal(err)
	}
	it, err := dynamostore.LedgerItem(item)
	if err != nil {
		tb.Fatal(err)
	}
	return it
}

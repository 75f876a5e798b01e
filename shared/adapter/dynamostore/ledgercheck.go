package dynamostore

import (
	"fmt"
	"reflect"

	"github.com/dlqquarantine/dlqq/shared/domain/ledger"
	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
)

// LedgerVersionCheck returns the ledger.Input.CheckVersion that Verify's
// callers (dlqctl verify, online and offline) pass: each ledgered version
// of a record is decoded and must be a transition of the version before
// it (quarantine.CheckTransition). Items that are not records (standing
// policies) are not checked here. The function it returns keeps the last
// record it decoded, since Verify calls it along each key's chain; it is
// for one Verify at a time.
func LedgerVersionCheck() func(prev, next ledger.Item) error {
	var lastItem ledger.Item
	var lastRec *quarantine.Record
	decode := func(it ledger.Item) (*quarantine.Record, error) {
		if it == nil {
			return nil, nil
		}
		if lastItem != nil && reflect.ValueOf(it).UnsafePointer() == reflect.ValueOf(lastItem).UnsafePointer() {
			return lastRec, nil
		}
		sdk, err := SDKItem(it)
		if err != nil {
			return nil, err
		}
		r, err := Unmarshal(sdk)
		if err != nil {
			return nil, err
		}
		return r, nil
	}
	return func(prev, next ledger.Item) error {
		if !IsRecordKey(next.S(KeyAttr)) {
			return nil
		}
		p, err := decode(prev)
		if err != nil {
			return fmt.Errorf("the version before it does not decode as a record: %w", err)
		}
		n, err := decode(next)
		if err != nil {
			return fmt.Errorf("it does not decode as a record: %w", err)
		}
		lastItem, lastRec = next, n
		return quarantine.CheckTransition(p, n)
	}
}

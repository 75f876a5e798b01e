package dynamostore

import (
	"fmt"

	"github.com/dlqquarantine/dlqq/shared/domain/ledger"
	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
)

// LedgerVersionCheck returns the ledger.Input.CheckVersion that Verify's
// callers (dlqctl verify, online and offline) pass: each ledgered version
// of a record is decoded and must be a transition of the version before
// it (quarantine.CheckTransition). Items that are not records (standing
// policies) are not checked here. It is safe for concurrent use.
func LedgerVersionCheck() func(prev, next ledger.Item) error {
	return func(prev, next ledger.Item) error {
		if !IsRecordKey(next.S(KeyAttr)) {
			return nil
		}
		var p *quarantine.Record
		if prev != nil {
			var err error
			if p, err = decodeLedgered(prev); err != nil {
				return fmt.Errorf("the version before it does not decode as a record: %w", err)
			}
		}
		n, err := decodeLedgered(next)
		if err != nil {
			return fmt.Errorf("it does not decode as a record: %w", err)
		}
		return quarantine.CheckTransition(p, n)
	}
}

func decodeLedgered(it ledger.Item) (*quarantine.Record, error) {
	sdk, err := SDKItem(it)
	if err != nil {
		return nil, err
	}
	return Unmarshal(sdk)
}

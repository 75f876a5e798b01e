package dynamostore

import (
	"fmt"

	"github.com/dlqquarantine/dlqq/shared/domain/ledger"
	"github.com/dlqquarantine/dlqq/shared/domain/policy"
	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
)

// LedgerVersionCheck returns the ledger.Input.CheckVersion that Verify's
// callers (dlqctl verify, online and offline) pass: each ledgered version
// of a record is decoded and must be a transition of the version before
// it (quarantine.CheckTransition). Each ledgered version of a standing
// policy (#pol# keys) is decoded as PolicyStore reads it, its seal checked,
// and must be a version shared/domain/policy can make of the one before it
// (checkPolicyTransition). Each ledgered approval (#apr# keys) must be a
// version shared/domain/approval makes of the one before it
// (approval.CheckTransition). Other items are not checked here. It is safe for
// concurrent use.
func LedgerVersionCheck() func(prev, next ledger.Item) error {
	return func(prev, next ledger.Item) error {
		if isPolicyKey(next.S(KeyAttr)) {
			return checkLedgeredPolicy(prev, next)
		}
		if isApprovalKey(next.S(KeyAttr)) {
			return checkLedgeredApproval(prev, next)
		}
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

func checkLedgeredPolicy(prev, next ledger.Item) error {
	var p *policy.Policy
	if prev != nil {
		var err error
		if p, err = decodeLedgeredPolicy(prev); err != nil {
			return fmt.Errorf("the version before it is not a sealed policy: %w", err)
		}
	}
	n, err := decodeLedgeredPolicy(next)
	if err != nil {
		return fmt.Errorf("it is not a sealed policy: %w", err)
	}
	return checkPolicyTransition(p, n)
}

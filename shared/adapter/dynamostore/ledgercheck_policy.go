package dynamostore

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"

	"github.com/dlqquarantine/dlqq/shared/domain/ledger"
	"github.com/dlqquarantine/dlqq/shared/domain/policy"
)

// isPolicyKey reports whether id is a standing policy's key.
func isPolicyKey(id string) bool { return strings.HasPrefix(id, policyKeyPrefix) }

// decodeLedgeredPolicy decodes a ledgered policy item as PolicyStore reads
// it (its seal checked) and checks that the item's key and version are the
// policy's.
func decodeLedgeredPolicy(it ledger.Item) (*policy.Policy, error) {
	sdk, err := SDKItem(it)
	if err != nil {
		return nil, err
	}
	p, err := decodePolicy(sdk)
	if err != nil {
		return nil, err
	}
	if k := it.S(KeyAttr); k != policyKey(p.Source, p.ID) {
		return nil, fmt.Errorf("its key %s is not the key of the policy it holds (source %q, id %q)", k, p.Source, p.ID)
	}
	if v, ok := it.Int(VersionAttr); !ok || v != p.Version {
		return nil, fmt.Errorf("its version attribute (%d) is not the policy's version %d", v, p.Version)
	}
	return p, nil
}

// policyTransition is the action each state change of a policy records in
// its history (policy.Suspend, Resume, Revoke; the breaker suspends).
var policyTransition = map[[2]string]string{
	{policy.StateActive, policy.StateSuspended}:  "suspended",
	{policy.StateSuspended, policy.StateActive}:  "resumed",
	{policy.StateActive, policy.StateRevoked}:    "revoked",
	{policy.StateSuspended, policy.StateRevoked}: "revoked",
}

// checkPolicyTransition checks that next is a version shared/domain/policy
// can make of prev (nil: next is the first version the ledger saw, whose
// seal alone is checked): the version after it, chained to its seal, with
// its history and one entry more, id, source, creator and creation time
// unchanged, a state change of the state machine (active ↔ suspended, →
// revoked terminal) recorded by the matching history action, and no
// setting changed (only Resume moves the breaker's baselines, only Suspend
// and Resume the suspended reason).
func checkPolicyTransition(prev, next *policy.Policy) error {
	switch next.State {
	case policy.StateActive, policy.StateSuspended, policy.StateRevoked:
	default:
		return fmt.Errorf("policy state %q is not a state of a policy", next.State)
	}
	if prev == nil {
		return nil
	}
	var p []string
	if next.ID != prev.ID {
		p = append(p, fmt.Sprintf("id changed from %s to %s", prev.ID, next.ID))
	}
	if next.Source != prev.Source {
		p = append(p, fmt.Sprintf("source changed from %q to %q", prev.Source, next.Source))
	}
	if next.CreatedBy != prev.CreatedBy {
		p = append(p, "created_by changed")
	}
	if !next.CreatedAt.Equal(prev.CreatedAt.Time) {
		p = append(p, "created_at changed")
	}
	if next.Version != prev.Version+1 {
		p = append(p, fmt.Sprintf("version %d does not follow version %d", next.Version, prev.Version))
	}
	if next.PrevSeal != prev.Seal {
		p = append(p, "prev_seal is not the seal of the version before it")
	}
	if len(next.History) != len(prev.History)+1 || !reflect.DeepEqual(next.History[:len(prev.History)], prev.History) {
		p = append(p, "its history is not the history before it and one entry more")
	}
	if len(p) > 0 {
		return &policy.Error{Problems: p}
	}
	action := next.History[len(next.History)-1].Action
	if prev.State == policy.StateRevoked {
		return fmt.Errorf("a revoked policy changed (%s → %s, %q): revoked is final", prev.State, next.State, action)
	}
	if want, ok := policyTransition[[2]string{prev.State, next.State}]; !ok || want != action {
		return fmt.Errorf("state %s → %s recorded as %q is not a change a policy can make", prev.State, next.State, action)
	}
	if action != "resumed" && (next.BaselineSent != prev.BaselineSent || next.BaselineCameBack != prev.BaselineCameBack) {
		return fmt.Errorf("the breaker's baseline moved on %q (only a resume sets it)", action)
	}
	if action == "revoked" && next.SuspendedReason != prev.SuspendedReason {
		return errors.New("the suspended reason changed on a revoke")
	}
	a, err := policySettings(prev)
	if err != nil {
		return err
	}
	b, err := policySettings(next)
	if err != nil {
		return err
	}
	if a != b {
		return fmt.Errorf("its settings changed on %q (a policy's settings never change)", action)
	}
	return nil
}

// policySettings is p's canonical JSON without what a change may move.
func policySettings(p *policy.Policy) (string, error) {
	c := *p
	c.State, c.SuspendedReason, c.BaselineSent, c.BaselineCameBack = "", "", 0, 0
	c.History, c.Version, c.Seal, c.PrevSeal = nil, 0, "", ""
	raw, err := json.Marshal(&c)
	return string(raw), err
}

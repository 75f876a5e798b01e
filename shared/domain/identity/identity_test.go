package identity_test

import (
	"strings"
	"testing"

	"github.com/dlqquarantine/dlqq/shared/domain/identity"
)

const acct = "123456789012"

func must(t *testing.T, arn, userID string) identity.Principal {
	t.Helper()
	p, err := identity.FromIAM(arn, acct, userID, "ASIAEXAMPLE")
	if err != nil {
		t.Fatalf("FromIAM(%s): %v", arn, err)
	}
	return p
}

func TestFromIAMParsesEveryKind(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ arn, kind, name, session string }{
		{"arn:aws:iam::" + acct + ":user/ops/Alice", identity.KindUser, "Alice", ""},
		{"arn:aws:sts::" + acct + ":assumed-role/Ops/alice@example.com", identity.KindAssumedRole, "Ops", "alice@example.com"},
		{"arn:aws-us-gov:sts::" + acct + ":assumed-role/Ops/bob", identity.KindAssumedRole, "Ops", "bob"},
		{"arn:aws:iam::" + acct + ":root", identity.KindRoot, "", ""},
		{"arn:aws:sts::" + acct + ":federated-user/carol", identity.KindFederatedUser, "carol", ""},
	} {
		p := must(t, tc.arn, "AIDA")
		if p.Kind != tc.kind || p.Name != tc.name || p.Session != tc.session || p.Actor() != tc.arn || !identity.Verified(p.Actor()) {
			t.Errorf("%s: got %+v", tc.arn, p)
		}
	}
}

func TestFromIAMRefusesWhatIsNotAPrincipalOfTheAccount(t *testing.T) {
	t.Parallel()
	for _, arn := range []string{
		"", "alice", "arn:aws:iam::999999999999:user/alice", "arn:aws:s3:::bucket", "arn:aws:iam:us-east-1:" + acct + ":user/a",
		"arn:aws:sts::" + acct + ":assumed-role/Ops", "arn:aws:iam::" + acct + ":role/Ops", "arn:aws:iam::" + acct + ":user/a b",
		"arn:aws:iam::" + acct + ":user/" + strings.Repeat("p/", 120) + "a",
	} {
		if _, err := identity.FromIAM(arn, acct, "AIDA", ""); err == nil {
			t.Errorf("FromIAM(%q) accepted", arn)
		}
	}
}

func TestSameDefinesOnePersonPerUserTrustedSessionAndOtherRole(t *testing.T) {
	t.Parallel()
	rules := identity.Rules{TrustedSessionRoles: []string{"AWSReservedSSO_Ops_abc", "AWSReservedSSO_Admin_def"}}
	alice := must(t, "arn:aws:iam::"+acct+":user/alice", "AIDAALICE")
	aliceUpper := must(t, "arn:aws:iam::"+acct+":user/other/ALICE", "AIDAALICE2")
	bob := must(t, "arn:aws:iam::"+acct+":user/bob", "AIDABOB")
	ssoAlice := must(t, "arn:aws:sts::"+acct+":assumed-role/AWSReservedSSO_Ops_abc/alice", "AROA1:alice")
	ssoAliceAdmin := must(t, "arn:aws:sts::"+acct+":assumed-role/AWSReservedSSO_Admin_def/alice", "AROA2:alice")
	ssoBob := must(t, "arn:aws:sts::"+acct+":assumed-role/AWSReservedSSO_Ops_abc/bob", "AROA1:bob")
	opsX := must(t, "arn:aws:sts::"+acct+":assumed-role/Ops/x", "AROA3:x")
	opsY := must(t, "arn:aws:sts::"+acct+":assumed-role/Ops/y", "AROA3:y")
	other := must(t, "arn:aws:sts::"+acct+":assumed-role/Other/x", "AROA4:x")
	root := must(t, "arn:aws:iam::"+acct+":root", acct)
	fed := must(t, "arn:aws:sts::"+acct+":federated-user/dave", acct+":dave")
	for _, tc := range []struct {
		name string
		a, b identity.Principal
		same bool
	}{
		{"two users", alice, bob, false},
		{"a user's name in any case", alice, aliceUpper, true},
		{"two sessions of a trusted role", ssoAlice, ssoBob, false},
		{"one person in two trusted roles", ssoAlice, ssoAliceAdmin, true},
		{"a user and a trusted session of the same name", alice, ssoAlice, true},
		{"two sessions of another role", opsX, opsY, true},
		{"two other roles", opsX, other, false},
		{"root and root", root, root, true},
		{"a federated user and anyone", fed, bob, true},
	} {
		if got := rules.Same(tc.a, tc.b); got != tc.same {
			t.Errorf("%s: Same = %v, want %v", tc.name, got, tc.same)
		}
	}
	// Without the trusted roles, every session of the SSO role is one
	// principal: two people sharing it cannot approve each other.
	if !(identity.Rules{}).Same(ssoAlice, ssoBob) {
		t.Error("sessions of an untrusted role count as different principals")
	}
}

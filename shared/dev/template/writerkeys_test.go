package template_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
)

// writer is one writing function's key, as the template resolves it.
type writer struct{ role, fn, key, arn, roleARN string }

func writers() []writer {
	var out []writer
	for _, r := range []string{"Ingest", "Redrive", "Sweeper"} {
		label := strings.ToLower(r)
		out = append(out, writer{role: r + "Role", fn: r + "Function", key: r + "WriterKey",
			arn:     "arn:aws:kms:eu-west-1:111122223333:alias/prod-writer-" + label,
			roleARN: "arn:aws:iam::111122223333:role/prod-" + r + "Role"})
	}
	return out
}

// keyEffect evaluates a key's policy for a principal of the account:
// "deny", "allow" or "".
func keyEffect(t *testing.T, s *stack, keyARN, principal, action string) string {
	t.Helper()
	q := request{Action: action, Resource: keyARN, Context: map[string]string{"aws:principalarn": principal, "aws:principalaccount": env.Account, "aws:securetransport": "true"}}
	sts := s.resourcePolicies(keyARN)
	if len(sts) == 0 {
		t.Fatalf("no key policy for %s", keyARN)
	}
	return effectOf(t, sts, q, principal)
}

// The writer keys (issue 25): one HMAC_256 key per writing role, retained,
// aliased, an output each, the function's WRITER_KEY_ID; only its role may
// GenerateMac with it (a Deny for every other principal, the other
// writers' roles included), the account's principals VerifyMac.
func TestWriterKeys(t *testing.T) {
	tpl := open(t)
	s := openStack(t, nil)
	ws := writers()
	for _, w := range ws {
		k := lookup(t, tpl.GetKMSKeyWithName, w.key)
		if aws.ToString(k.KeySpec) != "HMAC_256" || aws.ToString(k.KeyUsage) != "GENERATE_VERIFY_MAC" || aws.ToBool(k.EnableKeyRotation) {
			t.Errorf("%s: spec %v usage %v rotation %v", w.key, aws.ToString(k.KeySpec), aws.ToString(k.KeyUsage), aws.ToBool(k.EnableKeyRotation))
		}
		if m := meta(t, tpl, w.key); !m.keptOnDelete() || m.UpdateReplacePolicy != "Retain" {
			t.Errorf("%s %s / %s: its proofs must stay verifiable", w.key, m.DeletionPolicy, m.UpdateReplacePolicy)
		}
		if o, ok := tpl.Outputs[w.key+"Arn"]; !ok || fmt.Sprint(o.Value) != w.arn {
			t.Errorf("output %sArn: %v, want %s", w.key, o.Value, w.arn)
		}
		fn := lookup(t, tpl.GetServerlessFunctionWithName, w.fn)
		if got := fn.Environment.Variables["WRITER_KEY_ID"]; got != w.arn {
			t.Errorf("%s WRITER_KEY_ID = %v, want %s", w.fn, got, w.arn)
		}
		if m := meta(t, tpl, w.fn); !slices.Contains(m.DependsOn, w.key[:len(w.key)-len("Key")]+"MacPolicy") {
			t.Errorf("%s DependsOn %v: its first invocation may find no kms:GenerateMac grant", w.fn, m.DependsOn)
		}

		// The key policy.
		others := []string{"arn:aws:iam::111122223333:root", "arn:aws:iam::111122223333:user/alice", "arn:aws:iam::111122223333:role/Admin",
			ledgerRoleARN, "arn:aws:iam::111122223333:role/prod-MetricsRole", w.roleARN + "-copy"}
		for _, o := range ws {
			if o != w {
				others = append(others, o.roleARN)
			}
		}
		for _, p := range others {
			if got := keyEffect(t, s, w.arn, p, "kms:GenerateMac"); got != "deny" {
				t.Errorf("%s: kms:GenerateMac by %s: key policy %q, want an explicit deny", w.key, p, got)
			}
		}
		if got := keyEffect(t, s, w.arn, w.roleARN, "kms:GenerateMac"); got != "allow" {
			t.Errorf("%s: kms:GenerateMac by its role: key policy %q", w.key, got)
		}
		for _, a := range []string{"kms:VerifyMac", "kms:DescribeKey"} {
			if got := keyEffect(t, s, w.arn, "arn:aws:iam::111122223333:user/alice", a); got != "allow" {
				t.Errorf("%s: %s by an auditor: key policy %q, want allow", w.key, a, got)
			}
		}
		for _, a := range []string{"kms:PutKeyPolicy", "kms:ScheduleKeyDeletion", "kms:DescribeKey"} {
			if got := keyEffect(t, s, w.arn, "arn:aws:iam::111122223333:root", a); got != "allow" {
				t.Errorf("%s: %s by the account: %q", w.key, a, got)
			}
		}

		// The IAM side: the function may MAC with its own key only.
		mac := func(fn, keyARN string) request {
			return request{Function: fn, Op: "GenerateMac", Action: "kms:GenerateMac", Resource: keyARN, Context: map[string]string{"aws:securetransport": "true"}}
		}
		if found := s.check(w.fn, []request{mac(w.fn, w.arn)}); len(found) > 0 {
			t.Errorf("%s cannot MAC with its own key: %q", w.fn, found)
		}
		for _, o := range ws {
			if o == w {
				continue
			}
			wantFinding(t, s.check(w.fn, []request{mac(w.fn, o.arn)}), w.fn+" (role "+w.role+"): kms:GenerateMac on "+o.arn, "")
			// Even a role granted every KMS action on every key.
			c := s.clone()
			st := stmt(t, c, w.role, "UseTheKey")
			st["Resource"], st["Action"] = []any{"*"}, []any{"kms:*"}
			wantFinding(t, c.check(w.fn, []request{mac(w.fn, o.arn)}), w.fn+" (role "+w.role+"): kms:GenerateMac on "+o.arn, "denied by "+o.key+"/OnlyThe"+strings.TrimSuffix(o.role, "Role")+"RoleGenerates")
		}
		// The key policy delegates the role's MACs to its IAM policy.
		c := s.clone()
		delete(c.resources, w.key[:len(w.key)-len("Key")]+"MacPolicy")
		wantFinding(t, c.check(w.fn, []request{mac(w.fn, w.arn)}), w.fn+" (role "+w.role+"): kms:GenerateMac on "+w.arn, "no statement")
	}
	aliases := map[string]bool{}
	for _, a := range tpl.GetAllKMSAliasResources() {
		aliases[a.AliasName] = true
	}
	for _, w := range ws {
		if name := w.arn[strings.Index(w.arn, "alias/"):]; !aliases[name] {
			t.Errorf("no %s for %s", name, w.key)
		}
	}
}

// Auditors verify writer proofs; operators do not. Neither may MAC with a
// writer key, change its policy, grant it, disable it or delete it, even
// when another policy of theirs allows it.
func TestWriterKeysInOperatorAndAuditorPolicies(t *testing.T) {
	s := openStack(t, nil)
	for _, w := range writers() {
		q := func(action string) request { return request{Action: action, Resource: w.arn} }
		for _, c := range []struct {
			policy, action, want string
		}{
			{"AuditorPolicy", "kms:VerifyMac", "allow"},
			{"AuditorPolicy", "kms:DescribeKey", "allow"},
			{"OperatorPolicy", "kms:VerifyMac", ""},
		} {
			if got := managedEffect(t, s, c.policy, q(c.action)); got != c.want {
				t.Errorf("%s: %s on %s gives %q, want %q", c.policy, c.action, w.key, got, c.want)
			}
		}
		for _, policy := range []string{"OperatorPolicy", "AuditorPolicy"} {
			for _, a := range []string{"kms:GenerateMac", "kms:PutKeyPolicy", "kms:CreateGrant", "kms:DisableKey", "kms:ScheduleKeyDeletion"} {
				if got := managedEffect(t, s, policy, q(a)); got != "deny" {
					t.Errorf("%s: %s on %s gives %q, want an explicit deny", policy, a, w.key, got)
				}
			}
		}
	}
}

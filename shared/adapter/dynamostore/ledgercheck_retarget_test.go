package dynamostore

import (
	"strings"
	"testing"
	"time"

	"github.com/dlqquarantine/dlqq/shared/domain/approval"
	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
)

// retargetPlan is an approved redrive of id into target.
func retargetPlan(id, target string) string {
	return `{"action":"redrive","batch_size":50,"ids":["` + id + `"],"max_messages":1,"source":"orders","target":"` + target + `"}`
}

// A claim that names a target (a redrive to another queue) is a high-risk
// action of its own: verify names one without an approval, under an
// approval that does not cover retarget, or under one whose plan replays
// into another queue; the approved one passes.
func TestApprovalCheckNamesARetargetedClaimWithoutItsApproval(t *testing.T) {
	t.Parallel()
	claim := func(w *feWorld, key, approvalID, target string) {
		r := w.newRecord(feSource, key)
		w.step(r.Claim(quarantine.WithTarget(w.as(w.alice, approvalID), target), at(2), time.Minute))
	}
	for _, c := range []struct {
		name  string
		want  string
		build func(w *feWorld)
	}{
		{"approved", "", func(w *feWorld) {
			a := w.approve(w.ask("apr-rt-0001", feSource, "redrive", retargetPlan("orders#k", "orders-v2"), quarantine.RiskRetarget), 1)
			claim(w, "k", a.ID, "orders-v2")
			w.executed(a, 3)
		}},
		{"no approval", "claimed a record for another queue without an approval", func(w *feWorld) {
			claim(w, "k", "", "orders-v2")
		}},
		{"an approval of a large run only", "covers large, not retarget", func(w *feWorld) {
			a := w.approve(w.ask("apr-rt-0002", feSource, "redrive", `{"action":"redrive","batch_size":50,"max_messages":5,"source":"orders"}`, quarantine.RiskLarge), 1)
			claim(w, "k", a.ID, "orders-v2")
		}},
		{"another target than approved", `plan replays into "orders-v2", the claim into "payments"`, func(w *feWorld) {
			a := w.approve(w.ask("apr-rt-0003", feSource, "redrive", retargetPlan("orders#k", "orders-v2"), quarantine.RiskRetarget), 1)
			claim(w, "k", a.ID, "payments")
		}},
		{"a target approved by its own requester", "approved by its own requester", func(w *feWorld) {
			a := w.ask("apr-rt-0004", feSource, "redrive", retargetPlan("orders#k", "orders-v2"), quarantine.RiskRetarget)
			w.forge(a, func(n *approval.Approval) {
				d := quarantine.At(at(1))
				n.State, n.DecidedBy, n.DecidedAt = approval.StateApproved, &w.alice, &d
			})
			claim(w, "k", a.ID, "orders-v2")
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			w := newFEWorld(t)
			c.build(w)
			problems, _ := w.check()
			if c.want == "" {
				if len(problems) != 0 {
					t.Fatalf("problems: %v", problems)
				}
				return
			}
			found := false
			for _, p := range problems {
				found = found || strings.Contains(p.Detail, c.want) && strings.Contains(p.Subject, "orders#k")
			}
			if !found {
				t.Fatalf("no problem saying %q on orders#k: %v", c.want, problems)
			}
		})
	}
}

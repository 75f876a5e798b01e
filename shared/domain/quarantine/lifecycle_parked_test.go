package quarantine_test

import (
	"testing"
	"time"

	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
)

// An operator-approved replay of a PARKED poison record whose claim is
// given back (send failed, deferred, held by the gate, unsendable, or its
// outcome unknown) goes back to PARKED under its former cap: it never
// becomes a QUARANTINED record that the next unapproved run replays.
func TestGivenBackParkedClaimStaysParked(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	for name, giveBack := range map[string]func(r *quarantine.Record) (*quarantine.Record, error){
		"release": func(r *quarantine.Record) (*quarantine.Record, error) {
			return r.Release("ops", "send failed after retries: InternalError", now, nil)
		},
		"held by the gate": func(r *quarantine.Record) (*quarantine.Record, error) {
			c := quarantine.Classification{Class: quarantine.ClassValidation, Stage: "gate", Reason: "schema /x required", Signature: "gate|schema /x required|"}
			return r.Release("ops", "held: schema /x required", now, &c)
		},
		"unsendable": func(r *quarantine.Record) (*quarantine.Record, error) {
			return r.ParkUnsendable("ops", "the message exceeds the SQS size limit", now)
		},
		"unknown": func(r *quarantine.Record) (*quarantine.Record, error) {
			return r.SendUnknown("ops", "deadline", r.RedriveCount, now)
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			r := sealedRecord(t, "pk", validBody, now)
			r.RedriveCount, r.RedriveCap, r.Status, r.FailureClass = 3, 3, quarantine.StatusParked, quarantine.ClassPoison
			if err := quarantine.SealRecord(r); err != nil {
				t.Fatal(err)
			}
			claimed, err := r.ClaimParked("ops", now, time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			back, err := giveBack(claimed)
			if err != nil {
				t.Fatal(err)
			}
			if back.Status != quarantine.StatusParked || back.FailureClass != quarantine.ClassPoison {
				t.Fatalf("given back as %s %s: the next unapproved run would replay it", back.Status, back.FailureClass)
			}
			if name != "unknown" && (back.RedriveCap != 3 || back.RedriveCount != 3) {
				t.Fatalf("count %d cap %d, want 3 of 3", back.RedriveCount, back.RedriveCap)
			}
			if name == "unknown" && back.RedriveCount != 4 {
				t.Fatalf("a possibly sent round must count: %d", back.RedriveCount)
			}
			if _, err := back.Claim("policy:p1", now, time.Minute); err == nil {
				t.Fatal("an unapproved claim took the record")
			}
		})
	}
}

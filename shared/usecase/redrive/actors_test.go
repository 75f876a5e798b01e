package redrive_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
	"github.com/dlqquarantine/dlqq/shared/usecase/redrive"
)

// No outside request may act under a name the system uses for itself: a
// replay sent as "ingest" would come back looking like a duplicate
// delivery, and be settled although it failed.
func TestReservedRequesterIsRefused(t *testing.T) {
	t.Parallel()
	reserved := []string{
		quarantine.ActorIngest, quarantine.ActorSettle, quarantine.ActorSweeper, quarantine.ActorBreaker,
		redrive.ActorBreaker, "policy:p1", "schedule:settle", "schedule:anything",
		"Ingest", " ingest ", "INGEST\t", "Settler", " SWEEPER", "Breaker ", "POLICY:p1", " Policy:x", "Schedule:settle",
	}
	bodies := map[string]string{
		"redrive": `{"source":"s","requested_by":%q}`,
		"settle":  `{"action":"settle","source":"s","requested_by":%q}`,
		"correct": `{"action":"correct","source":"s","ids":["s#k"],"payload":"{}","reason":"r","requested_by":%q}`,
		"park":    `{"action":"park","source":"s","ids":["s#k"],"reason":"r","requested_by":%q}`,
		"unpark":  `{"action":"unpark","source":"s","ids":["s#k"],"reason":"r","requested_by":%q}`,
		"read":    `{"action":"read","source":"s","ids":["s#k"],"requested_by":%q}`,
		// A standing policy's changes: the breaker's suspension is its own,
		// and no request revokes or resumes a policy in its name.
		"policy_add":    `{"action":"policy_add","source":"s","policy":{"min_age_seconds":60,"max_per_run":1,"expires_at":"2030-01-01T00:00:00Z"},"requested_by":%q}`,
		"policy_revoke": `{"action":"policy_revoke","source":"s","policy_id":"pol-0123456789ab","reason":"r","requested_by":%q}`,
		"policy_resume": `{"action":"policy_resume","source":"s","policy_id":"pol-0123456789ab","reason":"r","requested_by":%q}`,
	}
	for _, name := range reserved {
		for action, body := range bodies {
			if action == "settle" && quarantine.ScheduleActor(name) {
				continue // what the settle schedule sends: no requester is recorded
			}
			raw := strings.Replace(body, "%q", quote(name), 1)
			var re *redrive.RequestError
			if _, err := redrive.ParseRequest([]byte(raw)); !errors.As(err, &re) || !strings.Contains(err.Error(), "requested_by") {
				t.Errorf("%s as %q: %v, want refused", action, name, err)
			}
		}
	}
	// Through Run as well (dlqctl and the policies build requests in code).
	e := newEnv(t, false)
	svc := e.service(nil, nil, redrive.Config{})
	var re *redrive.RequestError
	if _, err := svc.Run(context.Background(), redrive.Request{Source: e.src.Name, RequestedBy: quarantine.ActorIngest}); !errors.As(err, &re) {
		t.Fatalf("Run as ingest: %v, want refused", err)
	}
	// Too long a name is refused, not clipped silently.
	if _, err := redrive.ParseRequest([]byte(`{"source":"s","requested_by":"` + strings.Repeat("a", quarantine.MaxActorBytes+1) + `"}`)); !errors.As(err, &re) {
		t.Fatalf("a %d-byte requested_by: %v, want refused", quarantine.MaxActorBytes+1, err)
	}
	// The schedules' own requests still pass, and so do people.
	for _, raw := range []string{
		`{"action":"settle","source":"s","requested_by":"schedule:settle"}`,
		`{"action":"policies","source":"s","requested_by":"schedule:policies"}`,
		`{"source":"s","requested_by":"alice"}`,
		`{"source":"s","requested_by":"ingest-team"}`,
	} {
		if _, err := redrive.ParseRequest([]byte(raw)); err != nil {
			t.Errorf("%s: %v", raw, err)
		}
	}
}

func quote(s string) string {
	raw, _ := json.Marshal(s)
	return string(raw)
}

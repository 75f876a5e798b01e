package redrive_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/dlqquarantine/dlqq/shared/domain/policy"
	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
	"github.com/dlqquarantine/dlqq/shared/usecase/redrive"
)

// loggedKinds are the error_kind values of the log lines in logs.
func loggedKinds(t *testing.T, logs string) []string {
	t.Helper()
	var kinds []string
	for _, line := range strings.Split(strings.TrimSpace(logs), "\n") {
		var l map[string]any
		if err := json.Unmarshal([]byte(line), &l); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if k, ok := l["error_kind"].(string); ok && k != "" {
			kinds = append(kinds, k)
		}
	}
	return kinds
}

// The function's log line of a refusal says which refusal it was: a park
// of a parked record wrong_state, of an archived stub archived, a
// correction the schema refuses schema_refused; never unavailable.
func TestRefusalsLogTheirOwnErrorKind(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e, ids := seeded(t, 2)
	svc, logs := e.loggedService(nil)
	if _, err := svc.LambdaHandler(ctx, operatorRequest(e, "park", ids[0], "look")); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.LambdaHandler(ctx, operatorRequest(e, "park", ids[0], "again")); err == nil {
		t.Fatal("a park of a parked record was not refused")
	}
	e.change(t, ids[0], func(r *quarantine.Record) (*quarantine.Record, error) {
		return r.ArchiveStub("sweeper", quarantine.ArchiveRef{Bucket: "b", Key: "k", Seal: r.Seal, RetainUntil: r.StatusSince}, e.clock.Now())
	})
	if _, err := viaApproval(ctx, svc, operatorRequest(e, "unpark", ids[0], "again")); err == nil {
		t.Fatal("an unpark of an archived stub was not refused")
	}
	id, bad := e.malformed(t, 7, "NDC?12345")
	if _, err := viaApproval(ctx, svc, []byte(correctRequest(e, id, "typo", strings.Replace(bad, "NDC?12345", "12-3", 1)))); err == nil {
		t.Fatal("a correction the schema refuses was accepted")
	}
	got := strings.Join(loggedKinds(t, logs.String()), ",")
	if got != "wrong_state,archived,schema_refused" {
		t.Fatalf("logged error kinds %q, want wrong_state,archived,schema_refused:\n%s", got, logs)
	}
}

// The races an operator or policy action can lose, and a policy or record
// not found, are refusals with their own kinds, never unavailable; a park
// of an id that names no record logs not_found, as a correction's does.
func TestLostRacesAndMissingThingsAreRefusals(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		err  error
		want string
	}{
		{fmt.Errorf("park: %w", redrive.ErrRecordChanged), "conflict"},
		{redrive.ErrPolicyChanged, "conflict"},
		{fmt.Errorf("revoke: %w", policy.ErrConflict), "conflict"},
		{fmt.Errorf("revoke: %w", policy.ErrNotFound), "not_found"},
		{quarantine.ErrExists, "exists"},
	} {
		if got := quarantine.ErrorKind(c.err); got != c.want {
			t.Errorf("ErrorKind(%v) = %q, want %q", c.err, got, c.want)
		}
	}
	ctx := context.Background()
	e, _ := seeded(t, 1)
	svc, logs := e.loggedService(nil)
	if _, err := svc.LambdaHandler(ctx, operatorRequest(e, "park", e.src.Name+"#nope", "look")); err == nil {
		t.Fatal("a park of no record was not refused")
	}
	if got := strings.Join(loggedKinds(t, logs.String()), ","); got != "not_found" {
		t.Fatalf("logged error kinds %q, want not_found:\n%s", got, logs)
	}
}

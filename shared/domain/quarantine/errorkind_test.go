package quarantine_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
)

// kinded is an error of another package that names its own kind.
type kinded struct{ kind string }

func (k kinded) Error() string     { return "refused" }
func (k kinded) ErrorKind() string { return k.kind }

// The one classifier names a refusal by what was refused (a record in the
// wrong state, an archived stub, a body the schema refuses), never
// "unavailable", which reads like an outage; what it does not know stays
// "unavailable".
func TestErrorKindNamesRefusals(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		err  error
		want string
	}{
		{nil, ""},
		{fmt.Errorf("park: %w", quarantine.ErrNotClaimable), "wrong_state"},
		{quarantine.ErrCapReached, "cap_reached"},
		{fmt.Errorf("get: %w", quarantine.ErrNotFound), "not_found"},
		{quarantine.ErrCorrectionConflict, "conflict"},
		{&quarantine.CorrectionError{Problems: []string{"x"}, Kind: quarantine.KindSchemaRefused}, "schema_refused"},
		{&quarantine.CorrectionError{Problems: []string{"x"}}, "correction_refused"},
		{fmt.Errorf("wrapped: %w", kinded{"bad_request"}), "bad_request"},
		{kinded{""}, "unavailable"},
		{&quarantine.SealError{ID: "a#b"}, "seal_mismatch"},
		{errors.New("connection reset"), "unavailable"},
	} {
		if got := quarantine.ErrorKind(c.err); got != c.want {
			t.Errorf("ErrorKind(%v) = %q, want %q", c.err, got, c.want)
		}
	}
	if quarantine.StateKind(quarantine.StatusArchived) != "archived" || quarantine.StateKind(quarantine.StatusParked) != "wrong_state" {
		t.Error("StateKind: an archived stub is archived, any other state wrong_state")
	}
}

// awsErr is an AWS error with a code, as the SDK returns it.
type awsErr struct{ code string }

func (e awsErr) Error() string     { return e.code + ": slow down" }
func (e awsErr) ErrorCode() string { return e.code }

// An error that holds several (the end-of-run line joins the run's error
// with every step's) is named by its worst part: an outage (an AWS code,
// the deadline, an unknown error) always wins over a refusal, wherever in
// the tree either is, so one refusal among throttled calls never reads as
// the reason the run failed.
func TestErrorKindOfJoinedErrorsPrefersTheOutage(t *testing.T) {
	t.Parallel()
	throttle := fmt.Errorf("send: %w", awsErr{"ThrottlingException"})
	refused := &quarantine.CorrectionError{Problems: []string{"x"}, Kind: quarantine.KindWrongState}
	for _, c := range []struct {
		name string
		err  error
		want string
	}{
		{"throttle and conflict", errors.Join(throttle, fmt.Errorf("claim: %w", quarantine.ErrVersionConflict)), "aws:ThrottlingException"},
		{"conflict first, then throttles", errors.Join(quarantine.ErrVersionConflict, throttle, throttle), "aws:ThrottlingException"},
		{"a refusal among throttles, nested", errors.Join(nil, errors.Join(throttle, fmt.Errorf("id: %w", quarantine.ErrNotClaimable)), quarantine.ErrCapReached), "aws:ThrottlingException"},
		{"deadline and a correction refused", errors.Join(context.DeadlineExceeded, refused), "deadline"},
		{"a correction refused and the deadline, wrapped", fmt.Errorf("run: %w", errors.Join(refused, fmt.Errorf("step: %w", context.DeadlineExceeded))), "deadline"},
		{"two %w: not found and canceled", fmt.Errorf("%w: %w", quarantine.ErrNotFound, context.Canceled), "deadline"},
		{"a Kinded refusal and an unknown error", errors.Join(kinded{"bad_request"}, errors.New("connection reset")), "unavailable"},
		{"a deadline and a throttle", errors.Join(context.DeadlineExceeded, throttle), "aws:ThrottlingException"},
		{"a throttle and a seal mismatch", errors.Join(throttle, &quarantine.SealError{ID: "a"}), "seal_mismatch"},
		{"refusals only: the first", errors.Join(quarantine.ErrCapReached, quarantine.ErrNotFound), "cap_reached"},
		{"a refusal joined with nils", errors.Join(nil, quarantine.ErrNotClaimable), "wrong_state"},
		{"exists", fmt.Errorf("create: %w", quarantine.ErrExists), "exists"},
		{"a kinded sentinel", fmt.Errorf("x: %w", quarantine.NewKinded("conflict", "lost the race")), "conflict"},
	} {
		if got := quarantine.ErrorKind(c.err); got != c.want {
			t.Errorf("%s: ErrorKind(%v) = %q, want %q", c.name, c.err, got, c.want)
		}
	}
}

// A correction refused by the schema is schema_refused and names every
// failing property (a missing one by its name in the schema), never a
// payload value; one of a record in the wrong state is wrong_state, of an
// archived stub archived.
func TestCorrectionRefusalsNameTheirKindAndProperties(t *testing.T) {
	t.Parallel()
	src := inventorySource(t)
	r := sealedRecord(t, "k1", validBody, fixtureTime)
	noLot := strings.Replace(strings.Replace(validBody, `"lot":"L1",`, "", 1), "12345-678-90", "NDC-SECRET?", 1)
	_, err := r.Correct(src, "", r.Attributes, []byte(r.Body), quarantine.CorrectionRequest{Actor: "fixer", Reason: "typo", Body: []byte(noLot)}, fixtureTime)
	var ce *quarantine.CorrectionError
	if !errors.As(err, &ce) || quarantine.ErrorKind(err) != "schema_refused" {
		t.Fatalf("a correction the schema refuses: %v (kind %q)", err, quarantine.ErrorKind(err))
	}
	msg := err.Error()
	if !strings.Contains(msg, "schema / required: lot") || !strings.Contains(msg, "schema /ndc pattern") || strings.Contains(msg, "NDC-SECRET") {
		t.Fatalf("the refusal names %q; want the missing lot and /ndc, no payload value", msg)
	}

	parked, err := r.ParkManual("alice", "look", fixtureTime)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := parked.Correct(src, "", r.Attributes, []byte(r.Body), quarantine.CorrectionRequest{Actor: "fixer", Reason: "typo", Body: []byte(validBody)}, fixtureTime); quarantine.ErrorKind(err) != "wrong_state" {
		t.Fatalf("a correction of a parked record: %v (kind %q)", err, quarantine.ErrorKind(err))
	}
	stub, err := parked.ArchiveStub("sweeper", quarantine.ArchiveRef{Bucket: "b", Key: "k", Seal: parked.Seal, RetainUntil: quarantine.At(fixtureTime)}, fixtureTime)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := stub.Correct(src, "", r.Attributes, []byte(r.Body), quarantine.CorrectionRequest{Actor: "fixer", Reason: "typo", Body: []byte(validBody)}, fixtureTime); quarantine.ErrorKind(err) != "archived" {
		t.Fatalf("a correction of an archived stub: %v (kind %q)", err, quarantine.ErrorKind(err))
	}
}

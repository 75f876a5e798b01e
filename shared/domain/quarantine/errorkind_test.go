package quarantine_test

import (
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

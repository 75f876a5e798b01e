package redrive

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
)

// The operator actions (park, unpark, read) change or read one record for a
// person, under the function's role, so that the only writers of the table
// and the only readers of the payload bucket are the stack's functions: an
// operator invokes the function and needs neither permission. Each is one
// conditional write through the store (Store.Update: re-read and re-applied
// on a conflict), and a record that fails verification is held as found,
// never re-sealed.

// MaxResponseBytes is Lambda's limit on the response of a synchronous
// invocation (6 MB): a read whose report would not fit is refused with
// its size, never cut short.
const MaxResponseBytes = 6 << 20

// ErrRecordChanged is an operator action that lost the race for its record
// to other writers every time it tried: nothing was changed, look again.
var ErrRecordChanged = quarantine.NewKinded(quarantine.KindConflict, "ids[0] changed meanwhile; look again and retry")

// Payload is what a read returns: the original body verbatim, its message
// attributes and each correction's body, in order, each loaded (from the
// claim check when offloaded) and checked against its sealed hash. An
// archived record's are in its archive object: none are returned.
type Payload struct {
	Body        []byte                          `json:"body"`
	Attributes  map[string]quarantine.Attribute `json:"attributes,omitempty"`
	Corrections [][]byte                        `json:"corrections,omitempty"`
}

// TooLargeError is a read whose payload does not fit in the function's
// answer. It names sizes only.
type TooLargeError struct {
	// Bytes is the size the answer would have (the payload base64-encoded,
	// with the record), or at least that.
	Bytes int
	// Recorded says the read was recorded before its size was known.
	Recorded bool
}

func (e *TooLargeError) Error() string {
	what := "nothing was recorded"
	if e.Recorded {
		what = "the read was recorded, nothing was returned"
	}
	return fmt.Sprintf("ids[0]'s payload needs %d bytes in the function's answer (base64, with the record), more than the %d bytes of a synchronous Lambda response: it cannot be returned whole (%s)",
		e.Bytes, MaxResponseBytes, what)
}

// operatorProblems checks the request of an operator action.
func (r *Request) operatorProblems() []string {
	if r.Action != ActionPark && r.Action != ActionUnpark && r.Action != ActionRead {
		return nil
	}
	var p []string
	if len(r.IDs) != 1 {
		p = append(p, r.Action+" needs exactly one id in ids")
	}
	if r.Action != ActionRead && strings.TrimSpace(r.Reason) == "" {
		p = append(p, r.Action+" needs a reason: it is recorded in the sealed history")
	}
	if r.DryRun {
		p = append(p, r.Action+" has no dry run")
	}
	return p
}

// operate runs a park, unpark or read of the one record in req.IDs.
func (s *Service) operate(ctx context.Context, req Request, rep *Report) (*Report, error) {
	id := req.IDs[0]
	var err error
	if req.Action == ActionRead {
		err = s.read(ctx, req, rep)
	} else {
		err = s.park(ctx, req, rep)
	}
	rep.FinishedAt = s.now().UTC()
	s.log.InfoContext(ctx, "operator action finished", "run_id", rep.RunID, "action", rep.Action, "source", rep.Source,
		"record", quarantine.LogRef(id), "error_kind", quarantine.ErrorKind(err))
	if err != nil {
		return nil, err
	}
	return rep, nil
}

// park parks or unparks the record. The report's Record is the version
// written, without its bodies or failure detail (a park is no read).
func (s *Service) park(ctx context.Context, req Request, rep *Report) error {
	var was, failed *quarantine.Record
	var ferr error
	next, err := s.store.Update(ctx, req.IDs[0], func(cur *quarantine.Record) (*quarantine.Record, error) {
		was, failed, ferr = cur, nil, nil
		var next *quarantine.Record
		var err error
		if req.Action == ActionPark {
			next, err = cur.ParkManual(req.RequestedBy, req.Reason, s.now())
		} else {
			next, err = cur.Unpark(req.RequestedBy, req.Reason, s.now())
		}
		if err != nil {
			failed, ferr = cur, err
		}
		return next, err
	})
	switch {
	case failed != nil && quarantine.IsIntegrityFailure(ferr):
		return s.holdFound(ctx, failed, ferr)
	case failed != nil && errors.Is(ferr, quarantine.ErrNotClaimable):
		return &RequestError{Problems: []string{fmt.Sprintf("ids[0] is %s: cannot %s it", failed.Status, req.Action)}, Kind: quarantine.StateKind(failed.Status)}
	case err != nil:
		return operatorError(err)
	}
	rep.Record = withoutPayload(next)
	if next.RedriveCap != was.RedriveCap {
		rep.RedriveCapBefore = was.RedriveCap
	}
	return nil
}

// read records the payload read in the record's sealed history (one
// conditional write), then loads the payload of the version written and
// returns it with that version. A record, body, attribute set or
// correction that fails verification holds the record instead.
func (s *Service) read(ctx context.Context, req Request, rep *Report) error {
	id := req.IDs[0]
	// Refused before anything is written when the sealed sizes alone do
	// not fit: no read is recorded that returns nothing.
	cur, err := s.store.Get(ctx, id)
	if err != nil {
		return operatorError(err)
	}
	if n := payloadLowerBound(cur); n > MaxResponseBytes {
		return &TooLargeError{Bytes: n}
	}
	var failed *quarantine.Record
	var ferr error
	next, err := quarantine.UpdateFrom(ctx, s.store, cur, func(cur *quarantine.Record) (*quarantine.Record, error) {
		failed, ferr = nil, nil
		next, err := cur.NotePayloadRead(req.RequestedBy, s.now())
		if err != nil {
			failed, ferr = cur, err
		}
		return next, err
	})
	switch {
	case failed != nil && quarantine.IsIntegrityFailure(ferr):
		return s.holdFound(ctx, failed, ferr) // the read cannot be recorded under its seal
	case err != nil:
		return operatorError(err)
	}
	p, err := s.loadPayload(ctx, next)
	if quarantine.IsIntegrityFailure(err) {
		return s.holdFound(ctx, next, err)
	}
	if err != nil {
		return fmt.Errorf("load the payload: %w", err)
	}
	rep.Record, rep.Payload = next, p
	raw, err := json.Marshal(rep)
	if err != nil {
		return fmt.Errorf("encode the report: %w", err)
	}
	if len(raw) > MaxResponseBytes {
		rep.Record, rep.Payload = nil, nil
		return &TooLargeError{Bytes: len(raw), Recorded: true}
	}
	return nil
}

// loadPayload loads r's body, attributes and correction bodies.
func (s *Service) loadPayload(ctx context.Context, r *quarantine.Record) (*Payload, error) {
	p := &Payload{}
	if r.Status == quarantine.StatusArchived {
		return p, nil
	}
	var err error
	if p.Body, err = quarantine.LoadBody(ctx, s.payloads, r); err != nil {
		return nil, err
	}
	if p.Attributes, err = quarantine.LoadAttributes(ctx, s.payloads, r); err != nil {
		return nil, err
	}
	for i := range r.Corrections {
		b, err := quarantine.CorrectionBody(ctx, s.payloads, r, &r.Corrections[i])
		if err != nil {
			return nil, err
		}
		p.Corrections = append(p.Corrections, b)
	}
	return p, nil
}

// payloadLowerBound is the least size of a read's report for r: its
// bodies base64-encoded (their sizes are sealed) and the record itself.
func payloadLowerBound(r *quarantine.Record) int {
	if r.Status == quarantine.StatusArchived {
		return 0
	}
	n := base64.StdEncoding.EncodedLen(int(max(r.BodySize, 0))) + len(r.Body)
	for _, c := range r.Corrections {
		n += base64.StdEncoding.EncodedLen(int(max(c.BodySize, 0))) + len(c.Body)
	}
	return n
}

// holdFound sets aside r, the version found failing verification (cause),
// exactly as found, and returns the *HeldError the caller sees.
func (s *Service) holdFound(ctx context.Context, r *quarantine.Record, cause error) error {
	reason := quarantine.HoldReason(cause)
	err := s.store.Hold(ctx, quarantine.IntegrityHold{ID: r.DLQID, Version: r.Version, Reason: reason, At: s.now().UTC()})
	switch {
	case errors.Is(err, quarantine.ErrVersionConflict):
		return ErrRecordChanged
	case err != nil:
		return fmt.Errorf("hold record: %w", err)
	}
	s.log.WarnContext(ctx, "record fails verification: held, not changed", "record", quarantine.LogRef(r.DLQID), "reason", reason)
	return &HeldError{Reason: reason}
}

// operatorError turns a store error of an operator action into what the
// caller sees; the runtime logs a function error's text, so none names
// the record.
func operatorError(err error) error {
	switch {
	case errors.Is(err, quarantine.ErrNotFound):
		return &RequestError{Problems: []string{"ids[0] names no record"}, Kind: quarantine.KindNotFound}
	case errors.Is(err, quarantine.ErrVersionConflict):
		return ErrRecordChanged
	case errors.Is(err, quarantine.ErrHeld):
		return &HeldError{Reason: "held"}
	}
	return err
}

// withoutPayload is r without its payload values: bodies, attributes,
// correction bodies and the validator's words (which may quote the
// payload). Its seal no longer verifies: it is a view, not a version.
func withoutPayload(r *quarantine.Record) *quarantine.Record {
	v := r.Clone()
	v.Body, v.Attributes, v.FailureDetail = "", nil, ""
	for i := range v.Corrections {
		v.Corrections[i].Body = ""
	}
	return v
}

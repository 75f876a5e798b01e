package redrive

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
)

// candidates calls yield with the id of every record the request selects:
// the explicit ids, or the status index for QUARANTINED (and PARKED when
// asked), plus REDRIVING records whose lease expired.
func (r *run) candidates(ctx context.Context, yield func(id string) (bool, error)) error {
	if r.fifo() {
		// Explicit ids too: a group keeps its order whoever picks it.
		return r.fifoCandidates(ctx, yield)
	}
	if len(r.req.IDs) > 0 {
		for _, id := range r.req.IDs {
			more, err := yield(id)
			if err != nil || !more {
				return err
			}
		}
		return nil
	}
	if _, ok := r.selected(); !ok {
		return nil // no requested signature is cleared
	}
	statuses := []quarantine.Status{quarantine.StatusRedriving, quarantine.StatusQuarantined}
	if r.req.IncludeParked {
		statuses = append(statuses, quarantine.StatusParked)
	}
	for _, st := range statuses {
		q := r.listQuery(st)
		for page, err := range quarantine.Pages(ctx, r.s.lister, q) {
			if err != nil {
				return fmt.Errorf("list %s records: %w", st, err)
			}
			for _, id := range page.IDs {
				if st == quarantine.StatusRedriving && !r.leaseExpired(ctx, id) {
					continue
				}
				more, err := yield(id)
				if err != nil || !more {
					return err
				}
			}
		}
	}
	return nil
}

// fifoCandidates walks every open record of a FIFO source, REDRIVING and
// QUARANTINED (and PARKED when asked) merged in first_seen order, which
// within a message group is the order the DLQ delivered them in. A group
// replays only from its earliest open record on: a group whose earlier
// record this run does not replay (not selected by the request, in flight
// in another run) sends nothing after it; those later records are noted
// as deferred. PARKED and held records are out of the stream and block
// nothing. The listing entries come from the status index alone.
func (r *run) fifoCandidates(ctx context.Context, yield func(id string) (bool, error)) error {
	if _, ok := r.selected(); !ok && len(r.req.IDs) == 0 {
		return nil // no requested signature is cleared: nothing to walk for
	}
	streams := r.fifoStreams()
	now := r.s.now()
	yielded := map[string]bool{}
	// Requested ids the walk did not hand on are reported, not dropped
	// from the report (parked, held, another source's, gone).
	defer func() {
		for _, id := range r.req.IDs {
			if !yielded[id] {
				r.note(&r.rep.Skipped, id)
			}
		}
	}()
	for walked := 0; ; walked++ {
		if walked >= MaxFIFOWalk || r.deadlineNear(ctx) {
			// Bounded: the rest is for the next run (counted as remaining).
			r.rep.Remaining++
			r.rep.Stopped = StoppedWalkBound
			if r.deadlineNear(ctx) {
				r.rep.Stopped = StoppedDeadline
			}
			return nil
		}
		next, err := earliest(ctx, streams)
		if err != nil {
			return err
		}
		if next == nil {
			return nil
		}
		held := next.held
		e := next.pop()
		if !r.handsOn(e, held, now) {
			continue
		}
		yielded[e.ID] = true
		more, err := yield(e.ID)
		if err != nil || !more {
			return err
		}
	}
}

// fifoStreams are the index listings the FIFO walk merges.
func (r *run) fifoStreams() []*entryStream {
	var streams []*entryStream
	add := func(st quarantine.Status, held bool) {
		streams = append(streams, &entryStream{lister: r.s.lister, held: held,
			q: quarantine.ListQuery{Status: st, Source: r.src.Name, Limit: 1000, Held: held}})
	}
	for _, st := range []quarantine.Status{quarantine.StatusRedriving, quarantine.StatusQuarantined} {
		add(st, false)
		add(st, true) // held open records: out of replay, but their group waits for them
	}
	if r.req.IncludeParked {
		add(quarantine.StatusParked, false)
	}
	return streams
}

// earliest returns the stream whose next entry comes first in FIFO order,
// or nil when every stream is done.
func earliest(ctx context.Context, streams []*entryStream) (*entryStream, error) {
	var next *entryStream
	for _, st := range streams {
		e, err := st.peek(ctx)
		if err != nil {
			return nil, err
		}
		if e != nil && (next == nil || before(*e, *next.head())) {
			next = st
		}
	}
	return next, nil
}

// handsOn applies the walk's guards to e (listed as held or not) at now: it
// reports whether the run may replay e, and otherwise blocks e's group
// and notes e where the guard says so.
func (r *run) handsOn(e quarantine.ListEntry, held bool, now time.Time) bool {
	rec := &quarantine.Record{DLQID: e.ID, MessageGroupID: e.Group, IdempotencyKey: e.Group}
	switch {
	case held:
		r.block(rec) // set aside as found: its group waits until it is resolved
		return false
	case r.isBlocked(rec):
		if e.Status != quarantine.StatusParked {
			r.note(&r.rep.Deferred, e.ID)
		}
		return false
	case now.Sub(latest(e.FirstSeen, e.StatusSince)) < IndexSettleGuard && e.Status != quarantine.StatusParked:
		// The status index is eventually consistent: an earlier record
		// of this group written (or moved) a moment ago may not be
		// listed yet. It waits for the next run, counted as remaining.
		r.block(rec)
		r.rep.Remaining++
		return false
	case e.Status == quarantine.StatusRedriving && now.Before(e.LeaseUntil):
		r.block(rec) // in flight: nothing of its group may go before it
		return false
	case !r.selects(e):
		if e.Status != quarantine.StatusParked {
			r.block(rec) // an earlier open record this run does not replay
		}
		return false
	}
	return true
}

func latest(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// MaxFIFOWalk bounds the index entries one run of a FIFO source walks.
const MaxFIFOWalk = 50000

// IndexSettleGuard is how recent a record must be for a FIFO run to leave
// its group for the next run: the status index is eventually consistent
// (typically within a second), so an earlier record of the group written
// just before may not be listed yet.
const IndexSettleGuard = 10 * time.Second

// before orders listing entries by first_seen, then sequence number, then
// id: the order of a FIFO group.
func before(a, b quarantine.ListEntry) bool {
	if c := a.FirstSeen.Compare(b.FirstSeen); c != 0 {
		return c < 0
	}
	if c := quarantine.CompareSequence(a.Sequence, b.Sequence); c != 0 {
		return c < 0
	}
	return a.ID < b.ID
}

// selects reports whether the request asks for the record e lists.
func (r *run) selects(e quarantine.ListEntry) bool {
	if len(r.req.IDs) > 0 {
		return contains(r.req.IDs, e.ID)
	}
	sigs, ok := r.selected()
	if !ok {
		return false
	}
	st := e.Status
	if st == quarantine.StatusRedriving {
		st = quarantine.StatusQuarantined
	}
	q := r.listQuery(st)
	probe := &quarantine.Record{Status: st, Source: r.src.Name, FirstSeen: quarantine.At(e.FirstSeen), StatusSince: quarantine.At(e.FirstSeen),
		FailureClass: e.Class, FailureSignature: e.Signature}
	q.Signatures = sigs
	return q.Matches(probe)
}

// entryStream pages through one status of the index, an entry at a time.
type entryStream struct {
	lister quarantine.Lister
	q      quarantine.ListQuery
	buf    []quarantine.ListEntry
	done   bool
	held   bool // lists records under an integrity hold
}

func (s *entryStream) peek(ctx context.Context) (*quarantine.ListEntry, error) {
	for len(s.buf) == 0 && !s.done {
		page, err := s.lister.List(ctx, s.q)
		if err != nil {
			return nil, fmt.Errorf("list %s records: %w", s.q.Status, err)
		}
		s.buf, s.q.Cursor, s.done = page.Entries, page.Cursor, page.Cursor == ""
	}
	return s.head(), nil
}

func (s *entryStream) head() *quarantine.ListEntry {
	if len(s.buf) == 0 {
		return nil
	}
	return &s.buf[0]
}

func (s *entryStream) pop() quarantine.ListEntry {
	e := s.buf[0]
	s.buf = s.buf[1:]
	return e
}

// selected returns the signatures the listing is restricted to: the
// request's, narrowed to cleared_reasons when those are given, so records
// whose cause is not cleared never fill a run's max_messages and starve
// the ones behind them. ok is false when nothing can match.
func (r *run) selected() (sigs []string, ok bool) { return r.req.selected() }

func (r *run) listQuery(st quarantine.Status) quarantine.ListQuery {
	return r.req.listQuery(r.src.Name, st)
}

// selected is run.selected for a request.
func (req *Request) selected() (sigs []string, ok bool) {
	sigs = req.Signatures
	if len(req.ClearedReasons) == 0 {
		return sigs, true
	}
	if len(sigs) == 0 {
		return req.ClearedReasons, true
	}
	var both []string
	for _, s := range sigs {
		if contains(req.ClearedReasons, s) {
			both = append(both, s)
		}
	}
	return both, len(both) > 0
}

// listQuery is the index query of the request's records of status st in
// source.
func (req *Request) listQuery(source string, st quarantine.Status) quarantine.ListQuery {
	sigs, _ := req.selected()
	q := quarantine.ListQuery{Status: st, Source: source, Classes: req.Classes, Signatures: sigs, Limit: 1000}
	if req.FirstSeenFrom != nil {
		q.FirstSeenFrom = *req.FirstSeenFrom
	}
	if req.FirstSeenTo != nil {
		q.FirstSeenTo = *req.FirstSeenTo
	}
	if st == quarantine.StatusParked {
		// Parked records are poison: a class filter would hide them.
		q.Classes = nil
	}
	return q
}

func (r *run) leaseExpired(ctx context.Context, id string) bool {
	rec, err := r.s.store.Get(ctx, id)
	return err == nil && rec.Status == quarantine.StatusRedriving && rec.LeaseUntil != nil && !r.s.now().Before(rec.LeaseUntil.Time)
}

// eligible re-checks the request's filters on the full record, and the
// cleared-reasons allow-list. It is pure: a claim decision (decideClaim)
// calls it.
func (req *Request) eligible(rec *quarantine.Record, source string) (bool, string) {
	st := rec.Status
	if st == quarantine.StatusRedriving {
		st = quarantine.StatusQuarantined
		if rec.ParkedCap != 0 {
			// An approved replay of a parked record, its lease expired:
			// only another approved run of parked records takes it over.
			st = quarantine.StatusParked
		}
	}
	if st == quarantine.StatusParked && !req.IncludeParked {
		return false, "parked"
	}
	q := req.listQuery(source, st)
	q.Status = st
	probe := *rec
	probe.Status = st
	if !q.Matches(&probe) {
		return false, "no longer matches the filters"
	}
	if len(req.ClearedReasons) > 0 && !contains(req.ClearedReasons, rec.FailureSignature) {
		return false, "signature not in cleared_reasons"
	}
	return true, ""
}

func contains(list []string, v string) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}

// group is the FIFO message group a record's replay is sent in.
func group(rec *quarantine.Record) string {
	if rec.MessageGroupID != "" {
		return rec.MessageGroupID
	}
	return rec.IdempotencyKey
}

// fifo reports whether the run replays into a FIFO queue (a target is of
// its source's kind).
func (r *run) fifo() bool { return strings.HasSuffix(r.dest().Name, ".fifo") }

// block stops every later replay of rec's message group in this run: an
// earlier message of the group was not (or not surely) sent, and no later
// one may go before it.
func (r *run) block(rec *quarantine.Record) {
	if !r.fifo() {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.blocked == nil {
		r.blocked = map[string]bool{}
	}
	r.blocked[group(rec)] = true
}

func (r *run) isBlocked(rec *quarantine.Record) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.fifo() && r.blocked[group(rec)]
}

// inGroupOrder puts the records of each FIFO message group into their
// original order (the order the DLQ delivered them in), each group in the
// places its records hold.
func inGroupOrder(ready []*claimed) {
	places := map[string][]int{}
	for i, c := range ready {
		places[group(c.rec)] = append(places[group(c.rec)], i)
	}
	for _, idx := range places {
		members := make([]*claimed, len(idx))
		for k, i := range idx {
			members[k] = ready[i]
		}
		slices.SortStableFunc(members, func(a, b *claimed) int { return originalOrder(a.rec, b.rec) })
		for k, i := range idx {
			ready[i] = members[k]
		}
	}
}

// originalOrder compares two records of one message group by the order
// they reached the DLQ in, as the FIFO walk does: first_seen (which ingest
// stamps in the DLQ's order within a group), then the SQS sequence number.
func originalOrder(a, b *quarantine.Record) int {
	ea, eb := quarantine.EntryOf(a), quarantine.EntryOf(b)
	switch {
	case before(ea, eb):
		return -1
	case before(eb, ea):
		return 1
	}
	return 0
}

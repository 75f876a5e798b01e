package dlqctl

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
	"github.com/dlqquarantine/dlqq/shared/usecase/redrive"
)

// Summary is a record without its payload: what ls and buckets print.
type Summary struct {
	ID        string `json:"id"`
	Source    string `json:"source"`
	Status    string `json:"status"`
	Class     string `json:"class"`
	Signature string `json:"signature"`
	// Attempts counts every entry of the attempt history, kept or not.
	Attempts int `json:"attempts"`
	// Failures are the arrivals from the DLQ (the first failure and each
	// re-failure after a replay), Replays the sends of a redrive, both
	// counted in the history kept; HistoryTrimmed says older entries were
	// dropped from it (the counts are then at least these).
	Failures int `json:"failures"`
	Replays  int `json:"replays"`
	// PossiblySent are the replays among Replays whose send got no
	// answer from SQS: they count toward the cap and may have been
	// enqueued (they have no message id).
	PossiblySent   int       `json:"possibly_sent"`
	HistoryTrimmed bool      `json:"history_trimmed,omitempty"`
	RedriveCount   int       `json:"redrive_count"`
	RedriveCap     int       `json:"redrive_cap"`
	FirstSeen      time.Time `json:"first_seen"`
	LastSeen       time.Time `json:"last_seen"`
}

func summarize(r *quarantine.Record) Summary {
	s := Summary{ID: r.DLQID, Source: r.Source, Status: string(r.Status), Class: string(r.FailureClass), Signature: r.FailureSignature,
		Attempts: r.AttemptCount, RedriveCount: r.RedriveCount, RedriveCap: r.RedriveCap, FirstSeen: r.FirstSeen.Time, LastSeen: r.LastSeen.Time,
		HistoryTrimmed: r.AttemptCount > len(r.Attempts)}
	for i := range r.Attempts {
		switch at := &r.Attempts[i]; {
		case at.IsArrival():
			s.Failures++
		case at.Stage == quarantine.StageRedrive && at.MessageID != "":
			s.Replays++ // a send records the message id SQS gave it
		case at.IsPossiblySent():
			s.Replays++ // no answer: it counts toward the cap, and may have been sent
			s.PossiblySent++
		}
	}
	return s
}

// statuses parses a --status value: one status, several comma-separated,
// or "all".
func statuses(v string) ([]quarantine.Status, error) {
	if strings.EqualFold(strings.TrimSpace(v), "all") {
		return []quarantine.Status{quarantine.StatusQuarantined, quarantine.StatusRedriving, quarantine.StatusRedriven,
			quarantine.StatusResolved, quarantine.StatusParked, quarantine.StatusArchived}, nil
	}
	var out []quarantine.Status
	for _, s := range strings.Split(v, ",") {
		st := quarantine.Status(strings.ToUpper(strings.TrimSpace(s)))
		if !st.Valid() {
			return nil, &UsageError{fmt.Errorf("--status %q: not a status; want one of %s, several comma-separated, or all", s, strings.Join(statusNames(), ", "))}
		}
		out = append(out, st)
	}
	return out, nil
}

// statusNames are the valid --status values, in lifecycle order.
func statusNames() []string {
	all, _ := statuses("all")
	out := make([]string, len(all))
	for i, st := range all {
		out[i] = string(st)
	}
	return out
}

// classes parses a --class value.
func classes(v string) ([]quarantine.Class, error) {
	if v == "" {
		return nil, nil
	}
	var out []quarantine.Class
	for _, s := range strings.Split(v, ",") {
		c := quarantine.Class(strings.ToLower(strings.TrimSpace(s)))
		switch c {
		case quarantine.ClassValidation, quarantine.ClassExhausted, quarantine.ClassPoison:
			out = append(out, c)
		default:
			return nil, &UsageError{fmt.Errorf("--class %q: not validation, exhausted or poison", s)}
		}
	}
	return out, nil
}

// list reads the records q selects for each status, in full, up to limit
// (0: no limit).
func (a *App) list(ctx context.Context, sts []quarantine.Status, q quarantine.ListQuery, limit int) ([]*quarantine.Record, error) {
	store, lister, _, err := a.store(ctx)
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, st := range sts {
		q.Status, q.Cursor = st, ""
		for page, err := range quarantine.Pages(ctx, lister, q) {
			if err != nil {
				return nil, describe(err, a.Table)
			}
			ids = append(ids, page.IDs...)
			if limit > 0 && len(ids) >= limit {
				break
			}
		}
		if limit > 0 && len(ids) >= limit {
			ids = ids[:limit]
			break
		}
	}
	var out []*quarantine.Record
	for i := 0; i < len(ids); i += 100 {
		got, err := store.GetMany(ctx, ids[i:min(i+100, len(ids))])
		if err != nil {
			return nil, describe(err, a.Table)
		}
		for _, id := range ids[i:min(i+100, len(ids))] {
			if r := got[id]; r != nil {
				out = append(out, r)
			}
		}
	}
	return out, nil
}

// describe turns an AWS error into a message an on-call engineer can act on.
func describe(err error, table string) error {
	var code interface{ ErrorCode() string }
	if errors.As(err, &code) && code.ErrorCode() == "ResourceNotFoundException" {
		return fmt.Errorf("table %q not found (set --table or DLQQ_TABLE): %w", table, err)
	}
	return err
}

// checkSource refuses a --source that the system knows nothing of: one
// that the redrive function fn does not configure (by the SOURCES of its
// configuration, as the function refuses it in a redrive request, in its
// words: `--source "nope": source is not configured`) and, when present
// is given, of which present finds nothing either (ingest keeps the
// records of a DLQ message from an unconfigured source: those are listed,
// with a note that they cannot be replayed). When the configuration
// cannot be read (no function of that name, no permission) the source is
// not checked and, unless quiet (the function checks it itself), a
// warning says so; source "" is not checked. fn "" is the redrive
// function --function names, else the stack's (--stack).
func (a *App) checkSource(ctx context.Context, fn, source string, quiet bool, present func() (bool, error)) error {
	if source == "" {
		return nil
	}
	if fn == "" { // the redrive function: --function, else the stack's
		if _, err := a.connect(ctx); err != nil {
			return err
		}
		fn = a.Function
	}
	cfg, note, err := a.functionSources(ctx, fn)
	if err != nil {
		if !quiet {
			fmt.Fprintf(a.Err, "warning: --source %q not checked: %v\n", source, err)
		}
		return nil
	}
	if _, ok := cfg[source]; ok {
		return nil
	}
	if present != nil {
		found, err := present()
		if err != nil {
			return err
		}
		switch {
		case found && note != "":
			// One of the file's, or unconfigured: not vouched for.
			fmt.Fprintf(a.Err, "note: source %q is not in the SOURCES of the redrive function %s (%s): its records are shown\n", source, fn, note)
			return nil
		case found:
			fmt.Fprintf(a.Err, "note: source %q is not configured in the redrive function %s: its records are shown, but cannot be replayed\n", source, fn)
			return nil
		}
	}
	if note != "" {
		// The source may be one of the file's: not refused, not vouched for.
		if !quiet {
			fmt.Fprintf(a.Err, "warning: --source %q not checked: %s\n", source, note)
		}
		return nil
	}
	return &UsageError{fmt.Errorf("--source %q: %s (the redrive function %s configures %s)", source, redrive.ErrUnknownSource, fn, strings.Join(slices.Sorted(maps.Keys(cfg)), ", "))}
}

// hasRecords is checkSource's present for the commands that list
// records: whether any record, of any status, names source.
func (a *App) hasRecords(ctx context.Context, source string) func() (bool, error) {
	return func() (bool, error) {
		all, _ := statuses("all")
		recs, err := a.list(ctx, all, quarantine.ListQuery{Source: source, Limit: 1}, 1)
		return len(recs) > 0, err
	}
}

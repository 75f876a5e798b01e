package dlqctl

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
)

// Summary is a record without its payload: what ls and buckets print.
type Summary struct {
	ID           string    `json:"id"`
	Source       string    `json:"source"`
	Status       string    `json:"status"`
	Class        string    `json:"class"`
	Signature    string    `json:"signature"`
	Attempts     int       `json:"attempts"`
	RedriveCount int       `json:"redrive_count"`
	RedriveCap   int       `json:"redrive_cap"`
	FirstSeen    time.Time `json:"first_seen"`
	LastSeen     time.Time `json:"last_seen"`
}

func summarize(r *quarantine.Record) Summary {
	return Summary{ID: r.DLQID, Source: r.Source, Status: string(r.Status), Class: string(r.FailureClass), Signature: r.FailureSignature,
		Attempts: r.AttemptCount, RedriveCount: r.RedriveCount, RedriveCap: r.RedriveCap, FirstSeen: r.FirstSeen.Time, LastSeen: r.LastSeen.Time}
}

// statuses parses a --status value: one status, several comma-separated,
// or "all".
func statuses(v string) ([]quarantine.Status, error) {
	if v == "all" {
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

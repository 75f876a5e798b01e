package dlqctl_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dlqquarantine/dlqq/internal/dlqctl"
	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
)

// Flag parsing, apart from the run functions: no AWS call is made.
func TestFlagParsing(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	o := dlqctl.RedriveOptions{Source: "orders", Classes: "exhausted,validation", Since: "2h", Until: "2026-11-29T11:00:00Z", Max: 10, BatchSize: 50, ClearedReasons: []string{"a|b|"}}
	req, err := o.Request("alice", now)
	if err != nil {
		t.Fatal(err)
	}
	if req.FirstSeenFrom == nil || !req.FirstSeenFrom.Equal(now.Add(-2*time.Hour)) || req.FirstSeenTo == nil || req.FirstSeenTo.Hour() != 11 ||
		len(req.Classes) != 2 || req.RequestedBy != "alice" || req.DryRun {
		t.Fatalf("request %+v", req)
	}
	for _, bad := range []dlqctl.RedriveOptions{
		{Source: "orders", Max: 10, BatchSize: 51},
		{Source: "orders", Max: 10, BatchSize: 50, Classes: "maybe"},
		{Source: "orders", Max: 10, BatchSize: 50, Since: "yesterday"},
		{Max: 10, BatchSize: 50},
		{Source: "orders", Max: 10, BatchSize: 50, IDs: []string{"no-hash"}},
	} {
		var u *dlqctl.UsageError
		if _, err := bad.Request("alice", now); !errors.As(err, &u) {
			t.Errorf("%+v: %v, want a usage error", bad, err)
		}
	}
	if _, err := dlqctl.ParseWhen("-5m", now); err == nil {
		t.Error("a negative duration was accepted")
	}

	// Usage errors exit 2 before any AWS call.
	for _, args := range [][]string{{"nope"}, {"ls", "--status", "LOST"}, {"ls", "--bogus"}, {"show"}, {"ls", "-o", "yaml"}, {"redrive", "--source", "s", "--batch-size", "51"}} {
		var out, errw bytes.Buffer
		a := dlqctl.NewApp(strings.NewReader(""), &out, &errw)
		a.Connect = func(context.Context, string, string) (*dlqctl.Clients, error) {
			t.Fatalf("%v: connected to AWS for a usage error", args)
			return nil, nil
		}
		if code := a.Main(context.Background(), args); code != dlqctl.ExitUsage {
			t.Errorf("%v: exit %d (%s), want %d", args, code, errw.String(), dlqctl.ExitUsage)
		}
	}
}

// An --actor (or DLQQ_ACTOR) that names the system itself, or is empty or
// too long, is refused before any AWS call: the audit history must say who
// acted, and a send by "ingest" would pass for an arrival.
func TestReservedActorIsRefused(t *testing.T) {
	t.Parallel()
	for _, actor := range []string{"ingest", " Ingest ", "settler", "SWEEPER", "breaker", "policy:p1", "Policy:x", "schedule:settle", "", "   ", strings.Repeat("a", quarantine.MaxActorBytes+1)} {
		for _, cmd := range [][]string{{"show", "s#k", "--payload"}, {"park", "s#k", "--reason", "r"}, {"redrive", "--source", "s"}} {
			var out, errw bytes.Buffer
			a := dlqctl.NewApp(strings.NewReader(""), &out, &errw)
			a.Connect = func(context.Context, string, string) (*dlqctl.Clients, error) {
				t.Fatalf("--actor %q %v: connected to AWS", actor, cmd)
				return nil, nil
			}
			args := append([]string{"--actor", actor}, cmd...)
			if code := a.Main(context.Background(), args); code != dlqctl.ExitUsage || !strings.Contains(errw.String(), "actor") {
				t.Errorf("--actor %q %v: exit %d (%s), want %d", actor, cmd, code, errw.String(), dlqctl.ExitUsage)
			}
		}
	}
}

// FuzzCLIWindowsAndIDs: the flags that parse times, windows and record ids
// (redrive --since/--until/--id, policy add --since/--expires) either give a
// usage error or a request the redrive function accepts; never a panic, a
// window that ends before it starts, or a time in the future for "ago".
func FuzzCLIWindowsAndIDs(f *testing.F) {
	f.Add("90m", "2026-11-29T10:00:00Z", "orders#o1", "24h")
	f.Add("2026-11-29T10:00:00+02:00", "1h", "no-hash", "2026-12-01T00:00:00Z")
	f.Add("-5m", "", "orders#", "0s")
	f.Add("", "", "", "")
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, since, until, id, expires string) {
		if ts, err := dlqctl.ParseWhen(since, now); err == nil && !strings.Contains(since, "T") && ts.After(now) {
			t.Fatalf("%q ago is in the future: %s", since, ts)
		}
		o := dlqctl.RedriveOptions{Source: "orders", Since: since, Until: until, Max: 10, BatchSize: 10}
		if id != "" {
			o.IDs = []string{id}
		}
		req, err := o.Request("alice", now)
		if err != nil {
			var ue *dlqctl.UsageError
			if !errors.As(err, &ue) {
				t.Fatalf("%v is not a usage error", err)
			}
		} else {
			if req.FirstSeenFrom != nil && req.FirstSeenTo != nil && req.FirstSeenFrom.After(*req.FirstSeenTo) {
				t.Fatalf("accepted a window that ends before it starts: %v..%v", req.FirstSeenFrom, req.FirstSeenTo)
			}
			for _, x := range req.IDs {
				if !strings.Contains(x, "#") {
					t.Fatalf("accepted id %q", x)
				}
			}
		}
		spec, err := dlqctl.PolicyAddOptions{Source: "orders", From: since, Until: until, MaxPerRun: 5, Expires: expires, MinAge: time.Minute}.Spec(now)
		if err != nil {
			var ue *dlqctl.UsageError
			if !errors.As(err, &ue) {
				t.Fatalf("%v is not a usage error", err)
			}
			return
		}
		if spec.ExpiresAt.IsZero() {
			t.Fatalf("expiry %q parsed to nothing", expires)
		}
	})
}

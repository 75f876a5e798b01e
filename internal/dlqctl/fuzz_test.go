package dlqctl_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dlqquarantine/dlqq/internal/dlqctl"
)

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

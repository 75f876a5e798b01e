package lambdatest

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/dlqquarantine/dlqq/shared/dev/embedded"
	"github.com/dlqquarantine/dlqq/shared/dev/template"
)

// ForTest builds ./functions/<name>, starts it on st with the environment
// the template gives logicalID (and extra NAME=value pairs after it), and
// stops it when the test ends; any failure fails tb.
func ForTest(tb testing.TB, st *embedded.Stack, name, logicalID string, timeout time.Duration, extra ...string) *Function {
	tb.Helper()
	ctx := context.Background()
	bin, err := Build(ctx, name, tb.TempDir())
	if err != nil {
		tb.Fatal(err)
	}
	env, err := Env(st, logicalID)
	if err != nil {
		tb.Fatal(err)
	}
	f, err := Start(ctx, st, embedded.RandomName(name), bin, append(env, extra...), timeout)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(f.Close)
	return f
}

// MustInvoke invokes f with payload and returns its response; a failed
// call or a function error fails tb, with what the function printed.
func (f *Function) MustInvoke(tb testing.TB, payload []byte) []byte {
	tb.Helper()
	out, err := f.Invoke(context.Background(), payload)
	if err != nil {
		tb.Fatal(err)
	}
	if out.FunctionError != nil {
		tb.Fatalf("function error %s: %s\n%s", *out.FunctionError, out.Payload, f.Output())
	}
	return out.Payload
}

// MustPeakRSS is f's PeakRSS; a failure to read it fails tb.
func (f *Function) MustPeakRSS(tb testing.TB) int64 {
	tb.Helper()
	peak, err := f.PeakRSS()
	if err != nil {
		tb.Fatal(err)
	}
	return peak
}

// Sample reads events/<name>, a sample event of the repository.
func Sample(tb testing.TB, name string) []byte {
	tb.Helper()
	raw, err := os.ReadFile(filepath.Join(filepath.Dir(template.Path()), "..", "events", name))
	if err != nil {
		tb.Fatal(err)
	}
	return raw
}

// ScheduledSample reads events/<name> and checks that it is the
// EventBridge scheduled event the template's schedules send.
func ScheduledSample(tb testing.TB, name string) []byte {
	tb.Helper()
	raw := Sample(tb, name)
	var ev events.CloudWatchEvent
	if err := json.Unmarshal(raw, &ev); err != nil || ev.DetailType != "Scheduled Event" {
		tb.Fatalf("sample event %s: %+v %v", name, ev, err)
	}
	return raw
}

// Getenv is the environment of the function with the given logical id as
// the template (and the embedded stack) gives it, as a lookup; it fails t
// when the template has no such function.
func Getenv(t testing.TB, st *embedded.Stack, logicalID string) func(string) string {
	t.Helper()
	fn, err := st.Template.GetServerlessFunctionWithName(logicalID)
	if err != nil {
		t.Fatal(err)
	}
	return func(k string) string {
		if fn.Environment == nil {
			return ""
		}
		return fn.Environment.Variables[k]
	}
}

package lambdatest

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// Lines reach the shared writer whole and prefixed, however the process
// splits its writes; an unfinished line waits for its end.
func TestPrefixWriterWritesWholePrefixedLines(t *testing.T) {
	var out strings.Builder
	w := NewPrefixWriter(&out, "[fn] ")
	for _, part := range []string{"one\ntw", "o\n", "thr", "ee"} {
		if n, err := w.Write([]byte(part)); err != nil || n != len(part) {
			t.Fatalf("write %q: %d %v", part, n, err)
		}
	}
	if got := out.String(); got != "[fn] one\n[fn] two\n" {
		t.Fatalf("got %q", got)
	}
	_, _ = w.Write([]byte("\n"))
	if got := out.String(); got != "[fn] one\n[fn] two\n[fn] three\n" {
		t.Fatalf("got %q", got)
	}
}

// An invocation that arrives for a poll whose process has died (its lost
// invocations already collected) is not handed to it: it goes back for the
// next process, and nothing is left registered to a process that cannot
// answer. A live process's poll gets it and it is registered.
func TestNextHandsNothingToAGoneProcess(t *testing.T) {
	for _, gone := range []bool{true, false} {
		f := &Supervised{Spec: Spec{Name: "fn"}, log: slog.New(slog.NewTextHandler(io.Discard, nil)),
			pollCh: make(chan struct{}), inflight: map[string]time.Time{}, arrived: make(chan invocation), fetching: true}
		f.fetchCtx, f.cancel = context.WithCancel(context.Background())
		polled := f.pollCh
		rec := httptest.NewRecorder()
		done := make(chan struct{})
		go func() {
			defer close(done)
			f.next(rec, httptest.NewRequest(http.MethodGet, "/_runtime/fn/2018-06-01/runtime/invocation/next", nil))
		}()
		<-polled // the poll is registered under the current gen
		if gone {
			f.mu.Lock()
			f.gen++ // as watch does when it collects a dead process's invocations
			f.mu.Unlock()
		}
		inv := invocation{header: http.Header{"Lambda-Runtime-Aws-Request-Id": {"req-1"}}, body: []byte(`{"x":1}`)}
		f.arrived <- inv
		if gone {
			select {
			case back := <-f.arrived:
				if string(back.body) != `{"x":1}` {
					t.Fatalf("requeued %q", back.body)
				}
			case <-time.After(time.Minute):
				t.Fatal("the invocation was not requeued")
			}
		}
		<-done
		f.cancel()
		f.mu.Lock()
		_, registered := f.inflight["req-1"]
		f.mu.Unlock()
		if gone && (registered || rec.Body.Len() != 0) {
			t.Fatalf("handed to a gone process: registered %v, body %q", registered, rec.Body.String())
		}
		if !gone && (!registered || rec.Body.String() != `{"x":1}`) {
			t.Fatalf("not handed to a live process: registered %v, body %q", registered, rec.Body.String())
		}
	}
}

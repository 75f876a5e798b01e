package embedded

import (
	"bytes"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"
)

// signalWriter collects what is written and closes seen once the output
// holds want.
type signalWriter struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	want string
	seen chan struct{}
	once sync.Once
}

func newSignalWriter(want string) *signalWriter {
	return &signalWriter{want: want, seen: make(chan struct{})}
}

func (w *signalWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	n, err := w.buf.Write(p)
	if strings.Contains(w.buf.String(), w.want) {
		w.once.Do(func() { close(w.seen) })
	}
	return n, err
}

func (w *signalWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// A build that outlasts the grace period is announced, reported alive and
// reported done.
func TestSlowlyAnnouncesASlowBuild(t *testing.T) {
	w := newSignalWriter("still building")
	err := slowly(w, time.Nanosecond, time.Millisecond, versityGWNotice, "versitygw", func() error {
		<-w.seen // return only once a progress line was written
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	out := w.String()
	for _, want := range []string{"building versitygw", "the first run compiles it", "later runs take it from the Go build cache", "  … still building versitygw (", "versitygw built in "} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

// A failed build is not reported as built; its error comes back.
func TestSlowlyReturnsTheBuildError(t *testing.T) {
	w := newSignalWriter("building versitygw")
	boom := errors.New("boom")
	err := slowly(w, time.Nanosecond, time.Hour, versityGWNotice, "versitygw", func() error {
		<-w.seen
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("err %v, want %v", err, boom)
	}
	if out := w.String(); strings.Contains(out, "built in") {
		t.Fatalf("a failed build reported as built:\n%s", out)
	}
}

// A build from the cache, or with no writer, prints nothing.
func TestSlowlyIsSilentWhenQuick(t *testing.T) {
	var out bytes.Buffer
	ran := 0
	if err := slowly(&out, time.Hour, time.Hour, versityGWNotice, "versitygw", func() error { ran++; return nil }); err != nil {
		t.Fatal(err)
	}
	if err := slowly(nil, time.Nanosecond, time.Nanosecond, versityGWNotice, "versitygw", func() error { ran++; return nil }); err != nil {
		t.Fatal(err)
	}
	if ran != 2 || out.Len() != 0 {
		t.Fatalf("ran %d times, output %q: want 2 and none", ran, out.String())
	}
}

package lambdatest

import (
	"strings"
	"testing"
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

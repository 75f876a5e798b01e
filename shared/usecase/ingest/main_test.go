package ingest_test

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/dlqquarantine/dlqq/shared/dev/embedded"
)

var stack *embedded.Stack

// logs collects every log line and metric document of the whole package
// run; payloads collects every payload value the tests use. TestMain fails
// the run if any payload value reached a log line or a metric.
var (
	logs     syncBuffer
	payloads sync.Map
)

type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// secret registers a recognizable payload value and returns it.
func secret(tag string) string {
	v := fmt.Sprintf("PAYLOAD-VALUE-%s-7Q4Z", tag)
	payloads.Store(v, true)
	return v
}

func testLogger() *slog.Logger {
	return slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

func TestMain(m *testing.M) {
	embedded.Main(m, embedded.Options{Log: io.Discard}, &stack, func(code int) int {
		all := logs.String()
		// A whole run must have captured lines, or the check would prove nothing.
		if strings.Count(all, "\n") == 0 && code == 0 && flag.Lookup("test.run").Value.String() == "" {
			fmt.Fprintln(os.Stderr, "no log lines were captured: the leak check would prove nothing")
			code = 1
		}
		payloads.Range(func(k, _ any) bool {
			if strings.Contains(all, k.(string)) {
				fmt.Fprintf(os.Stderr, "payload value %q appears in logs or metrics\n", k)
				code = 1
			}
			return true
		})
		return code
	})
}

package syncio

import (
	"strings"
	"sync"
	"testing"
)

// Concurrent writes land whole, and the buffer reads while written to.
func TestConcurrentWritesLandWhole(t *testing.T) {
	b := NewBuffer()
	var out strings.Builder
	w := NewWriter(&out)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 100 {
				_, _ = b.Write([]byte("line\n"))
				_, _ = w.Write([]byte("line\n"))
				_ = b.String()
			}
		}()
	}
	wg.Wait()
	for _, s := range []string{b.String(), out.String()} {
		if s != strings.Repeat("line\n", 800) {
			t.Fatalf("got %d bytes, want 800 whole lines", len(s))
		}
	}
}

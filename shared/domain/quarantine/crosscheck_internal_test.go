package quarantine

import (
	"strings"
	"testing"
)

// Every test binary checks each seal's bytes against the reference (the
// proof that the direct encoder is jcs over json.Marshal, over every value
// the suite seals), and a difference panics.
func TestSealsAreCrossCheckedInTests(t *testing.T) {
	if !crossChecking() {
		t.Fatal("a test binary does not cross-check its seals")
	}
	defer func() {
		if p := recover(); p == nil || !strings.Contains(p.(string), "differs from gowebpki/jcs") {
			t.Fatalf("a difference did not panic: %v", p)
		}
	}()
	crossCheck(map[string]int{"a": 1}, []byte(`{"a":2}`), nil)
}

// Package testenv sets a test's process environment up: tests of dlqctl
// and dlqlocal run as on a fresh clone, with no DLQQ_* variable left by a
// sourced build/local.env.
package testenv

import (
	"os"
	"strings"
	"testing"
)

// ClearDLQQ unsets every DLQQ_* variable for the test (each restored
// after it), as on a fresh clone where nobody has sourced
// build/local.env. Like t.Setenv, it cannot be used in a parallel test.
func ClearDLQQ(t testing.TB) {
	t.Helper()
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, "DLQQ_") {
			t.Setenv(k, "") // restored after the test
			os.Unsetenv(k)
		}
	}
}

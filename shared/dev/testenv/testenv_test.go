package testenv_test

import (
	"os"
	"testing"

	"github.com/dlqquarantine/dlqq/shared/dev/testenv"
)

// ClearDLQQ unsets every DLQQ_* variable, whatever its name, leaves the
// others, and the test's end restores them.
func TestClearDLQQ(t *testing.T) {
	t.Setenv("DLQQ_TESTENV_ANY", "left")
	t.Setenv("NOT_DLQQ_TESTENV", "kept")
	t.Run("cleared", func(t *testing.T) {
		testenv.ClearDLQQ(t)
		if v, ok := os.LookupEnv("DLQQ_TESTENV_ANY"); ok {
			t.Errorf("DLQQ_TESTENV_ANY is still set: %q", v)
		}
		if os.Getenv("NOT_DLQQ_TESTENV") != "kept" {
			t.Error("NOT_DLQQ_TESTENV was cleared")
		}
	})
	if os.Getenv("DLQQ_TESTENV_ANY") != "left" {
		t.Error("DLQQ_TESTENV_ANY was not restored after the test")
	}
}

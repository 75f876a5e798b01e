package localrunner_test

import (
	"context"
	"strings"
	"testing"

	"github.com/awslabs/goformation/v7/cloudformation"

	"github.com/dlqquarantine/dlqq/shared/dev/embedded"
	"github.com/dlqquarantine/dlqq/shared/dev/localrunner"
)

// A start that fails returns its error and a nil *Local; it does not panic
// on what it had not started yet (the deferred stop once dereferenced the
// nil it returned: every start error showed as a segfault).
func TestStartLocalReturnsItsError(t *testing.T) {
	t.Parallel()
	st := &embedded.Stack{Template: cloudformation.NewTemplate()}
	var l *localrunner.Local
	var err error
	func() {
		defer func() {
			if p := recover(); p != nil {
				t.Fatalf("StartLocal panicked: %v", p)
			}
		}()
		l, err = localrunner.StartLocal(context.Background(), st, localrunner.LocalOptions{BuildDir: t.TempDir()})
	}()
	if err == nil || l != nil || !strings.Contains(err.Error(), "IngestDLQMapping") {
		t.Fatalf("StartLocal on a template without the mapping: %v, %v", l, err)
	}
}

package demo_test

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/dlqquarantine/dlqq/shared/demo"
	"github.com/dlqquarantine/dlqq/shared/embedded"
)

// The demo scenario at a smaller size, asserting the same invariants.
func TestDemoScenarioHoldsInvariants(t *testing.T) {
	ctx := context.Background()
	st, err := embedded.Start(ctx, embedded.Options{Params: demo.StackParams, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var logs bytes.Buffer
	rep, err := demo.Run(ctx, st, demo.Options{Seed: 7, Events: 400, Log: &logs})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	rep.Print(&out, 3)
	if !rep.OK() {
		t.Fatalf("invariants violated:\n%s", out.String())
	}
	if rep.DeadLettered == 0 || rep.ByClass["validation"] == 0 || rep.ByClass["exhausted"] == 0 || rep.Recalled == 0 ||
		rep.Final["RESOLVED"] == 0 || rep.Final["ARCHIVED"] == 0 || rep.Final["QUARANTINED"] == 0 || len(rep.Sweep.Archived) != rep.Final["ARCHIVED"] {
		t.Fatalf("the scenario did not exercise every path:\n%s", out.String())
	}
	if rep.Sent != rep.Consumed+rep.DeadLettered {
		t.Fatalf("sent %d != consumed %d + dead-lettered %d", rep.Sent, rep.Consumed, rep.DeadLettered)
	}
	if strings.Contains(logs.String(), "LOT-") || strings.Contains(logs.String(), "FAC-") {
		t.Fatal("payload values in the functions' logs")
	}
}

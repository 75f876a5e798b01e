package demo_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/dlqquarantine/dlqq/shared/dev/demo"
	"github.com/dlqquarantine/dlqq/shared/dev/embedded"
	"github.com/dlqquarantine/dlqq/shared/dev/faults"
)

// The soak in a shorter form: the whole pipeline under DynamoDB, S3 and SQS
// faults (requests refused, and requests applied whose answer is lost in a
// live process) and crashed redrive, sweeper and ledger processes keeps
// every invariant, and the ledger holds every change once, anchored by a
// signed digest, with counters exact.
// The first request of each faulted kind fails, so a small run is sure to
// meet every kind of fault, and the SDK's backoff is capped lower than
// deployed to save time; the checks do not depend on timing.
func TestSoakUnderFaultsAndCrashes(t *testing.T) {
	ctx := context.Background()
	st := embedded.ForTest(t, embedded.Options{Params: demo.SoakStackParams})
	var logs bytes.Buffer
	rep, err := demo.Soak(ctx, st, demo.SoakOptions{Seed: 11, Messages: 600, FaultRate: 0.05, LostRate: 0.03, CrashShare: 0.6, PerInvocation: 60,
		MaxBackoff: 100 * time.Millisecond, FailFirst: true, Log: &logs})
	out := holds(t, rep, err, rep.Print)
	t.Log(out)
	// The run must have met what it claims to survive.
	for _, k := range append([]string{faults.DynamoDBThrottle, faults.DynamoDB5xx, faults.S3SlowDown, faults.SQSBatchEntry}, faults.LostKinds...) {
		if rep.Faults[k] == 0 {
			t.Errorf("no %s was injected", k)
		}
	}
	if rep.Crashes["redrive"] == 0 || rep.Crashes["sweeper"] == 0 || rep.Crashes["ledger"] == 0 || rep.Crashes["digest"] == 0 {
		t.Errorf("crashes: %v; want redrive, sweeper, ledger and digest processes crashed", rep.Crashes)
	}
	// Every aimed crash happened: a ledger process died after its segment
	// PUT and before the head update, with its segment PUT applied and the
	// answer lost, and with its counters' transaction applied and the
	// answer lost; a digest process with its PUT applied and the answer
	// lost, and after its PUT before the digest head's update.
	if want := len(demo.SoakAims["ledger"]) + len(demo.SoakAims["digest"]); len(rep.AimedCrashes) != want {
		t.Errorf("aimed crashes %q; want all %d", rep.AimedCrashes, want)
	}
	if rep.LedgerRetried == 0 || rep.Ledgered == 0 || rep.Ledgered != rep.StreamChanges || rep.VersionsSum == 0 || len(rep.Lags) != rep.Ledgered {
		t.Errorf("the ledger rows have nothing to check:\n%s", out)
	}
	// The table's checks include the ledger's rows, each checked.
	checks := map[string]bool{}
	for _, c := range rep.Checks() {
		checks[c.What] = c.OK()
	}
	for _, what := range []string{demo.CheckVersionsWritten, demo.CheckVersionsLedgered, demo.CheckAnchoringLag, demo.CheckCounted, demo.CheckLedgerVerify} {
		if ok, found := checks[what]; !found || !ok {
			t.Errorf("check %q: found %v, held %v", what, found, ok)
		}
	}
	if len(checks) < 14 {
		t.Errorf("%d checks, want the soak's 9 and the ledger's 5", len(checks))
	}
	if rep.Final["RESOLVED"] == 0 || rep.Final["ARCHIVED"] == 0 || rep.Final["QUARANTINED"] == 0 || rep.ArchiveObjects == 0 {
		t.Errorf("the soak did not exercise every path:\n%s", out)
	}
	if strings.Contains(logs.String(), "LOT-") || strings.Contains(logs.String(), "FAC-") || strings.Contains(logs.String(), "inv-0") {
		t.Error("payload values in the functions' logs")
	}
}

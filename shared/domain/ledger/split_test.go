package ledger_test

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/dlqquarantine/dlqq/shared/domain/ledger"
)

// splitEnv, set to a number, makes every Verify of this package's tests
// read its input as streams and check its keys in that many partitions.
const splitEnv = "DLQQ_LEDGER_TEST_SPLIT"

func TestMain(m *testing.M) {
	n, err := strconv.Atoi(os.Getenv(splitEnv))
	if err == nil {
		ledger.SplitEveryVerify(n)
	}
	proofs := os.Getenv(proofsEnv) != ""
	if proofs {
		ledger.ProofEveryVerify()
	}
	code := m.Run()
	if err == nil {
		fmt.Printf("%s %d\n", splitRunsLine, ledger.SplitRuns())
		runs, mismatched, first := ledger.HeaderRuns()
		fmt.Printf("%s %d %d\n%s\n", headerRunsLine, runs, mismatched, first)
	}
	if proofs {
		runs, reused, mismatched, first := ledger.ProofRuns()
		fmt.Printf("%s %d %d %d\n%s\n", proofRunsLine, runs, reused, mismatched, first)
	}
	os.Exit(code)
}

// proofsEnv, set, makes every Verify of this package's tests run again
// with the proofs of a run over the first half of its segments and with
// those of a whole run (ledger.ProofEveryVerify).
const proofsEnv = "DLQQ_LEDGER_TEST_PROOFS"

// proofRunsLine opens the line that counts the runs with proofs.
const proofRunsLine = "runs with proofs (runs, reused, mismatched):"

// Every test of this package again, with every Verify made again from the
// proofs of an earlier run (over the first half of its segments, and over
// all): skipping the checks an earlier run passed finds what the whole
// run finds, problem for problem, note for note.
func TestEveryTestAgainWithProofs(t *testing.T) {
	if os.Getenv(proofsEnv) != "" || os.Getenv(splitEnv) != "" {
		return // this is such a run
	}
	t.Parallel()
	// Three tests count the checks made: a run with proofs makes fewer, as
	// it should.
	skip := "^TestEveryTestAgain|^TestCheckAllSeesEveryKeysVersions$|^TestVerifyCallsCheckVersionOnEveryVersion$|^TestProofsSkipOnlyWhatPassedUnderTheirScope$"
	cmd := exec.Command(os.Args[0], "-test.run", "^Test", "-test.skip", skip, "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), proofsEnv+"=1", "TMPDIR="+t.TempDir())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("with proofs: %v\n%s", err, out)
	}
	if n := strings.Count(string(out), "--- PASS: TestVerify"); n < 10 {
		t.Fatalf("with proofs: %d tests of Verify passed, want at least 10:\n%s", n, out)
	}
	i := strings.LastIndex(string(out), proofRunsLine)
	if i < 0 {
		t.Fatalf("with proofs: no %q line:\n%s", proofRunsLine, out)
	}
	var runs, reused, mismatched int
	if _, err := fmt.Sscanf(string(out[i+len(proofRunsLine):]), "%d %d %d", &runs, &reused, &mismatched); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d runs with proofs, %d of them skipped checks", runs, reused)
	switch {
	case mismatched > 0:
		t.Fatalf("%d of %d runs with proofs found something else; the first:\n%s", mismatched, runs, out[i:])
	case runs < 50 || reused < runs/2:
		t.Fatalf("%d runs with proofs, %d skipped checks: want every Verify's (at least 50), most with checks to skip", runs, reused)
	}
}

// splitRunsLine opens the line that says how many runs were split;
// headerRunsLine the one that counts the recounts made again with a
// Verify's segment headers.
const (
	splitRunsLine  = "partitioned runs:"
	headerRunsLine = "recounts with verify's headers (runs, mismatched):"
)

// Every test of this package again, with every Verify reading its
// segments one at a time and its items as a stream, and checking its keys
// in 3 partitions through its spill files: a partitioned run finds what
// one run in memory finds, problem for problem. Every recount of the
// counters is made there twice, the second time with the segment headers
// a Verify over the same segments kept (CounterInput.Headers), and finds
// the same.
func TestEveryTestAgainPartitioned(t *testing.T) {
	if os.Getenv(splitEnv) != "" || os.Getenv(proofsEnv) != "" {
		return // this is such a run
	}
	t.Parallel()
	cmd := exec.Command(os.Args[0], "-test.run", "^Test", "-test.skip", "^TestEveryTestAgain", "-test.count=1", "-test.v")
	tmp := t.TempDir()
	cmd.Env = append(os.Environ(), splitEnv+"=3", "TMPDIR="+tmp)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("partitioned: %v\n%s", err, out)
	}
	if n := strings.Count(string(out), "--- PASS: TestVerify"); n < 10 {
		t.Fatalf("partitioned: %d tests of Verify passed, want at least 10:\n%s", n, out)
	}
	var runs int
	if i := strings.LastIndex(string(out), splitRunsLine); i < 0 {
		t.Fatalf("partitioned: no %q line:\n%s", splitRunsLine, out)
	} else if _, err := fmt.Sscanf(string(out[i+len(splitRunsLine):]), "%d", &runs); err != nil || runs < 50 {
		t.Fatalf("partitioned: %d runs split (%v), want every Verify's (at least 50)", runs, err)
	}
	var recounts, mismatched int
	if i := strings.LastIndex(string(out), headerRunsLine); i < 0 {
		t.Fatalf("partitioned: no %q line:\n%s", headerRunsLine, out)
	} else if _, err := fmt.Sscanf(string(out[i+len(headerRunsLine):]), "%d %d", &recounts, &mismatched); err != nil || recounts < 10 || mismatched > 0 {
		t.Fatalf("partitioned: %d recounts made again with a Verify's headers, %d found something else (%v), want at least 10 and none:\n%s", recounts, mismatched, err, out[i:])
	}
	t.Logf("%d recounts made again with a Verify's headers", recounts)
	// Each run removes its spill files.
	left, err := os.ReadDir(tmp)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range left {
		if strings.HasPrefix(e.Name(), "dlqq-verify-") {
			t.Errorf("spill directory %s left behind", e.Name())
		}
	}
}

// A read that fails fails the run: never a result that passes.
func TestVerifyFailsOnAReadThatFails(t *testing.T) {
	t.Parallel()
	for name, tamper := range map[string]func(in *ledger.Input){
		"a segment unreadable": func(in *ledger.Input) {
			read := in.ReadSegment
			in.ReadSegment = func(key string) ([]byte, error) {
				if key == in.SegmentKeys[len(in.SegmentKeys)-1] {
					return nil, errors.New("gone")
				}
				return read(key)
			}
		},
		"the table unreadable": func(in *ledger.Input) {
			in.ScanItems = func(func(ledger.Item) error) error { return errors.New("throttled") }
		},
	} {
		for _, partitions := range []int{0, 3} {
			t.Run(fmt.Sprintf("%s, %d partitions", name, partitions), func(t *testing.T) {
				f := standard(t)
				if res, err := ledger.VerifyErr(f.input()); err != nil || !res.OK() {
					t.Fatalf("untouched: %v, %v", err, res.Problems)
				}
				input := func() ledger.Input {
					in := streamed(f.input(), partitions, t.TempDir())
					tamper(&in)
					return in
				}
				if _, err := ledger.VerifyErr(input()); err == nil {
					t.Fatal("no error")
				}
				if res := ledger.Verify(input()); res.OK() || !slices.ContainsFunc(res.Problems, func(p ledger.Problem) bool { return p.Kind == ledger.KindUnchecked }) {
					t.Fatalf("Verify: %v", res.Problems)
				}
			})
		}
	}
}

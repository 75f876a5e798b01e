package ledger_test

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/dlqquarantine/dlqq/shared/domain/ledger"
)

// splitEnv, set to a number, makes every Verify of this package's tests
// read its input as streams and check its keys in that many partitions.
const splitEnv = "DLQQ_LEDGER_TEST_SPLIT"

func TestMain(m *testing.M) {
	if n, err := strconv.Atoi(os.Getenv(splitEnv)); err == nil {
		ledger.SplitEveryVerify(n)
	}
	os.Exit(m.Run())
}

// Every test of this package again, with every Verify reading its
// segments one at a time and its items as a stream, and checking its keys
// in 3 partitions through its spill files: a partitioned run finds what
// one run in memory finds, problem for problem.
func TestEveryTestAgainPartitioned(t *testing.T) {
	if os.Getenv(splitEnv) != "" {
		return // this is the partitioned run
	}
	t.Parallel()
	cmd := exec.Command(os.Args[0], "-test.run", "^Test", "-test.skip", "^TestEveryTestAgainPartitioned$", "-test.count=1", "-test.v")
	tmp := t.TempDir()
	cmd.Env = append(os.Environ(), splitEnv+"=3", "TMPDIR="+tmp)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("partitioned: %v\n%s", err, out)
	}
	if n := strings.Count(string(out), "--- PASS: TestVerify"); n < 10 {
		t.Fatalf("partitioned: %d tests of Verify passed, want at least 10:\n%s", n, out)
	}
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

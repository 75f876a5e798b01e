package main

import (
	"context"
	"errors"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/dlqquarantine/dlqq/internal/dlqctl"
	"github.com/dlqquarantine/dlqq/shared/dev/syncio"
	"github.com/dlqquarantine/dlqq/shared/dev/testenv"
)

// make demo runs `dlqlocal demo` to its end: the report, then dlqctl
// buckets and dlqctl verify against the demo's own stack, whose names are
// random, with no DLQQ_* variable to help. It exits 0, and a failing step
// would say which one.
func TestDemoRunsToItsEnd(t *testing.T) {
	testenv.ClearDLQQ(t)
	stdout, stderr := syncio.NewBuffer(), syncio.NewBuffer()
	code := run([]string{"demo", "-events", "400", "-seed", "7"}, stdout, stderr)
	out := stdout.String()
	if code != 0 {
		t.Fatalf("dlqlocal demo exited %d\nstderr:\n%s\nstdout (tail):\n%s", code, stderr.String(), tail(out))
	}
	for _, want := range []string{"invariants:", "$ dlqctl buckets", "$ dlqctl verify", ": 0 problems\nledger: ", "signed"} {
		if !strings.Contains(out, want) {
			t.Errorf("the demo's output lacks %q:\n%s", want, tail(out))
		}
	}
	if missing := missingExcerptLines(t, "../../README.md", out); len(missing) > 0 {
		t.Errorf("README.md's excerpt of the demo's report has lines the demo does not print (numbers aside):\n%s\n\nthe demo printed:\n%s", strings.Join(missing, "\n"), out)
	}
	if strings.Contains(out, "not checked (--no-ledger)") {
		t.Error("the demo's verify did not check the ledger")
	}
	// verify checks writer proofs with the stack's keys: every version
	// the demo writes (the functions', the lead's policy) is proved.
	if !regexp.MustCompile(`writer proofs since digest #\d+: [1-9]\d* versions proved`).MatchString(out) || strings.Contains(out, "writer proofs not checked") || strings.Contains(out, "writer-") {
		t.Errorf("the demo's verify did not check writer proofs, or named a version:\n%s", tail(out))
	}
	if strings.Contains(out, "[FAIL") || strings.Contains(stderr.String(), "failed") || strings.Contains(stderr.String(), "violated") {
		t.Errorf("the demo reported a failure:\nstderr:\n%s", stderr.String())
	}
}

// A dlqctl step of the demo that fails says which step, with dlqctl's exit
// code and error, and is not reported as a violated invariant.
func TestDemoNamesTheStepThatFailed(t *testing.T) {
	stdout, stderr := syncio.NewBuffer(), syncio.NewBuffer()
	noAWS := func(context.Context, string, string) (*dlqctl.Clients, error) {
		return nil, errors.New("no AWS here")
	}
	code := demoCtl(context.Background(), noAWS, stdout, stderr, []string{"--table", "t", "buckets"})
	if code != dlqctl.ExitFailure {
		t.Errorf("exit %d, want %d", code, dlqctl.ExitFailure)
	}
	if want := "dlqctl buckets failed (exit 1): no AWS here\n"; !strings.HasSuffix(stderr.String(), want) {
		t.Errorf("stderr %q, want it to end in %q", stderr.String(), want)
	}
	if !strings.Contains(stdout.String(), "$ dlqctl buckets") {
		t.Errorf("stdout %q does not show the command", stdout.String())
	}
}

// missingExcerptLines returns the lines of the README's demo excerpt (the
// fenced block after the demo-excerpt marker) that have the shape of no
// line in out: counts, ages and plurals aside, since the test runs a
// smaller demo than make demo.
func missingExcerptLines(t *testing.T, readme, out string) []string {
	t.Helper()
	raw, err := os.ReadFile(readme)
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(raw), "<!-- demo-excerpt")
	if !ok {
		t.Fatalf("%s has no demo-excerpt marker", readme)
	}
	_, rest, _ = strings.Cut(rest, "```text\n")
	block, _, ok := strings.Cut(rest, "```")
	if !ok || strings.TrimSpace(block) == "" {
		t.Fatalf("%s: no fenced block after the demo-excerpt marker", readme)
	}
	printed := map[string]bool{}
	for _, l := range strings.Split(out, "\n") {
		printed[shape(l)] = true
	}
	var missing []string
	for _, l := range strings.Split(block, "\n") {
		if strings.TrimSpace(l) != "" && !printed[shape(l)] {
			missing = append(missing, l)
		}
	}
	return missing
}

var (
	ageShape   = regexp.MustCompile(`[0-9][0-9hms.]* ago`)
	numShape   = regexp.MustCompile(`[0-9]+`)
	pluralWord = regexp.MustCompile(`N ([a-z]+?)s\b`)
)

// shape is a line with its numbers as N, its ages as AGE and the word
// after a number in the singular.
func shape(l string) string {
	l = ageShape.ReplaceAllString(strings.TrimRight(l, " "), "AGE ago")
	l = numShape.ReplaceAllString(l, "N")
	return pluralWord.ReplaceAllString(l, "N $1")
}

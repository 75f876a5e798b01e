package main

import (
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/dlqquarantine/dlqq/shared/dev/syncio"
	"github.com/dlqquarantine/dlqq/shared/dev/testenv"
)

var (
	projectedLine = regexp.MustCompile(`^projected sustained ingest: (\d+) msgs/s per table \(limited by (.+)\)$`)
	limitLine     = regexp.MustCompile(`^limit: (.+): (\d+ msgs/s|unbounded) \(.+\)$`)
)

// make capacity runs `dlqlocal capacity` (the Makefile's recipe, checked
// below): here at a small scale. Its last line is the projection, whose
// N is the smallest of the limits it printed and whose WHAT is that
// limit's name; docs/operations.md shows an excerpt of its output with
// exactly the lines it prints.
func TestCapacityCommand(t *testing.T) {
	testenv.ClearDLQQ(t)
	stdout, stderr := syncio.NewBuffer(), syncio.NewBuffer()
	if code := run([]string{"capacity", "-messages", "400", "-seed", "3"}, stdout, stderr); code != 0 {
		t.Fatalf("dlqlocal capacity exited %d\nstderr:\n%s\nstdout:\n%s", code, stderr.String(), stdout.String())
	}
	lines := strings.Split(strings.TrimRight(stdout.String(), "\n"), "\n")
	m := projectedLine.FindStringSubmatch(lines[len(lines)-1])
	if m == nil {
		t.Fatalf("the last line is not the projection:\n%s", stdout.String())
	}
	n, _ := strconv.Atoi(m[1])
	best, name := -1, ""
	for _, l := range lines {
		lm := limitLine.FindStringSubmatch(l)
		if lm == nil || lm[2] == "unbounded" {
			continue
		}
		rate, _ := strconv.Atoi(strings.TrimSuffix(lm[2], " msgs/s"))
		if best < 0 || rate < best {
			best, name = rate, lm[1]
		}
	}
	if best != n || name != m[2] {
		t.Errorf("projected %d limited by %q; the smallest limit printed is %d, %q:\n%s", n, m[2], best, name, stdout.String())
	}
	for _, want := range []string{"storm: 400 messages from 50 sources", "indexes (from infra/template.yaml): ", "limit: partition key ", "limit: the ledger's stream shards: ",
		"limit: IngestMaxConcurrency ", "per million messages: DynamoDB writes: "} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("the output lacks %q:\n%s", want, stdout.String())
		}
	}
	// Every call the storm makes has a latency in the model.
	if strings.Contains(stdout.String(), "calls without a latency in the model") {
		t.Errorf("the latency model misses calls the storm makes:\n%s", stdout.String())
	}
	// docs/operations.md's excerpt has the lines the command prints, by
	// their labels (the text before the first colon).
	doc, err := os.ReadFile("../../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(doc), "<!-- capacity-excerpt -->")
	if !ok {
		t.Fatal("docs/operations.md has no capacity-excerpt marker")
	}
	_, rest, _ = strings.Cut(rest, "```text\n")
	block, _, _ := strings.Cut(rest, "```")
	excerpt := strings.Split(strings.TrimRight(block, "\n"), "\n")
	if got, want := labels(excerpt), labels(lines); !slices.Equal(got, want) {
		t.Errorf("the excerpt's lines are %q, the command prints %q", got, want)
	}
	if !projectedLine.MatchString(excerpt[len(excerpt)-1]) {
		t.Errorf("the excerpt does not end with the projection: %q", excerpt[len(excerpt)-1])
	}
	// The Makefile's target runs this command.
	mk, err := os.ReadFile("../../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(mk), "capacity:\n\t$(GO) run ./cmd/dlqlocal capacity -messages $(CAPACITY_MESSAGES)\n") {
		t.Error("the Makefile's capacity target does not run dlqlocal capacity")
	}
}

// labels are the distinct line labels, in order of first appearance.
func labels(lines []string) []string {
	var out []string
	for _, l := range lines {
		label, _, _ := strings.Cut(l, ":")
		label = numShape.ReplaceAllString(label, "N")
		if strings.HasPrefix(label, "hottest partition key of ") {
			label = "hottest partition key of X" // one line each for the table and every index
		}
		if !slices.Contains(out, label) {
			out = append(out, label)
		}
	}
	return out
}

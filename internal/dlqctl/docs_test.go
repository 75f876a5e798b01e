package dlqctl_test

import (
	"bytes"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/dlqquarantine/dlqq/internal/dlqctl"
	"github.com/dlqquarantine/dlqq/shared/runtime/stackoutputs"
)

// docs/dlqctl.md documents every command and flag as cobra defines them:
// each command has a row, each of its flags (with its default) is in the
// row's flags column, and no flag in that column is one it does not have.
func TestDocsDescribeEveryCommandAndFlag(t *testing.T) {
	t.Setenv("DLQQ_STACK", "")
	raw, err := os.ReadFile("../../docs/dlqctl.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(raw)
	rows := map[string][]string{} // command path → cells
	for _, line := range strings.Split(doc, "\n") {
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		cells := strings.Split(strings.ReplaceAll(line, `\|`, "¦"), "|")[1:]
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		first := strings.Trim(cells[0], "`")
		var words []string
		for _, w := range strings.Fields(first) {
			if w == strings.ToUpper(w) || strings.HasPrefix(w, "-") {
				break
			}
			words = append(words, w)
		}
		rows[strings.Join(words, " ")] = cells
	}
	flagToken := regexp.MustCompile("`(--[a-z][a-z-]*)")
	root := dlqctl.NewApp(strings.NewReader(""), &bytes.Buffer{}, &bytes.Buffer{}).Root()
	root.PersistentFlags().VisitAll(func(f *pflag.Flag) {
		if !strings.Contains(doc, "| `--"+f.Name+"`") && !strings.Contains(doc, "`--"+f.Name+"`, `") && !strings.Contains(doc, ", `--"+f.Name+"`") {
			t.Errorf("global flag --%s is not in the global flags table", f.Name)
		}
	})
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, sub := range c.Commands() {
			if sub.Name() == "help" || sub.Name() == "completion" || sub.Hidden {
				continue
			}
			if sub.HasSubCommands() {
				walk(sub)
				continue
			}
			path := strings.TrimPrefix(sub.CommandPath(), "dlqctl ")
			cells, ok := rows[path]
			if !ok || len(cells) < 3 {
				t.Errorf("command %q has no row in docs/dlqctl.md", path)
				continue
			}
			flags := cells[1]
			sub.LocalFlags().VisitAll(func(f *pflag.Flag) {
				if f.Name == "help" {
					return
				}
				if !strings.Contains(flags, "`--"+f.Name) {
					t.Errorf("%s: --%s is not documented", path, f.Name)
				}
				if def := strings.TrimSuffix(f.DefValue, "0s"); f.DefValue != "" && f.DefValue != "0" && f.DefValue != "false" && f.DefValue != "[]" && !strings.Contains(flags, def) {
					t.Errorf("%s: --%s's default %s is not documented", path, f.Name, f.DefValue)
				}
			})
			for _, m := range flagToken.FindAllStringSubmatch(flags, -1) {
				if sub.Flags().Lookup(strings.TrimPrefix(m[1], "--")) == nil {
					t.Errorf("%s: the docs list %s, which it does not have", path, m[1])
				}
			}
		}
	}
	walk(root)
}

// docs/operations.md sets dlqctl up with DLQQ_STACK alone (the stack's
// outputs give the rest), and docs/dlqctl.md's --stack row names every
// output dlqctl reads.
func TestDocsSetDlqctlUpWithTheStack(t *testing.T) {
	raw, err := os.ReadFile("../../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(raw)
	_, after, ok := strings.Cut(doc, "Set dlqctl up once:\n\n```sh\n")
	block, _, closed := strings.Cut(after, "```")
	if !ok || !closed {
		t.Fatal(`docs/operations.md has no "Set dlqctl up once:" sh block`)
	}
	if strings.TrimSpace(block) != "export DLQQ_STACK=$STACK" {
		t.Errorf("docs/operations.md sets dlqctl up with\n%s\nwant the one line export DLQQ_STACK=$STACK", block)
	}
	for _, v := range regexp.MustCompile(`export (DLQQ_[A-Z_]+)`).FindAllStringSubmatch(doc, -1) {
		if v[1] != "DLQQ_STACK" {
			t.Errorf("docs/operations.md exports %s, which the stack's outputs give", v[1])
		}
	}
	raw, err = os.ReadFile("../../docs/dlqctl.md")
	if err != nil {
		t.Fatal(err)
	}
	_, row, _ := strings.Cut(string(raw), "| `--stack` |")
	row, _, _ = strings.Cut(row, "\n")
	for _, o := range stackoutputs.DLQCTL() {
		if !strings.Contains(row, "`"+o+"`") {
			t.Errorf("docs/dlqctl.md's --stack row does not name the output %s", o)
		}
	}
}

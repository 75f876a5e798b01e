package dlqctl

import (
	"errors"
	"fmt"
	"runtime/debug"
	"sort"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// What the root command adds to the tree: --version, the exit codes in
// its help, an example in every command's help, and errors for a
// mistyped command or flag that name the one meant.

// NotExecutedError is a change that was planned but not made because no
// one confirmed it: redrive without --yes when stdin is not a terminal,
// or a no at the prompt. It exits with ExitNotExecuted.
type NotExecutedError struct{ Why string }

func (e *NotExecutedError) Error() string { return "not executed: " + e.Why }

// exitCodesHelp lists the exit codes (the root help's Long).
const exitCodesHelp = `Exit codes:
  0  ok
  1  the operation failed
  2  usage: a bad command line (nothing was sent)
  3  verification mismatch (verify found problems, or park, unpark or show --payload held a record that fails verification)
  4  not executed: redrive planned a change that was not confirmed (pass --yes when not on a terminal), or a high-risk action waits for a second person's approval (dlqctl approvals)`

// suggestDistance is the Levenshtein distance within which a mistyped
// command or flag is answered with the one meant.
const suggestDistance = 2

// examples are the Example text of each command, by its path below the root.
var examples = map[string]string{
	"approvals":             "  dlqctl approvals ls --source orders\n  dlqctl approvals approve --source orders 0f3c9a1e2b4d6c8e0a12 --reason 'checked the plan'",
	"approvals ls":          "  dlqctl approvals ls --source orders\n  dlqctl approvals ls --source orders --all -o json",
	"approvals show":        "  dlqctl approvals show --source orders 0f3c9a1e2b4d6c8e0a12",
	"approvals approve":     "  dlqctl approvals approve --source orders 0f3c9a1e2b4d6c8e0a12 --reason 'checked the plan'",
	"approvals reject":      "  dlqctl approvals reject --source orders 0f3c9a1e2b4d6c8e0a12 --reason 'not before the consumer is fixed'",
	"ls":                    "  dlqctl ls\n  dlqctl ls --status all --source orders --older-than 2h\n  dlqctl ls --held -o json",
	"show":                  "  dlqctl show 'orders#o1'\n  dlqctl show 'orders#0123456789ab…'\n  dlqctl show 'orders#o1' --payload --diff",
	"fix":                   "  dlqctl fix 'orders#o1' --payload-file fixed.json --reason 'NDC typo, INC-42'",
	"buckets":               "  dlqctl buckets\n  dlqctl buckets --source orders -o json",
	"verify":                "  dlqctl verify\n  dlqctl verify --no-ledger\n  dlqctl verify --offline ./copy --public-key ./copy/public-key.der\n  dlqctl verify --checkpoint ~/audit/checkpoint --checkpoint-key ~/audit/checkpoint.key",
	"ledger export":         "  dlqctl ledger export ./copy",
	"ledger checkpoint-key": "  dlqctl ledger checkpoint-key ~/audit/checkpoint.key",
	"redrive":               "  dlqctl redrive --source orders --cleared 'consumer|timeout calling billing|'\n  dlqctl redrive --source orders --id 'orders#o1' --yes\n  dlqctl redrive --source orders --max 500 --rate 20 --yes -o json\n  dlqctl redrive --source orders --include-parked --id 'orders#o7' --reason 'recall lifted (QA-118)' --yes",
	"park":                  "  dlqctl park 'orders#o1' --reason 'fraud team reviews it'",
	"unpark":                "  dlqctl unpark 'orders#o1' --reason 'cleared by the fraud team'",
	"health":                "  dlqctl health\n  dlqctl health --stack dlqq --window 1h -o json",
	"policy add":            "  dlqctl policy add --source orders --signature 'consumer|timeout calling billing|' --max-per-run 50 --expires 24h --note INC-42",
	"policy ls":             "  dlqctl policy ls --source orders",
	"policy rm":             "  dlqctl policy rm pol-0123456789ab --source orders --reason 'outage over'",
	"policy resume":         "  dlqctl policy resume pol-0123456789ab --source orders --reason 'consumer fixed'",
	"policy":                "  dlqctl policy ls --source orders",
	"ledger":                "  dlqctl ledger export ./copy\n  dlqctl ledger checkpoint-key ~/audit/checkpoint.key",
	"index":                 "  dlqctl index backfill",
	"index backfill":        "  dlqctl index backfill\n  dlqctl index backfill -o json",
}

// finishRoot adds the version, the exit codes, the examples and the
// suggestions to the tree under root.
func (a *App) finishRoot(root *cobra.Command) {
	root.Version = Version()
	root.SetVersionTemplate("dlqctl {{.Version}}\n")
	root.Long = root.Short + "\n\n" + exitCodesHelp
	root.SuggestionsMinimumDistance = suggestDistance
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, sub := range c.Commands() {
			path := strings.TrimPrefix(sub.CommandPath(), "dlqctl ")
			if ex, ok := examples[path]; ok && sub.Example == "" {
				sub.Example = ex
			}
			if sub.HasSubCommands() {
				sub.SuggestionsMinimumDistance = suggestDistance
				if sub.RunE == nil && sub.Run == nil {
					sub.Args = cobra.ArbitraryArgs
					sub.RunE = unknownSubcommand
				}
			}
			walk(sub)
		}
	}
	walk(root)
}

// unknownSubcommand is the run of a command that only groups others
// (policy, ledger): without an argument it prints its help; with one, it
// is a usage error suggesting the subcommand meant.
func unknownSubcommand(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		return cmd.Help()
	}
	msg := fmt.Sprintf("unknown command %q for %q", args[0], cmd.CommandPath())
	if s := closest(cmd.SuggestionsFor(args[0]), args[0]); len(s) > 0 {
		msg += "; did you mean " + strings.Join(s, " or ") + "?"
	} else {
		msg += fmt.Sprintf("; see %s --help", cmd.CommandPath())
	}
	return &UsageError{errors.New(msg)}
}

// closest narrows suggestions to those typed begins, when there are any:
// "ad" means add, not ls or rm (as near by distance).
func closest(suggestions []string, typed string) []string {
	var prefixed []string
	for _, s := range suggestions {
		if strings.HasPrefix(s, strings.ToLower(typed)) {
			prefixed = append(prefixed, s)
		}
	}
	if len(prefixed) > 0 {
		return prefixed
	}
	return suggestions
}

// flagError is the root's flag error function: a usage error, and for an
// unknown flag the one meant ("unknown flag --stauts; did you mean
// --status?").
func flagError(cmd *cobra.Command, err error) error {
	msg := err.Error()
	if name, ok := strings.CutPrefix(msg, "unknown flag: --"); ok {
		name, _, _ = strings.Cut(name, "=")
		if s := closest(suggestFlags(cmd.Flags(), name), name); len(s) > 0 {
			return &UsageError{fmt.Errorf("unknown flag --%s; did you mean --%s?", name, strings.Join(s, " or --"))}
		}
		return &UsageError{fmt.Errorf("unknown flag --%s; see %s --help", name, cmd.CommandPath())}
	}
	return &UsageError{err}
}

// suggestFlags are the flags of fs (its own and those inherited) within
// suggestDistance of name, or that it begins, sorted.
func suggestFlags(fs *pflag.FlagSet, name string) []string {
	var out []string
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Hidden || f.Name == "help" {
			return
		}
		if levenshtein(strings.ToLower(name), f.Name) <= suggestDistance || (len(name) > 1 && strings.HasPrefix(f.Name, strings.ToLower(name))) {
			out = append(out, f.Name)
		}
	})
	sort.Strings(out)
	return out
}

func levenshtein(s, t string) int {
	a, b := []rune(s), []rune(t)
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}

// Version is dlqctl's module version and VCS revision, from the build
// information: "(devel)" for a version and "unknown" for a revision the
// build did not record.
func Version() string {
	info, ok := debug.ReadBuildInfo()
	return versionOf(info, ok)
}

func versionOf(info *debug.BuildInfo, ok bool) string {
	version, revision, modified := "(devel)", "unknown", false
	if ok && info != nil {
		if v := info.Main.Version; v != "" {
			version = v
		}
		for _, s := range info.Settings {
			switch s.Key {
			case "vcs.revision":
				if s.Value != "" {
					revision = s.Value
				}
			case "vcs.modified":
				modified = s.Value == "true"
			}
		}
	}
	if modified {
		revision += " (modified)"
	}
	return fmt.Sprintf("%s, revision %s", version, revision)
}

// oneArg is the Args of a command that takes one argument, what (a
// record id, a directory): given none or several, it says what it wants.
func oneArg(what string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		switch len(args) {
		case 1:
			return nil
		case 0:
			return &UsageError{fmt.Errorf("%s needs %s", cmd.Name(), what)}
		}
		return &UsageError{fmt.Errorf("%s takes one argument, %s; got %d", cmd.Name(), what, len(args))}
	}
}

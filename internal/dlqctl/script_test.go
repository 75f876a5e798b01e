package dlqctl_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/dlqquarantine/dlqq/internal/dlqctl"
)

// Safe to script: --version, the exit codes in the root help, an example
// in every command's help, one JSON document from every command, and the
// same answer to the same bad input everywhere.

// jsonDoc decodes out as exactly one JSON document and fails the test on
// a null anywhere in it (an empty list is [], an absent object is left
// out) and on an empty run_id or action.
func jsonDoc(t *testing.T, what, out string) any {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(out))
	var doc any
	if err := dec.Decode(&doc); err != nil {
		t.Fatalf("%s -o json: %v\n%s", what, err, out)
	}
	if dec.More() {
		t.Fatalf("%s -o json: more than one JSON document:\n%s", what, out)
	}
	var walk func(path string, v any)
	walk = func(path string, v any) {
		switch v := v.(type) {
		case nil:
			t.Errorf("%s -o json: %s is null:\n%s", what, path, out)
		case map[string]any:
			for k, x := range v {
				if (k == "run_id" || k == "action") && x == "" {
					t.Errorf("%s -o json: %s.%s is empty", what, path, k)
				}
				walk(path+"."+k, x)
			}
		case []any:
			for i, x := range v {
				walk(fmt.Sprintf("%s[%d]", path, i), x)
			}
		}
	}
	walk("", doc)
	return doc
}

// field reads a top-level field of a JSON object.
func field(doc any, name string) any {
	m, _ := doc.(map[string]any)
	return m[name]
}

func TestVersionExitCodesAndExamples(t *testing.T) {
	t.Parallel()
	var out, errw bytes.Buffer
	a := dlqctl.NewApp(strings.NewReader(""), &out, &errw)
	if code := a.Main(context.Background(), []string{"--version"}); code != 0 || !regexp.MustCompile(`^dlqctl \S+, revision \S+( \(modified\))?\n$`).MatchString(out.String()) {
		t.Fatalf("dlqctl --version (exit %d): %q %q", code, out.String(), errw.String())
	}
	if !strings.HasPrefix(out.String(), "dlqctl "+dlqctl.Version()+"\n") {
		t.Fatalf("dlqctl --version: %q, want %q", out.String(), dlqctl.Version())
	}
	out.Reset()
	if code := a.Main(context.Background(), []string{"--help"}); code != 0 {
		t.Fatalf("dlqctl --help: exit %d", code)
	}
	for _, want := range []string{"Exit codes:", "\n  0  ok", "\n  1  ", "\n  2  usage", "\n  3  verification mismatch", fmt.Sprintf("\n  %d  not executed", dlqctl.ExitNotExecuted)} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the root help lacks %q:\n%s", want, out.String())
		}
	}
	if dlqctl.ExitNotExecuted != 4 {
		t.Errorf("ExitNotExecuted is %d, want 4", dlqctl.ExitNotExecuted)
	}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, sub := range c.Commands() {
			if !strings.Contains(sub.Example, "dlqctl "+strings.TrimPrefix(sub.CommandPath(), "dlqctl ")) {
				t.Errorf("%s: no example of it in its help (%q)", sub.CommandPath(), sub.Example)
			}
			walk(sub)
		}
	}
	walk(dlqctl.NewApp(strings.NewReader(""), &bytes.Buffer{}, &bytes.Buffer{}).Root())
}

// Bad input with no AWS call: each gets a usage error that says what was
// meant or wanted.
func TestBadInputIsAnsweredClearly(t *testing.T) {
	t.Parallel()
	payload := filepath.Join(t.TempDir(), "p.json")
	if err := os.WriteFile(payload, []byte(`{}`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args      []string
		want      string
		notWanted string
	}{
		{[]string{"show"}, "dlqctl: show needs a record id (from dlqctl ls)\n", ""},
		{[]string{"show", "a#1", "b#2"}, "show takes one argument, a record id (from dlqctl ls); got 2", ""},
		{[]string{"park"}, "park needs a record id (from dlqctl ls)", ""},
		{[]string{"policy", "rm", "--source", "s", "--reason", "r"}, "rm needs a policy id (from dlqctl policy ls)", ""},
		{[]string{"ledger", "export"}, "export needs a directory to export into", ""},
		{[]string{"ls", "--stauts", "all"}, "dlqctl: unknown flag --stauts; did you mean --status?\n", ""},
		{[]string{"redrive", "--sourc", "s"}, "unknown flag --sourc; did you mean --source?", ""},
		{[]string{"ls", "--tabel", "t"}, "unknown flag --tabel; did you mean --table?", ""},
		{[]string{"ls", "--zzzzzz"}, "unknown flag --zzzzzz; see dlqctl ls --help", ""},
		{[]string{"lss"}, "unknown command \"lss\" for \"dlqctl\"\n\nDid you mean this?\n\tls", ""},
		{[]string{"redirve"}, "Did you mean this?\n\tredrive", ""},
		{[]string{"policy", "ad"}, `unknown command "ad" for "dlqctl policy"; did you mean add?`, ""},
		{[]string{"fix", "s#k", "--reason", "r"}, "dlqctl: --payload-file is required\n", "--reason"},
		{[]string{"fix", "s#k", "--payload-file", payload}, "dlqctl: --reason is required\n", "--payload-file"},
		{[]string{"fix", "s#k"}, "dlqctl: --payload-file and --reason are required\n", ""},
		{[]string{"policy", "rm", "pol-1", "--source", "s"}, "dlqctl: --reason is required\n", "--source"},
		{[]string{"policy", "resume", "pol-1", "--reason", "r"}, "dlqctl: --source is required\n", "--reason"},
		{[]string{"ls", "-o", "yaml"}, `--output "yaml": want table or json`, ""},
		{[]string{"park", "s#k", "--reason", "r", "-o", "xml"}, `--output "xml": want table or json`, ""},
	} {
		errOut, code := offline(t, c.args...)
		if code != dlqctl.ExitUsage || !strings.Contains(errOut, c.want) || (c.notWanted != "" && strings.Contains(errOut, c.notWanted)) {
			t.Errorf("%v: exit %d: %q, want %q", c.args, code, errOut, c.want)
		}
	}
}

// One rule for case in every enum flag: any case, normalized. Offline
// for the flags parsed before a request (redrive's and policy add's
// --class), against the stack for ls's --status and --class and -o.
func TestEnumFlagsIgnoreCase(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	for _, cls := range []string{"exhausted", "EXHAUSTED", "Exhausted"} {
		req, err := (dlqctl.RedriveOptions{Source: "orders", Classes: cls + ",Validation", Max: 10, BatchSize: 10}).Request("alice", now)
		if err != nil || len(req.Classes) != 2 || req.Classes[0] != "exhausted" || req.Classes[1] != "validation" {
			t.Errorf("redrive --class %s,Validation: %v %v", cls, req.Classes, err)
		}
		spec, err := (dlqctl.PolicyAddOptions{Source: "orders", Classes: cls, MinAge: time.Hour, MaxPerRun: 5, Expires: "24h"}).Spec(now)
		if err != nil || len(spec.Classes) != 1 || spec.Classes[0] != "exhausted" {
			t.Errorf("policy add --class %s: %v %v", cls, spec.Classes, err)
		}
	}
	f := newFixture(t)
	for _, c := range []struct {
		flag      string
		canonical []string
		variants  [][]string
	}{
		{"--status", []string{"--status", "QUARANTINED,PARKED"}, [][]string{{"--status", "quarantined,parked"}, {"--status", "Quarantined, Parked"}}},
		{"--status all", []string{"--status", "all"}, [][]string{{"--status", "ALL"}, {"--status", "All"}}},
		{"--class", []string{"--status", "all", "--class", "exhausted"}, [][]string{{"--status", "all", "--class", "EXHAUSTED"}, {"--status", "all", "--class", "Exhausted"}}},
		{"-o", []string{"-o", "json"}, [][]string{{"-o", "JSON"}, {"--output", "Json"}}},
	} {
		want, errOut, code := f.run(t, append([]string{"ls"}, c.canonical...)...)
		if code != 0 || want == "" {
			t.Fatalf("ls %v (exit %d): %s", c.canonical, code, errOut)
		}
		for _, v := range c.variants {
			if got, errOut, code := f.run(t, append([]string{"ls"}, v...)...); code != 0 || got != want {
				t.Errorf("%s: ls %v (exit %d) differs from ls %v:\n%s%s", c.flag, v, code, c.canonical, got, errOut)
			}
		}
	}
}

// An unknown --source is an error in ls, buckets and health as in
// redrive: by the redrive function's SOURCES, in its words; a configured
// one is listed, and so is one that is not configured but has records
// (ingest keeps them), with a note.
func TestAnUnknownSourceIsAnErrorEverywhere(t *testing.T) {
	f := newFixture(t)
	f.startRedrive(t, oneOperator(t, ordersSources))
	for _, args := range [][]string{{"ls"}, {"buckets"}, {"health", "--stack", f.st.Env.StackName}, {"redrive"}} {
		out, errOut, code := f.runAt(t, time.Now(), append(args, "--source", "nope")...)
		if code != dlqctl.ExitUsage || out != "" || !strings.Contains(errOut, `dlqctl: --source "nope": source is not configured (the redrive function `+f.function+" configures orders)") {
			t.Errorf("%v --source nope (exit %d): %s%s", args, code, out, errOut)
		}
		want := 0
		if args[0] == "redrive" {
			want = dlqctl.ExitNotExecuted // the plan, without --yes
		}
		if out, errOut, code := f.runAt(t, time.Now(), append(args, "--source", "orders")...); code != want || strings.Contains(errOut, "not configured") {
			t.Errorf("%v --source orders (exit %d): %s%s", args, code, out, errOut)
		}
	}
	other := createConfiguredFunction(t, f.st, map[string]string{"SOURCES": strings.ReplaceAll(ordersSources, `"orders"`, `"o2"`)})
	for _, args := range [][]string{{"ls"}, {"buckets"}} {
		out, errOut, code := f.run(t, append([]string{"--function", other}, append(args, "--source", "orders")...)...)
		if code != 0 || !strings.Contains(out, "orders#o1") || errOut != `note: source "orders" is not configured in the redrive function `+other+": its records are shown, but cannot be replayed\n" {
			t.Errorf("%v --source orders, records of a source not configured (exit %d): %s%s", args, code, out, errOut)
		}
	}
	// When the SOURCES cannot be read the source is not checked, and ls
	// says so.
	f.function = ""
	if out, errOut, code := f.run(t, "ls", "--source", "nope"); code != 0 || !strings.Contains(out, "no records match") ||
		!strings.Contains(errOut, `warning: --source "nope" not checked: the sources could not be read from function dlqq-redrive`) {
		t.Errorf("ls --source nope, no redrive function (exit %d): %s%s", code, out, errOut)
	}
}

// Every command prints one JSON document with -o json: no null (empty
// lists are []), no empty run_id or action. redrive without --yes off a
// terminal prints its plan (dry_run true) and exits ExitNotExecuted; its
// progress counts against the plan, not --max. ls splits the attempts
// into failures and replays, explains the signature, and policy add
// takes a signature as ls prints it.
func TestEveryCommandPrintsJSON(t *testing.T) {
	v := newInventory(t)
	v.startRedrive(t, oneOperator(t, v.sources))
	v.readOnly(t)
	body := func(i int) string {
		return fmt.Sprintf(`{"event_id":"js-%d","ndc":"12345-678-90","lot":"L","quantity_delta":1,"schedule":"CII","facility":"F","occurred_at":"2026-11-29T09:00:00Z"}`, i)
	}
	var ids []string
	for i := range 3 {
		ids = append(ids, v.add(t, fmt.Sprintf("js-m%d", i), body(i)).DLQID)
	}
	bad := v.add(t, "js-bad", `{"event_id":"js-bad","ndc":"NDC?1","lot":"L","quantity_delta":1,"schedule":"CII","facility":"F","occurred_at":"2026-11-29T09:00:00Z"}`).DLQID
	dir := t.TempDir()
	fixed := filepath.Join(dir, "fixed.json")
	if err := os.WriteFile(fixed, []byte(`{"event_id":"js-bad","ndc":"12345-678-90","lot":"L","quantity_delta":1,"schedule":"CII","facility":"F","occurred_at":"2026-11-29T09:00:00Z"}`), 0o600); err != nil {
		t.Fatal(err)
	}

	// redrive: the plan on stdout, exit 4, nothing sent.
	out, errOut, code := v.runAt(t, time.Now(), "redrive", "--source", v.source, "--class", "exhausted", "--max", "100", "-o", "json")
	plan := jsonDoc(t, "redrive (plan)", out)
	if code != dlqctl.ExitNotExecuted || field(plan, "dry_run") != true || !strings.Contains(errOut, "dlqctl: not executed: pass --yes") {
		t.Fatalf("redrive without --yes (exit %d): %s%s", code, out, errOut)
	}
	if n := field(plan, "redriven").(map[string]any)["count"]; n != float64(3) {
		t.Fatalf("the plan would redrive %v, want 3: %s", n, out)
	}
	if _, errOut, code := v.runAt(t, time.Now(), "redrive", "--source", v.source, "--class", "exhausted"); code != dlqctl.ExitNotExecuted || !strings.Contains(errOut, "would redrive 3") {
		t.Fatalf("redrive without --yes, table (exit %d): %s", code, errOut)
	}
	// The run: the bar against the plan's 3, not --max 100.
	out, errOut, code = v.runAt(t, time.Now(), "redrive", "--source", v.source, "--class", "exhausted", "--max", "100", "--yes", "-o", "json")
	run := jsonDoc(t, "redrive --yes", out)
	if code != 0 || field(run, "dry_run") != false || !strings.Contains(errOut, "progress: 3/3 of the plan, 3 redriven") || strings.Contains(errOut, "/100") {
		t.Fatalf("redrive --yes (exit %d): %s%s", code, out, errOut)
	}
	if runs, _ := field(run, "run_ids").([]any); len(runs) != 1 || field(run, "run_id") != runs[0] || field(run, "action") != "redrive" {
		t.Fatalf("redrive --yes -o json: run ids %v, run_id %v, action %v", field(run, "run_ids"), field(run, "run_id"), field(run, "action"))
	}
	// A replay that comes back: one more failure.
	v.add(t, "js-m0-again", body(0))

	// ls: FAILURES and REPLAYS from the history, the signature explained.
	out, _, code = v.run(t, "ls", "--status", "all", "-o", "json")
	var sums []dlqctl.Summary
	if code != 0 || json.Unmarshal([]byte(out), &sums) != nil {
		t.Fatalf("ls -o json (exit %d): %s", code, out)
	}
	by := map[string]dlqctl.Summary{}
	for _, s := range sums {
		by[s.ID] = s
	}
	if s := by[ids[0]]; s.Failures != 2 || s.Replays != 1 || s.Status != "QUARANTINED" {
		t.Fatalf("ls of a record replayed once that came back: %+v", s)
	}
	if s := by[ids[1]]; s.Failures != 1 || s.Replays != 1 || s.Status != "REDRIVEN" {
		t.Fatalf("ls of a record replayed once: %+v", s)
	}
	out, _, _ = v.run(t, "ls", "--status", "all")
	row := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(dlqctl.ShortID(ids[0])) + ` +QUARANTINED +exhausted +2 +1 +1/\d+ +\S+ +(.+)$`).FindStringSubmatch(out)
	if !strings.Contains(out, "ID  ") || !strings.Contains(out, "  FAILURES  REPLAYS  REDRIVES  ") || row == nil || !strings.HasSuffix(row[1], "|v#") ||
		!strings.Contains(out, "\nSIGNATURE: stage|reason|schema version, digits shown as # (v# is any version v1, v2, …)") {
		t.Fatalf("ls, want FAILURES 2 and REPLAYS 1 and the signature explained:\n%s", out)
	}
	signature := row[1] // as an operator copies it from ls

	policyID := ""
	for _, c := range []struct {
		name string
		args []string
		code int
		// check, when set, looks into the document.
		check func(doc any) error
	}{
		{"ls", []string{"ls"}, 0, nil},
		{"ls (empty)", []string{"ls", "--source", v.source, "--status", "RESOLVED"}, 0, func(doc any) error {
			if l, ok := doc.([]any); !ok || len(l) != 0 {
				return fmt.Errorf("want []")
			}
			return nil
		}},
		{"buckets", []string{"buckets"}, 0, nil},
		{"show", []string{"show", ids[0]}, 0, func(doc any) error {
			if field(field(doc, "record"), "dlq_id") != ids[0] {
				return fmt.Errorf("not the record")
			}
			return nil
		}},
		{"show --payload", []string{"show", ids[1], "--payload"}, 0, nil},
		{"park", []string{"park", ids[0], "--reason", "look"}, 0, func(doc any) error {
			if field(field(doc, "record"), "status") != "PARKED" || field(doc, "action") != "park" {
				return fmt.Errorf("not the parked record")
			}
			return nil
		}},
		{"unpark", []string{"unpark", ids[0], "--reason", "back"}, 0, func(doc any) error {
			if field(field(doc, "record"), "status") != "QUARANTINED" {
				return fmt.Errorf("not the unparked record")
			}
			return nil
		}},
		{"fix", []string{"fix", bad, "--payload-file", fixed, "--reason", "NDC typo"}, 0, func(doc any) error {
			if field(field(doc, "correction"), "n") != float64(1) {
				return fmt.Errorf("no correction 1")
			}
			return nil
		}},
		{"show --diff", []string{"show", bad, "--diff"}, 0, func(doc any) error {
			if d, _ := field(doc, "diffs").([]any); len(d) != 1 {
				return fmt.Errorf("want the one correction's diff")
			}
			return nil
		}},
		{"show --diff (none)", []string{"show", ids[1], "--diff"}, 0, nil},
		{"policy ls (empty)", []string{"policy", "ls", "--source", v.source}, 0, func(doc any) error {
			if l, ok := doc.([]any); !ok || len(l) != 0 {
				return fmt.Errorf("want []")
			}
			return nil
		}},
		{"policy add", []string{"policy", "add", "--source", v.source, "--signature", signature, "--max-per-run", "5", "--expires", "24h"}, 0, func(doc any) error {
			sigs, _ := field(doc, "signatures").([]any)
			if len(sigs) != 1 || sigs[0] != signature {
				return fmt.Errorf("signatures %v, want %q as ls printed it", sigs, signature)
			}
			policyID, _ = field(doc, "id").(string)
			return nil
		}},
		{"policy ls", []string{"policy", "ls", "--source", v.source}, 0, nil},
		{"policy rm", []string{"policy", "rm", "<policy>", "--source", v.source, "--reason", "done"}, 0, func(doc any) error {
			if field(doc, "state") != "revoked" {
				return fmt.Errorf("not revoked")
			}
			return nil
		}},
		{"policy resume", []string{"policy", "resume", "<policy>", "--source", v.source, "--reason", "again"}, 1, nil},
		{"verify --no-ledger", []string{"verify", "--no-ledger"}, 0, nil},
		{"health", []string{"health", "--stack", v.st.Env.StackName}, 0, nil},
		{"redrive (nothing)", []string{"redrive", "--source", v.source, "--class", "exhausted", "--signature", "none|none|"}, 0, nil},
	} {
		args := append([]string(nil), c.args...)
		for i, a := range args {
			if a == "<policy>" {
				args[i] = policyID
			}
		}
		out, errOut, code := v.runAt(t, time.Now(), append(args, "-o", "json")...)
		if code != c.code {
			t.Errorf("%s -o json: exit %d, want %d: %s%s", c.name, code, c.code, out, errOut)
			continue
		}
		if code != 0 {
			continue // an error: nothing on stdout is the document
		}
		doc := jsonDoc(t, c.name, out)
		if c.check != nil {
			if err := c.check(doc); err != nil {
				t.Errorf("%s -o json: %v:\n%s", c.name, err, out)
			}
		}
	}
	if out, _, code := v.run(t, "ls", "--signature", signature); code != 0 || !strings.Contains(out, dlqctl.ShortID(ids[0])) {
		t.Fatalf("ls --signature as ls printed it (exit %d):\n%s", code, out)
	}
}

// verify (with the ledger) and ledger export print one JSON document too.
func TestLedgerCommandsPrintJSON(t *testing.T) {
	l := newLedgerFixture(t)
	l.anchored("js")
	out, errOut, code := l.run(false, "verify", "-o", "json")
	if code != 0 {
		t.Fatalf("verify -o json (exit %d): %s%s", code, out, errOut)
	}
	jsonDoc(t, "verify", out)
	dir := filepath.Join(t.TempDir(), "export")
	out, errOut, code = l.run(false, "ledger", "export", dir, "-o", "json")
	if code != 0 {
		t.Fatalf("ledger export -o json (exit %d): %s%s", code, out, errOut)
	}
	if doc := jsonDoc(t, "ledger export", out); field(doc, "dir") != dir {
		t.Fatalf("ledger export -o json: %s", out)
	}
}

// The sources file (SOURCES_FILE) is in the functions' packages: dlqctl
// reads no sources file, neither one of the directory it runs in (a
// checkout would decide what counts as configured) nor one at a path the
// configuration names. A source the variables do not name, of a function
// that has a sources file, is not refused but not checked, and the
// warning says why; a source of the variables is checked as before.
func TestSourcesOfTheSourcesFile(t *testing.T) {
	f := newFixture(t)
	dir := t.TempDir()
	t.Chdir(dir)
	if err := os.MkdirAll("config", 0o755); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "config", "sources.json")
	if err := os.WriteFile(file, []byte(`{"pharma":{"arn":"arn:aws:sqs:us-east-1:000000000000:pharma","dlq":"dlqq-dlq"}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"config/sources.json", file} {
		fn := createConfiguredFunction(t, f.st, map[string]string{"SOURCES": ordersSources, "SOURCES_FILE": path})
		out, errOut, code := f.run(t, "--function", fn, "ls", "--source", "pharma")
		if code != 0 || errOut != `warning: --source "pharma" not checked: function `+fn+" also reads the sources file in its package ("+path+"), which dlqctl does not read\n" {
			t.Errorf("ls --source pharma, SOURCES_FILE %s (exit %d): %s%s", path, code, out, errOut)
		}
		if out, errOut, code := f.run(t, "--function", fn, "ls", "--source", "orders"); code != 0 || errOut != "" {
			t.Errorf("ls --source orders, a source of the variables (exit %d): %s%s", code, out, errOut)
		}
	}
}

package dlqctl_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/dlqquarantine/dlqq/internal/dlqctl"
	"github.com/dlqquarantine/dlqq/shared/adapter/dynamostore"
	"github.com/dlqquarantine/dlqq/shared/dev/embedded"
	"github.com/dlqquarantine/dlqq/shared/domain/policy"
	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
	"github.com/dlqquarantine/dlqq/shared/domain/sources"
	"github.com/dlqquarantine/dlqq/shared/runtime/clock"
	"github.com/dlqquarantine/dlqq/shared/usecase/ingest"
)

// offline runs dlqctl with args where no AWS call may be made.
func offline(t *testing.T, args ...string) (string, int) {
	t.Helper()
	var out, errw bytes.Buffer
	a := dlqctl.NewApp(strings.NewReader(""), &out, &errw)
	a.Connect = func(context.Context, string, string) (*dlqctl.Clients, error) {
		t.Fatalf("%v: connected to AWS", args)
		return nil, nil
	}
	code := a.Main(context.Background(), append([]string{"--actor", "alice"}, args...))
	return errw.String(), code
}

// A request field's name (batch_size, ids[0], …) in an error: the user
// typed flags.
var fieldName = regexp.MustCompile(`\b[a-z]+_[a-z_]+\b|\bids\[`)

// Every request problem dlqctl redrive can meet before sending names the
// flag the user typed.
func TestRedriveErrorsNameTheFlags(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		o    dlqctl.RedriveOptions
		want string
	}{
		{dlqctl.RedriveOptions{Source: "orders", Max: 10, BatchSize: 51}, "--batch-size 51 is outside 1..50"},
		{dlqctl.RedriveOptions{Source: "orders", Max: 10, BatchSize: -1}, "--batch-size -1 is outside 1..50"},
		{dlqctl.RedriveOptions{Source: "orders", Max: 10, BatchSize: 0}, "--batch-size 0 is outside 1..50"},
		{dlqctl.RedriveOptions{Source: "orders", Max: 20000, BatchSize: 50}, "--max 20000 is outside 1..10000"},
		{dlqctl.RedriveOptions{Source: "orders", Max: 0, BatchSize: 50}, "--max 0 is outside 1..10000"},
		{dlqctl.RedriveOptions{Source: "orders", Max: 10, BatchSize: 50, Rate: -1}, "--rate must not be negative"},
		{dlqctl.RedriveOptions{Max: 10, BatchSize: 50}, "--source is required"},
		{dlqctl.RedriveOptions{Source: "orders", Max: 10, BatchSize: 50, IDs: []string{"orders#a", "no-hash"}}, `--id "no-hash" is not a record id`},
		{dlqctl.RedriveOptions{Source: "orders", Max: 10, BatchSize: 50, Since: "1h", Until: "2h"}, "--since is after --until"},
		{dlqctl.RedriveOptions{Source: "orders", Max: 10, BatchSize: 50, Classes: "maybe"}, `--class "maybe"`},
	} {
		_, err := c.o.Request("alice", now)
		if err == nil || !strings.Contains(err.Error(), c.want) || fieldName.MatchString(err.Error()) {
			t.Errorf("%+v: %v, want %q and no request field", c.o, err, c.want)
		}
	}
	if _, err := (dlqctl.RedriveOptions{Source: "orders", Max: 10, BatchSize: 50}).Request("policy:p1", now); err == nil ||
		!strings.Contains(err.Error(), "--actor") || fieldName.MatchString(err.Error()) {
		t.Errorf("a reserved requester: %v, want it to name --actor", err)
	}
	if errOut, code := offline(t, "redrive", "--source", "s", "--batch-size", "51"); code != dlqctl.ExitUsage || !strings.Contains(errOut, "dlqctl: --batch-size 51 is outside 1..50\n") {
		t.Errorf("redrive --batch-size 51: exit %d: %s", code, errOut)
	}
}

func TestLsStatusListsTheValidValues(t *testing.T) {
	t.Parallel()
	errOut, code := offline(t, "ls", "--status", "BOGUS")
	if code != dlqctl.ExitUsage || !strings.Contains(errOut, `--status "BOGUS": not a status; want one of QUARANTINED, REDRIVING, REDRIVEN, RESOLVED, PARKED, ARCHIVED, several comma-separated, or all`) {
		t.Fatalf("exit %d: %s", code, errOut)
	}
}

// policy add names the flags missing, only those, and its validation's
// problems by flag.
func TestPolicyAddErrorsNameTheFlags(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		args      []string
		want      string
		notWanted string
	}{
		{[]string{"--source", "orders", "--max-per-run", "5"}, "dlqctl: --expires is required\n", "--source"},
		{[]string{"--source", "orders"}, "dlqctl: --max-per-run and --expires are required\n", "--source"},
		{[]string{"--expires", "24h"}, "dlqctl: --source and --max-per-run are required\n", "--expires"},
		{[]string{}, "dlqctl: --source, --max-per-run and --expires are required\n", ""},
		{[]string{"--source", "orders", "--min-age", "1h", "--max-per-run", "5000", "--expires", "24h"}, "--max-per-run 5000 is outside 1..1000", ""},
		{[]string{"--source", "orders", "--min-age", "1h", "--max-per-run", "5", "--expires", "24h", "--threshold", "2"}, "--threshold must be between 0 and 1", ""},
		{[]string{"--source", "orders", "--min-age", "1h", "--max-per-run", "5", "--expires", "2400h"}, "--expires is too far: a policy expires within 90 days", ""},
		{[]string{"--source", "orders", "--min-age", "1h", "--max-per-run", "5", "--expires", "24h", "--min-sample", "-1"}, "--min-sample must be at least 1", ""},
		{[]string{"--source", "orders", "--min-age", "1h", "--max-per-run", "5", "--expires", "24h", "--rate", "-1"}, "--rate must not be negative", ""},
		{[]string{"--source", "orders", "--max-per-run", "5", "--expires", "24h"}, "must be narrow: give --signature, --since or --min-age", ""},
		{[]string{"--source", "orders", "--since", "1h", "--until", "2h", "--max-per-run", "5", "--expires", "24h"}, "--since is after --until", ""},
		{[]string{"--source", "orders", "--class", "poison", "--min-age", "1h", "--max-per-run", "5", "--expires", "24h"}, `--class "poison": a policy replays exhausted records only`, ""},
	} {
		errOut, code := offline(t, append([]string{"policy", "add"}, c.args...)...)
		if code != dlqctl.ExitUsage || !strings.Contains(errOut, c.want) || (c.notWanted != "" && strings.Contains(errOut, c.notWanted)) {
			t.Errorf("policy add %v: exit %d: %q, want %q", c.args, code, errOut, c.want)
		}
	}
}

func TestShortID(t *testing.T) {
	t.Parallel()
	hash := strings.Repeat("0123456789abcdef", 4)
	for id, want := range map[string]string{
		"orders#o1":                     "orders#o1",
		"orders#" + hash:                "orders#0123456789ab…",
		"orders#" + hash[:16]:           "orders#" + hash[:16],
		"orders#" + hash + "#2":         "orders#0123456789ab…",
		"no-hash":                       "no-hash",
		"q#ÄÖÜäöüßÄÖÜäöüßÄÖÜ":           "q#ÄÖÜäöüßÄÖÜäö…",
		"dlqq-source#" + hash[:17]:      "dlqq-source#0123456789ab…",
		"dlqq-source#short-key-#-inner": "dlqq-source#short-key-#-…",
	} {
		if got := dlqctl.ShortID(id); got != want {
			t.Errorf("ShortID(%q) = %q, want %q", id, got, want)
		}
	}
}

// verify says each problem's record once, counts in the singular for
// one, and its JSON keys are snake_case like the rest.
func TestVerifyNamesEachRecordOnce(t *testing.T) {
	f := newFixture(t)
	tamper(t, f, f.ids["o2"])
	out, _, code := f.run(t, "verify", "--no-ledger")
	if code != dlqctl.ExitMismatch || !strings.HasPrefix(out, "verified 10 records (1 archived stub): 1 problem\n") {
		t.Fatalf("verify (exit %d):\n%s", code, out)
	}
	line := ""
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, "MISMATCH") {
			line = l
		}
	}
	if strings.Count(line, f.ids["o2"]) != 1 || !strings.HasPrefix(line, "  MISMATCH "+f.ids["o2"]+": record seal mismatch: stored ") {
		t.Fatalf("the mismatch line names the record %d times: %q", strings.Count(line, f.ids["o2"]), line)
	}
	out, errOut, _ := f.run(t, "verify", "--no-ledger", "-o", "json")
	if !strings.Contains(errOut, "dlqctl: 1 verification problem\n") {
		t.Fatalf("verify's error: %q", errOut)
	}
	var res struct {
		Problems []map[string]any `json:"problems"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil || len(res.Problems) != 1 {
		t.Fatalf("verify -o json: %v\n%s", err, out)
	}
	p := res.Problems[0]
	if p["id"] != f.ids["o2"] || !strings.HasPrefix(p["what"].(string), "record seal mismatch") || len(p) != 2 {
		t.Fatalf("problem %v, want the keys id and what", p)
	}
}

// tamper changes record id behind its seal.
func tamper(t *testing.T, f *fixture, id string) {
	t.Helper()
	ctx := context.Background()
	r, _ := f.store.Get(ctx, id)
	item, _ := dynamostore.Marshal(r)
	item["failure_class"] = &ddbtypes.AttributeValueMemberS{Value: "validation"}
	if _, err := f.st.Clients.DynamoDB.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(f.st.Names["QuarantineTable"]), Item: item}); err != nil {
		t.Fatal(err)
	}
}

// inventory is a stack with the template's source and its schema: records
// whose bodies lack an event_id have a 64-hex body-hash key.
type inventory struct {
	*fixture
	source string
	q      *ingest.Quarantiner
	srcARN string
	// sources is the template's SOURCES JSON (the redrive function's).
	sources string
}

func newInventory(t *testing.T) *inventory {
	t.Helper()
	st := embedded.ForTest(t, embedded.Options{})
	fn, _ := st.Template.GetServerlessFunctionWithName("RedriveFunction")
	cfg, err := sources.Parse(fn.Environment.Variables["SOURCES"])
	if err != nil {
		t.Fatal(err)
	}
	srcs, _ := sources.Build(cfg)
	source := st.Names["SourceQueue"]
	store := dynamostore.New(st.Clients.DynamoDB, st.Names["QuarantineTable"])
	return &inventory{fixture: &fixture{st: st, store: store, clock: clock.NewFake(time.Now())}, source: source, srcARN: srcs[source].ARN,
		sources: fn.Environment.Variables["SOURCES"], q: ingest.NewQuarantiner(store, nil, nil, ingest.QuarantinerConfig{Sources: srcs})}
}

func (v *inventory) add(t *testing.T, msgID, body string) *quarantine.Record {
	t.Helper()
	out, err := v.q.Quarantine(context.Background(), ingest.Message{MessageID: msgID, Body: []byte(body), SourceARN: v.srcARN})
	if err != nil {
		t.Fatal(err)
	}
	return out.Record
}

// Tables print long ids short, with an ellipsis; -o json and show print
// them in full, and show takes the short id (or any unique prefix ending
// with an ellipsis). show prints the failure detail: which properties are
// missing (found with the source's schema, named by the redrive function's
// SOURCES).
func TestLongIDsAndTheFailureDetail(t *testing.T) {
	v := newInventory(t)
	a := v.add(t, "m1", `{"ndc":"12345-678-90","quantity_delta":1,"schedule":"CII","facility":"F","occurred_at":"2026-11-29T09:00:00Z"}`)
	b := v.add(t, "m2", `{"ndc":"12345-678-90","lot":"L1","quantity_delta":2,"schedule":"CII","facility":"F","occurred_at":"2026-11-29T09:00:00Z"}`)
	_, key, _ := strings.Cut(a.DLQID, "#")
	if len(key) != 64 || a.FailureClass != quarantine.ClassValidation || a.FailureDetail == "" {
		t.Fatalf("want a validation record with a body-hash key and a detail: %s %s %q", a.DLQID, a.FailureClass, a.FailureDetail)
	}
	short := v.source + "#" + key[:12] + "…"

	out, _, code := v.run(t, "ls")
	if code != 0 || !strings.Contains(out, short+"  ") || strings.Contains(out, a.DLQID) || strings.Contains(out, b.DLQID) {
		t.Fatalf("ls (exit %d), want %s and no full id:\n%s", code, short, out)
	}
	out, _, _ = v.run(t, "ls", "-o", "json")
	if !strings.Contains(out, `"id": "`+a.DLQID+`"`) {
		t.Fatalf("ls -o json lacks the full id:\n%s", out)
	}
	if out, _, _ = v.run(t, "buckets"); !strings.Contains(out, "…") || strings.Contains(out, a.DLQID) || strings.Contains(out, b.DLQID) {
		t.Fatalf("buckets prints a full long id:\n%s", out)
	}

	fn := createConfiguredFunction(t, v.st, map[string]string{"SOURCES": v.sources})
	for _, typed := range []string{short, strings.TrimSuffix(short, "…") + "...", a.DLQID} {
		out, errOut, code := v.run(t, "--function", fn, "show", typed)
		if code != 0 || !regexp.MustCompile(`(?m)^id +`+regexp.QuoteMeta(a.DLQID)+`$`).MatchString(out) {
			t.Fatalf("show %s (exit %d):\n%s%s", typed, code, out, errOut)
		}
		if matched := "matched " + a.DLQID + "\n"; (typed == a.DLQID) != (errOut == "") || (typed != a.DLQID && errOut != matched) {
			t.Fatalf("show %s: stderr %q, want %q for a prefix and nothing for the id", typed, errOut, matched)
		}
		if !strings.Contains(out, "\nfailure detail:\n  ") || !strings.Contains(out, "missing propert") || !strings.Contains(out, "lot") || !strings.Contains(out, "event_id") {
			t.Fatalf("show %s does not print the failure detail:\n%s", typed, out)
		}
	}
	if _, errOut, code := v.run(t, "show", strings.TrimSuffix(short, "…")); code != 1 || !strings.Contains(errOut, "no record") || !strings.Contains(errOut, "for a prefix end it with …") {
		t.Fatalf("show of a short id without its ellipsis (exit %d): %s", code, errOut)
	}
	out, errOut, code := v.run(t, "show", v.source+"#…")
	if code != dlqctl.ExitUsage || !strings.Contains(errOut, "is ambiguous") || !strings.Contains(errOut, a.DLQID) || !strings.Contains(errOut, b.DLQID) || out != "" {
		t.Fatalf("show of an ambiguous prefix (exit %d): %s%s", code, out, errOut)
	}
	if _, errOut, code := v.run(t, "show", v.source+"#ffffffffffff…"); code != 1 || !strings.Contains(errOut, "no record") {
		t.Fatalf("show of a prefix nothing has (exit %d): %s", code, errOut)
	}
}

// show takes what was typed as a prefix only when it ends with an ellipsis:
// a typo that begins one record's id (inv-00010 of inv-000101) names no
// record, with or without --payload, and no read is recorded against the
// record it begins. A prefix says the id it matched on stderr, and with
// --payload is refused: the audited read needs the full id.
func TestShowTakesAPrefixOnlyWithAnEllipsis(t *testing.T) {
	v := newInventory(t)
	v.startRedrive(t, "")
	v.readOnly(t)
	r := v.add(t, "m1", `{"event_id":"inv-000101","ndc":"12345-678-90","lot":"L1","quantity_delta":1,"schedule":"CII","facility":"F","occurred_at":"2026-11-29T09:00:00Z"}`)
	typo := v.source + "#inv-00010"
	if r.DLQID != typo+"1" {
		t.Fatalf("want the id %s1, got %s", typo, r.DLQID)
	}
	reads := func() int {
		rec, err := v.store.Get(context.Background(), r.DLQID)
		if err != nil {
			t.Fatal(err)
		}
		return rec.ReadCount
	}
	for _, args := range [][]string{{"show", typo}, {"show", typo, "--payload"}, {"show", typo, "--payload", "-o", "json"}} {
		out, errOut, code := v.run(t, args...)
		if code != 1 || out != "" || !strings.Contains(errOut, `no record "`+typo+`" in table `) || !strings.Contains(errOut, "; for a prefix end it with …") {
			t.Fatalf("%v (exit %d), want no record:\n%s%s", args, code, out, errOut)
		}
	}
	if n := reads(); n != 0 {
		t.Fatalf("a typo recorded %d payload reads against %s", n, r.DLQID)
	}
	for _, typed := range []string{typo + "…", typo + "..."} {
		out, errOut, code := v.run(t, "show", typed, "--payload")
		if code != dlqctl.ExitUsage || out != "" || !strings.Contains(errOut, "--payload needs the full id") {
			t.Fatalf("show %s --payload (exit %d), want refused:\n%s%s", typed, code, out, errOut)
		}
		out, errOut, code = v.run(t, "show", typed)
		if code != 0 || errOut != "matched "+r.DLQID+"\n" || !regexp.MustCompile(`(?m)^id +`+regexp.QuoteMeta(r.DLQID)+`$`).MatchString(out) || strings.Contains(out, "payload (read recorded") {
			t.Fatalf("show %s (exit %d):\n%s%s", typed, code, out, errOut)
		}
	}
	if n := reads(); n != 0 {
		t.Fatalf("show by prefix recorded %d payload reads", n)
	}
	out, errOut, code := v.run(t, "show", r.DLQID, "--payload")
	if code != 0 || errOut != "" || !strings.Contains(out, "payload (read recorded as unverified:alice)") || reads() != 1 {
		t.Fatalf("show of the full id --payload (exit %d):\n%s%s", code, out, errOut)
	}
}

// policy ls says the breaker's minimum sample, and that below it the
// breaker cannot trip.
func TestPolicyListShowsTheMinimumSample(t *testing.T) {
	f := newFixture(t)
	f.startRedrive(t, oneOperator(t, strings.TrimSuffix(ordersSources, "}")+`,"o2":{"arn":"arn:aws:sqs:us-east-1:000000000000:o2","dlq":"o2-dlq","idempotency_pointer":"/id","redrive_cap":3}}`))
	f.readOnly(t)
	// The function checks the expiry against its own clock, the real one
	// (the fixture's is a month behind): policies are added at the real now.
	out, errOut, code := f.runAt(t, time.Now(), "policy", "add", "--source", "orders", "--signature", "consumer|timeout|v#", "--max-per-run", "5", "--expires", "24h")
	if code != 0 {
		t.Fatalf("add (exit %d): %s", code, errOut)
	}
	id := strings.Fields(out)[1]
	out, _, code = f.run(t, "policy", "ls", "--source", "orders")
	if code != 0 || !strings.Contains(out, "cannot trip yet: 0 of 10 minimum sample sent") || !strings.Contains(out, "below it, however many came back, it cannot trip") ||
		!strings.Contains(out, fmt.Sprintf("has sent its minimum sample (here 10; --min-sample, default %d) since", policy.DefaultMinSample)) {
		t.Fatalf("policy ls (exit %d):\n%s", code, out)
	}
	// The hint says the policies' own minimum samples, not the default's.
	if _, errOut, code := f.runAt(t, time.Now(), "policy", "add", "--source", "o2", "--signature", "s", "--max-per-run", "5", "--expires", "24h", "--min-sample", "3"); code != 0 {
		t.Fatalf("add --min-sample 3 (exit %d): %s", code, errOut)
	}
	out, _, code = f.run(t, "policy", "ls", "--source", "o2")
	if code != 0 || !strings.Contains(out, "cannot trip yet: 0 of 3 minimum sample sent") || !strings.Contains(out, "has sent its minimum sample (here 3; --min-sample, default 10) since") {
		t.Fatalf("policy ls of a policy with --min-sample 3 (exit %d):\n%s", code, out)
	}
	if _, errOut, code := f.runAt(t, time.Now(), "policy", "add", "--source", "o2", "--signature", "s2", "--max-per-run", "5", "--expires", "24h", "--min-sample", "12"); code != 0 {
		t.Fatalf("add --min-sample 12 (exit %d): %s", code, errOut)
	}
	if out, _, _ = f.run(t, "policy", "ls", "--source", "o2"); !strings.Contains(out, "(here 3 or 12; --min-sample, default 10)") {
		t.Fatalf("policy ls of two policies, 3 and 12:\n%s", out)
	}
	out, _, _ = f.run(t, "policy", "ls", "--source", "orders", "-o", "json")
	var rows []struct {
		ID      string         `json:"id"`
		Breaker map[string]any `json:"breaker"`
	}
	if err := json.Unmarshal([]byte(out), &rows); err != nil || len(rows) != 1 || rows[0].ID != id {
		t.Fatalf("policy ls -o json: %v\n%s", err, out)
	}
	if b := rows[0].Breaker; b["min_sample"] != float64(10) || b["judging"] != false || b["sent"] != float64(0) || b["came_back"] != float64(0) {
		t.Fatalf("breaker %v, want snake_case keys with the minimum sample", b)
	}
}

// Unparking says the record is eligible for replay again, naming the
// standing policies whose next run replays it.
func TestUnparkNamesThePoliciesThatReplayIt(t *testing.T) {
	f := newFixture(t)
	f.startRedrive(t, oneOperator(t, ordersSources))
	f.readOnly(t)
	// The function checks the expiry against its own clock, the real one
	// (the fixture's is a month behind): policies are added at the real now.
	out, errOut, code := f.runAt(t, time.Now(), "policy", "add", "--source", "orders", "--signature", "consumer|retries exhausted|", "--max-per-run", "5", "--expires", "24h")
	if code != 0 {
		t.Fatalf("add (exit %d): %s", code, errOut)
	}
	pol := strings.Fields(out)[1]
	for _, id := range []string{f.ids["o9"], f.ids["o6"]} {
		if _, errOut, code := f.run(t, "park", id, "--reason", "look"); code != 0 {
			t.Fatalf("park %s (exit %d): %s", id, code, errOut)
		}
	}
	out, _, code = f.run(t, "unpark", f.ids["o9"], "--reason", "fixed")
	if code != 0 || !strings.Contains(out, "orders#o9 is QUARANTINED\n") || !strings.Contains(out, "standing policy "+pol+" selects it, and the next scheduled run replays it") {
		t.Fatalf("unpark of a record a policy selects (exit %d):\n%s", code, out)
	}
	out, _, code = f.run(t, "unpark", f.ids["o6"], "--reason", "fixed")
	if code != 0 || !strings.Contains(out, "eligible for replay again; no active standing policy of orders selects it now") || strings.Contains(out, pol) {
		t.Fatalf("unpark of a record no policy selects (exit %d):\n%s", code, out)
	}

	// -o json tells a script the same: the warning on stderr and in the
	// document, with the policies that select the record.
	if _, errOut, code := f.run(t, "park", f.ids["o9"], "--reason", "again"); code != 0 {
		t.Fatalf("park (exit %d): %s", code, errOut)
	}
	out, errOut, code = f.run(t, "-o", "json", "unpark", f.ids["o9"], "--reason", "fixed")
	var doc struct {
		Record            struct{ Status string }
		Warnings          []string `json:"warnings"`
		PoliciesSelecting []string `json:"policies_selecting"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &doc) != nil {
		t.Fatalf("unpark -o json (exit %d):\n%s%s", code, out, errOut)
	}
	if doc.Record.Status != "QUARANTINED" || len(doc.PoliciesSelecting) != 1 || doc.PoliciesSelecting[0] != pol ||
		len(doc.Warnings) != 1 || !strings.Contains(doc.Warnings[0], "standing policy "+pol+" selects it") ||
		!strings.Contains(errOut, "warning: it is eligible for replay again: standing policy "+pol+" selects it") {
		t.Fatalf("unpark -o json of a record a policy selects: %+v\nstdout:\n%sstderr:\n%s", doc, out, errOut)
	}
	if _, errOut, code := f.run(t, "park", f.ids["o6"], "--reason", "again"); code != 0 {
		t.Fatalf("park (exit %d): %s", code, errOut)
	}
	out, errOut, code = f.run(t, "-o", "json", "unpark", f.ids["o6"], "--reason", "fixed")
	if code != 0 || !strings.Contains(out, `"warnings": []`) || !strings.Contains(out, `"policies_selecting": []`) || errOut != "" {
		t.Fatalf("unpark -o json of a record no policy selects (exit %d):\n%s%s", code, out, errOut)
	}
}

package sources_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dlqquarantine/dlqq/shared/domain/sources"
)

const prefix = "arn:aws:sqs:eu-west-1:111122223333:"

func TestMergeRegisteredQueuesAndTheirSettings(t *testing.T) {
	t.Parallel()
	got, err := sources.Merge(
		`{"stack-source":{"arn":"`+prefix+`stack-source","dlq":"stack-dlq","schema":"inventory-movement.v1"}}`,
		`{"payments.fifo":{"dlq":"payments-dlq.fifo","redrive_cap":2},"elsewhere":{"arn":"arn:aws:sqs:us-east-1:444455556666:elsewhere"},"legacy":{"schema":"inventory-movement.v1"}}`,
		sources.Registry{
			QueueARNs: []string{prefix + "orders", " " + prefix + "payments.fifo", prefix + "refunds.fifo", ""},
			DLQ:       "stack-dlq", AttachedSourceARN: prefix + "legacy", AttachedDLQARN: prefix + "legacy-dlq",
		})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]sources.Config{
		"stack-source":  {ARN: prefix + "stack-source", DLQ: "stack-dlq", Schema: "inventory-movement.v1"},
		"orders":        {ARN: prefix + "orders", DLQ: "stack-dlq"},
		"payments.fifo": {ARN: prefix + "payments.fifo", DLQ: "payments-dlq.fifo", RedriveCap: 2},
		// A FIFO queue registered without a dlq of its own: the stack's
		// FIFO DLQ, its standard DLQ's FIFO twin.
		"refunds.fifo": {ARN: prefix + "refunds.fifo", DLQ: "stack-dlq.fifo"},
		"elsewhere":    {ARN: "arn:aws:sqs:us-east-1:444455556666:elsewhere", DLQ: "stack-dlq"},
		"legacy":       {ARN: prefix + "legacy", DLQ: "legacy-dlq", Schema: "inventory-movement.v1"},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d sources, want %d: %v", len(got), len(want), got)
	}
	for name, w := range want {
		g, ok := got[name]
		if !ok || g.ARN != w.ARN || g.DLQ != w.DLQ || g.Schema != w.Schema || g.RedriveCap != w.RedriveCap || g.IdempotencyPointer != w.IdempotencyPointer {
			t.Errorf("source %s = %+v, want %+v", name, g, w)
		}
	}
}

func TestMergeRefuses(t *testing.T) {
	t.Parallel()
	full := `{"a":{"arn":"` + prefix + `a","dlq":"d"}}`
	reg := func(arns ...string) sources.Registry { return sources.Registry{QueueARNs: arns, DLQ: "d"} }
	for _, tc := range []struct {
		name, sources, extra string
		r                    sources.Registry
		want                 string
	}{
		{"a name in both", full, `{"a":{"arn":"` + prefix + `a"}}`, reg(), `source "a" is defined in both SOURCES and EXTRA_SOURCES`},
		{"a stack source registered again", full, `{}`, reg(prefix + "a"), `source "a" is defined in SOURCES and registered again`},
		{"the attached source defined in SOURCES", full, `{}`, sources.Registry{AttachedSourceARN: prefix + "a", AttachedDLQARN: prefix + "d"}, `source "a" is defined in SOURCES and registered again`},
		{"two registered queues of one name", ``, ``, reg(prefix+"b", "arn:aws:sqs:us-east-1:444455556666:b"), `have the same name`},
		{"a registered entry that is no queue ARN", ``, ``, reg("b"), `SOURCE_QUEUE_ARNS: "b" is not an SQS queue ARN`},
		{"an arn that is not the registered one", ``, `{"b":{"arn":"arn:aws:sqs:us-east-1:444455556666:b"}}`, reg(prefix + "b"), `but the queue registered by that name is`},
		{"no arn and not registered", ``, `{"b":{"dlq":"d"}}`, reg(), `source "b" has no arn and no registered queue`},
		{"a name twice in EXTRA_SOURCES", ``, `{"b":{"redrive_cap":2},"b":{"redrive_cap":9}}`, reg(prefix + "b"), `EXTRA_SOURCES: source "b" is defined twice`},
		{"a name twice in SOURCES", `{"a":{"arn":"` + prefix + `a","dlq":"d"},"a":{"arn":"` + prefix + `a","dlq":"d","redrive_cap":9}}`, `{}`, reg(), `SOURCES: source "a" is defined twice`},
		{"an unknown field", ``, `{"b":{"arm":"x"}}`, reg(), `EXTRA_SOURCES: json: unknown field "arm"`},
		{"not an object", ``, `["b"]`, reg(), `EXTRA_SOURCES: json: cannot unmarshal array`},
		{"data after the object", ``, `{"b":{}} {"c":{}}`, reg(prefix + "b"), `EXTRA_SOURCES: data after the JSON object`},
		{"a broken SOURCES", `{`, `{}`, reg(), `SOURCES: unexpected EOF`},
		{"an attached source that is no queue ARN", ``, ``, sources.Registry{AttachedSourceARN: "legacy", AttachedDLQARN: prefix + "d"}, `ATTACHED_SOURCE_ARN: "legacy" is not an SQS queue ARN`},
		{"a FIFO source on a standard DLQ", ``, `{"b.fifo":{"dlq":"d"}}`, reg(prefix + "b.fifo"), `source "b.fifo": dlq "d" is not of its kind`},
		{"a standard source on a FIFO DLQ", ``, `{"b":{"dlq":"d.fifo"}}`, reg(prefix + "b"), `source "b": dlq "d.fifo" is not of its kind`},
		{"an attached source without its dlq", ``, ``, sources.Registry{AttachedSourceARN: prefix + "legacy"}, `ATTACHED_DLQ_ARN="" is not an SQS queue ARN`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := sources.Merge(tc.sources, tc.extra, tc.r)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Merge = %v, %v; want an error saying %q", got, err, tc.want)
			}
		})
	}
}

func TestFromEnvReadsEveryVariable(t *testing.T) {
	t.Parallel()
	vars := map[string]string{
		sources.EnvSources:           `{"s":{"arn":"` + prefix + `s","dlq":"stack-dlq"}}`,
		sources.EnvExtraSources:      `{"x":{"redrive_cap":5}}`,
		sources.EnvQueueARNs:         prefix + "x," + prefix + "y," + prefix + "z.fifo",
		sources.EnvDefaultDLQ:        "stack-dlq",
		sources.EnvAttachedSourceARN: prefix + "legacy",
		sources.EnvAttachedDLQARN:    prefix + "legacy-dlq",
	}
	got, err := sources.FromVariables(vars)
	if err != nil {
		t.Fatal(err)
	}
	if got["x"].ARN != prefix+"x" || got["x"].RedriveCap != 5 || got["y"].DLQ != "stack-dlq" || got["z.fifo"].DLQ != "stack-dlq.fifo" || got["legacy"].DLQ != "legacy-dlq" || got["s"].DLQ != "stack-dlq" || len(got) != 5 {
		t.Fatalf("FromVariables = %+v", got)
	}
	none := map[string]string{sources.EnvExtraSources: "{}", sources.EnvQueueARNs: ""}
	if _, err := sources.RequiredFromEnv(func(k string) string { return none[k] }); err == nil || !strings.Contains(err.Error(), "name no source queue") {
		t.Fatalf("RequiredFromEnv with no source = %v", err)
	}
}

// A sending function refuses a source whose queue the template does not
// grant (neither SOURCES' own, nor registered, nor attached), naming it.
func TestUngranted(t *testing.T) {
	t.Parallel()
	vars := map[string]string{
		sources.EnvSources:           `{"s":{"arn":"` + prefix + `s","dlq":"d"}}`,
		sources.EnvExtraSources:      `{"stray":{"arn":"arn:aws:sqs:us-east-1:444455556666:stray"}}`,
		sources.EnvQueueARNs:         prefix + "x",
		sources.EnvDefaultDLQ:        "d",
		sources.EnvAttachedSourceARN: prefix + "legacy",
		sources.EnvAttachedDLQARN:    prefix + "legacy-dlq",
	}
	getenv := func(k string) string { return vars[k] }
	cfg, err := sources.FromEnv(getenv)
	if err != nil {
		t.Fatal(err)
	}
	err = sources.Ungranted(getenv, cfg)
	if err == nil || !strings.Contains(err.Error(), `source "stray": queue "arn:aws:sqs:us-east-1:444455556666:stray" is not one the role may send to`) {
		t.Fatalf("Ungranted = %v", err)
	}
	for _, name := range []string{`"s"`, `"x"`, `"legacy"`} {
		if strings.Contains(err.Error(), name) {
			t.Errorf("Ungranted names granted source %s: %v", name, err)
		}
	}
	vars[sources.EnvQueueARNs] += ",arn:aws:sqs:us-east-1:444455556666:stray"
	vars[sources.EnvExtraSources] = `{}`
	if cfg, err = sources.FromEnv(getenv); err != nil {
		t.Fatal(err)
	}
	if err := sources.Ungranted(getenv, cfg); err != nil || len(cfg) != 4 {
		t.Fatalf("registered: Ungranted = %v over %v", err, cfg)
	}
}

func TestQueueName(t *testing.T) {
	t.Parallel()
	for arn, want := range map[string]string{
		prefix + "orders.fifo":                      "orders.fifo",
		"arn:aws-us-gov:sqs:us-gov-west-1:1:q":      "q",
		"arn:aws:sns:eu-west-1:111122223333:topic":  "",
		"arn:aws:sqs:eu-west-1:111122223333:":       "",
		"https://sqs.eu-west-1.amazonaws.com/1/q":   "",
		"arn:aws:sqs:eu-west-1:111122223333:q:more": "",
	} {
		if got := sources.QueueName(arn); got != want {
			t.Errorf("QueueName(%q) = %q, want %q", arn, got, want)
		}
	}
}

// SOURCES_FILE holds any number of sources, read from the package root
// (LAMBDA_TASK_ROOT) as EXTRA_SOURCES entries are, its schema files beside
// it; outside Lambda a relative one is not read.
func TestSourcesFileFromThePackageRoot(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "config", "schemas"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "config", "schemas", "orders.v2.json"), []byte(`{"type":"object"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	b.WriteString(`{"x":{"redrive_cap":7,"schema":"config/schemas/orders.v2.json"}`)
	const many = 1000
	for i := range many {
		fmt.Fprintf(&b, `,"q%04d":{"arn":"%sq%04d"}`, i, prefix, i)
	}
	b.WriteString(`,"q.fifo":{"arn":"` + prefix + `q.fifo"}}`)
	if err := os.WriteFile(filepath.Join(root, "config", "sources.json"), []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	vars := map[string]string{
		sources.EnvSourcesFile: "config/sources.json",
		"LAMBDA_TASK_ROOT":     root,
		sources.EnvQueueARNs:   prefix + "x",
		sources.EnvDefaultDLQ:  "stack-dlq",
	}
	got, err := sources.FromVariables(vars)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != many+2 || got["x"].RedriveCap != 7 || got["x"].Schema != filepath.Join(root, "config", "schemas", "orders.v2.json") ||
		got["q0999"].ARN != prefix+"q0999" || got["q0999"].DLQ != "stack-dlq" || got["q.fifo"].DLQ != "stack-dlq.fifo" {
		t.Fatalf("FromVariables read %d sources: x %+v, q0999 %+v, q.fifo %+v", len(got), got["x"], got["q0999"], got["q.fifo"])
	}
	if err := sources.Validate(got); err != nil {
		t.Fatal(err)
	}
	// The environment holds the file's name, not its sources.
	if n := len(vars[sources.EnvSourcesFile]); n > 32 {
		t.Fatalf("SOURCES_FILE takes %d bytes of the environment", n)
	}
}

func TestSourcesFileRefuses(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	big := write("big.json", `{"a":{"arn":"`+prefix+`a","schema":"`+strings.Repeat("x", sources.MaxSourcesFileBytes)+`"}}`)
	for _, tc := range []struct {
		name string
		vars map[string]string
		want string
	}{
		{"missing", map[string]string{sources.EnvSourcesFile: filepath.Join(dir, "none.json")}, "SOURCES_FILE: open"},
		{"relative and missing", map[string]string{sources.EnvSourcesFile: "config/sources.json", "LAMBDA_TASK_ROOT": dir}, "ships in the deployment package"},
		{"empty", map[string]string{sources.EnvSourcesFile: write("empty.json", " \n")}, "is empty (write {} for no sources)"},
		{"too large", map[string]string{sources.EnvSourcesFile: big}, "is larger than"},
		{"not JSON", map[string]string{sources.EnvSourcesFile: write("bad.json", `{"a":`)}, "SOURCES_FILE: unexpected EOF"},
		{"a name twice", map[string]string{sources.EnvSourcesFile: write("twice.json", `{"a":{"arn":"`+prefix+`a"},"a":{"arn":"`+prefix+`a"}}`)}, `SOURCES_FILE: source "a" is defined twice`},
		{"a name also in EXTRA_SOURCES", map[string]string{sources.EnvSourcesFile: write("both.json", `{"a":{"arn":"`+prefix+`a"}}`), sources.EnvExtraSources: `{"a":{"arn":"` + prefix + `a"}}`}, `source "a" is defined in both EXTRA_SOURCES and SOURCES_FILE`},
		{"a name also in SOURCES", map[string]string{sources.EnvSourcesFile: write("own.json", `{"a":{"arn":"`+prefix+`a"}}`), sources.EnvSources: `{"a":{"arn":"` + prefix + `a","dlq":"d"}}`}, `source "a" is defined in both SOURCES and SOURCES_FILE`},
		{"no arn, not registered", map[string]string{sources.EnvSourcesFile: write("noarn.json", `{"a":{"redrive_cap":2}}`)}, `SOURCES_FILE: source "a" has no arn`},
		{"another arn than the registered one", map[string]string{sources.EnvSourcesFile: write("other.json", `{"a":{"arn":"arn:aws:sqs:us-east-1:444455556666:a"}}`), sources.EnvQueueARNs: prefix + "a"}, `SOURCES_FILE: source "a" has arn`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := sources.FromVariables(tc.vars)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("FromVariables = %v, %v; want an error saying %q", got, err, tc.want)
			}
		})
	}
}

// With TaggedSourceAccess, a source of the stack's account in no ARN list
// is granted by its queue's tag (and named so); one of another account is
// still refused, as is half the grant's configuration.
func TestGrantsByTag(t *testing.T) {
	t.Parallel()
	vars := map[string]string{
		sources.EnvSources:          `{"s":{"arn":"` + prefix + `s","dlq":"d"}}`,
		sources.EnvExtraSources:     `{"t":{"arn":"` + prefix + `t"},"far":{"arn":"arn:aws:sqs:eu-west-1:444455556666:far"},"away":{"arn":"arn:aws:sqs:us-east-1:111122223333:away"}}`,
		sources.EnvQueueARNs:        prefix + "x",
		sources.EnvDefaultDLQ:       "d",
		sources.EnvSourceTagAccount: "111122223333",
		sources.EnvSourceTagRegion:  "eu-west-1",
		sources.EnvSourceTagValue:   "dlqq",
	}
	getenv := func(k string) string { return vars[k] }
	cfg, err := sources.FromEnv(getenv)
	if err != nil {
		t.Fatal(err)
	}
	tagged, err := sources.Grants(getenv, cfg)
	if err == nil || !strings.Contains(err.Error(), `source "far"`) || !strings.Contains(err.Error(), `source "away"`) ||
		!strings.Contains(err.Error(), "covers queues of account 111122223333 in eu-west-1 only") || strings.Contains(err.Error(), `"t"`) {
		t.Fatalf("Grants = %v", err)
	}
	if !tagged["t"] || tagged["s"] || tagged["x"] || len(tagged) != 1 {
		t.Fatalf("tagged = %v, want t alone", tagged)
	}
	delete(vars, sources.EnvSourceTagAccount)
	if _, err := sources.Grants(getenv, cfg); err == nil || !strings.Contains(err.Error(), "are set together") {
		t.Fatalf("half a tag grant: %v", err)
	}
	vars[sources.EnvSourceTagAccount] = "1111"
	if _, err := sources.Grants(getenv, cfg); err == nil || !strings.Contains(err.Error(), "is not an AWS account id") {
		t.Fatalf("a bad account: %v", err)
	}
	delete(vars, sources.EnvSourceTagAccount)
	delete(vars, sources.EnvSourceTagRegion)
	delete(vars, sources.EnvSourceTagValue)
	if _, err := sources.Grants(getenv, cfg); err == nil || !strings.Contains(err.Error(), `source "t"`) || !strings.Contains(err.Error(), "TaggedSourceAccess=Enabled") {
		t.Fatalf("no tag grant: %v", err)
	}
}

// manySourcesFile writes a sources file of n sources (one in ten FIFO,
// each with its settings) under a package root, and returns the
// variables of a function that reads it with every other source variable.
func manySourcesFile(tb testing.TB, n int) map[string]string {
	tb.Helper()
	root := tb.TempDir()
	var b strings.Builder
	b.WriteString("{")
	for i := range n {
		name := fmt.Sprintf("team-%03d-events-%05d", i%97, i)
		if i%10 == 0 {
			name += ".fifo"
		}
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `%q:{"arn":"%s%s","idempotency_pointer":"/event_id","redrive_cap":2,"settle_window_seconds":3600}`, name, prefix, name)
	}
	b.WriteString("}")
	if err := os.MkdirAll(filepath.Join(root, "config"), 0o755); err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "config", "sources.json"), []byte(b.String()), 0o644); err != nil {
		tb.Fatal(err)
	}
	return map[string]string{
		sources.EnvSourcesFile: "config/sources.json", "LAMBDA_TASK_ROOT": root,
		sources.EnvSources:          `{"s":{"arn":"` + prefix + `s","dlq":"stack-dlq"}}`,
		sources.EnvDefaultDLQ:       "stack-dlq",
		sources.EnvSourceTagAccount: "111122223333", sources.EnvSourceTagRegion: "eu-west-1", sources.EnvSourceTagValue: "dlqq",
	}
}

// initSources is what a function's init does with the sources: read,
// merge, validate, check the grants, build.
func initSources(getenv func(string) string) (int, error) {
	cfg, err := sources.RequiredFromEnv(getenv)
	if err != nil {
		return 0, err
	}
	if _, err := sources.Grants(getenv, cfg); err != nil {
		return 0, err
	}
	built, err := sources.Build(cfg)
	return len(built), err
}

// Tens of thousands of sources in the file: every step of an init is
// linear in their number (the DLQ check once was quadratic: 9 s for
// 6,000 sources, minutes for more; BenchmarkInitOfManySources measures).
func TestInitTakesTensOfThousandsOfSources(t *testing.T) {
	t.Parallel()
	vars := manySourcesFile(t, 40000)
	n, err := initSources(func(k string) string { return vars[k] })
	if err != nil || n != 40001 {
		t.Fatalf("init: %d sources, %v", n, err)
	}
}

// go test -run '^$' -bench BenchmarkInitOfManySources ./shared/domain/sources/
func BenchmarkInitOfManySources(b *testing.B) {
	for _, n := range []int{1000, 10000, 40000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			vars := manySourcesFile(b, n)
			for b.Loop() {
				if _, err := initSources(func(k string) string { return vars[k] }); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

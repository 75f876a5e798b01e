package sources_test

import (
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

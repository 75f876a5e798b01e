package template_test

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/dlqquarantine/dlqq/shared/dev/template"
	"github.com/dlqquarantine/dlqq/shared/domain/sources"
)

// realisticSourceNames are n queue names of the length and shape teams
// give them (<team>-<domain>-<event>-<stage>, one in eight FIFO), 28 to 48
// characters, each different.
func realisticSourceNames(n int) []string {
	teams := []string{"payments", "inventory", "pharmacy-dispensing", "meter-reads", "vision", "ledger-posting", "fulfilment"}
	events := []string{"card-authorisations", "settlement-batches", "controlled-substance-moves", "stock-adjustments", "refund-requests", "hourly-readings", "frame-annotations", "chargebacks"}
	out := make([]string, 0, n)
	for i := 0; len(out) < n; i++ {
		name := fmt.Sprintf("%s-%s-prod", teams[i%len(teams)], events[(i/len(teams))%len(events)])
		if i >= len(teams)*len(events) {
			name = fmt.Sprintf("%s-%d", name, i/(len(teams)*len(events)))
		}
		if i%8 == 7 {
			name += ".fifo"
		}
		out = append(out, name)
	}
	return out
}

// sourcesForm is one way to register sources: every one's ARN in
// SourceQueueArns, and the settings in ExtraSources that differ from the
// defaults (nil: none).
type sourcesForm struct {
	name     string
	settings func(name string) *sources.Config
}

var sourcesForms = []sourcesForm{
	// Routed to the stack's DLQ, every setting defaulted: the ARN alone
	// (a FIFO source names its FIFO DLQ: the stack's is standard).
	{"registered", func(name string) *sources.Config {
		if strings.HasSuffix(name, ".fifo") {
			return &sources.Config{DLQ: ownDLQ(name)}
		}
		return nil
	}},
	// Its own DLQ (an existing queue's).
	{"own dlq", func(name string) *sources.Config { return &sources.Config{DLQ: ownDLQ(name)} }},
	// Its own DLQ, key pointer, schema and cap.
	{"full", func(name string) *sources.Config {
		return &sources.Config{DLQ: ownDLQ(name), IdempotencyPointer: "/event_id", Schema: "inventory-movement.v1", RedriveCap: 3}
	}},
}

// ownDLQ is the name of a source's own DLQ: <name>-dlq, FIFO for a FIFO
// source.
func ownDLQ(name string) string {
	if base, ok := strings.CutSuffix(name, ".fifo"); ok {
		return base + "-dlq.fifo"
	}
	return name + "-dlq"
}

// sourcesParams are the parameters of n sources registered in form f, in
// the account and Region of deployEnv(partitionEnvs[0], …).
func sourcesParams(t *testing.T, n int, f sourcesForm) map[string]any {
	t.Helper()
	settings := map[string]*sources.Config{}
	var arns []string
	for _, name := range realisticSourceNames(n) {
		arns = append(arns, "arn:aws:sqs:"+partitionEnvs[0].Region+":123456789012:"+name)
		if c := f.settings(name); c != nil {
			settings[name] = c
		}
	}
	raw, err := json.Marshal(settings)
	if err != nil {
		t.Fatal(err)
	}
	return map[string]any{"SourceQueueArns": strings.Join(arns, ","), "ExtraSources": string(raw)}
}

// envSize is what Lambda counts against its 4 KB limit of a function's
// environment: every key and value, in bytes.
func envSize(vars map[string]string) int {
	size := 0
	for k, v := range vars {
		size += len(k) + len(v)
	}
	return size
}

// largestEnvironment renders the template at the defaults (the longest
// stack name, CloudFormation's generated names) with params and returns the largest function environment and its function's id;
// every function that reads the sources must read all of them.
func largestEnvironment(t *testing.T, stack string, params map[string]any, want int) (int, string) {
	t.Helper()
	params["AlarmEmail"] = "ops@example.com"
	e := deployEnv(partitionEnvs[0], stack, params)
	tpl, err := template.Open(template.Path(), e)
	if err != nil {
		t.Fatal(err)
	}
	largest, which := 0, ""
	for _, id := range slices.Sorted(maps.Keys(tpl.GetAllServerlessFunctionResources())) {
		f := tpl.GetAllServerlessFunctionResources()[id]
		if f.Environment == nil {
			continue
		}
		if size := envSize(f.Environment.Variables); size > largest {
			largest, which = size, id
		}
		if _, ok := f.Environment.Variables[sources.EnvSources]; !ok {
			continue
		}
		cfg, err := sources.FromVariables(f.Environment.Variables)
		if err != nil {
			t.Fatalf("%s: %v", id, err)
		}
		if len(cfg) != want+1 {
			t.Fatalf("%s reads %d sources, want %d", id, len(cfg), want+1)
		}
	}
	return largest, which
}

// lambdaEnvLimit is Lambda's limit of a function's environment: 4 KB for
// all its variables together (Lambda quotas, "Function configuration,
// deployment, and execution").
const lambdaEnvLimit = 4096

// How many sources a deployment can register before a function's
// environment passes Lambda's 4 KB, in each form, at the defaults (with
// the longest stack name and realistic queue names): docs/configuration.md
// states these numbers and the test holds it to them.
func TestExtraSourcesFit(t *testing.T) {
	doc := readDoc(t, "configuration.md")
	for _, f := range sourcesForms {
		row := fmt.Sprintf("| %s |", f.name)
		for _, stack := range []string{longestStack, "dlqq"} {
			lo, hi := 0, 200 // lo fits; hi does not
			if size, id := largestEnvironment(t, stack, sourcesParams(t, hi, f), hi); size <= lambdaEnvLimit {
				t.Fatalf("%s: %d sources still fit (%s: %d bytes)", f.name, hi, id, size)
			}
			for hi-lo > 1 {
				mid := (lo + hi) / 2
				if size, _ := largestEnvironment(t, stack, sourcesParams(t, mid, f), mid); size <= lambdaEnvLimit {
					lo = mid
				} else {
					hi = mid
				}
			}
			size, id := largestEnvironment(t, stack, sourcesParams(t, lo, f), lo)
			t.Logf("%s, stack %s: %d sources fit (%s's environment: %d bytes)", f.name, stack, lo, id, size)
			row += fmt.Sprintf(" %d |", lo)
		}
		if !strings.Contains(doc, row) {
			t.Errorf("docs/configuration.md has no row %q: the sources that fit (a %d-character stack name, then dlqq), as this test finds them", row, len(longestStack))
		}
	}
}

package template_test

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

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

// Every configured source, of every kind the configuration has (the
// stack's own queue, registered queues standard and FIFO, one in another
// account, the attached existing queue), is granted to the functions that
// replay (redrive and operator: SendMessageBatch, GetQueueAttributes,
// GetQueueUrl, and the queue's SSE-KMS key through SQS); a queue nobody
// registered, or a key not listed, is not; and without its managed policy
// a registered queue is not either.
func TestEverySourceIsGrantedToTheFunctionsThatReplay(t *testing.T) {
	const (
		other    = "444455556666"
		key1     = "arn:aws:kms:eu-west-1:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab"
		key2     = "arn:aws:kms:eu-west-1:444455556666:key/mrk-0123456789abcdef0123456789abcdef"
		stray    = "arn:aws:kms:eu-west-1:111122223333:key/00000000-0000-0000-0000-000000000000"
		attached = "arn:aws:sqs:eu-west-1:111122223333:legacy-orders"
	)
	params := map[string]any{
		"SourceQueueArns":     "arn:aws:sqs:eu-west-1:111122223333:orders,arn:aws:sqs:eu-west-1:111122223333:payments.fifo,arn:aws:sqs:eu-west-1:" + other + ":partner-events",
		"SourceKmsKeyArns":    key1 + "," + key2,
		"ExtraSources":        `{"payments.fifo":{"dlq":"payments-dlq.fifo","redrive_cap":2}}`,
		"ExtraSourceQueueArn": attached,
		"ExtraDLQArn":         "arn:aws:sqs:eu-west-1:111122223333:legacy-orders-dlq",
	}
	s := openStack(t, params)
	vars := map[string]string{}
	for k, v := range props(s.resources["RedriveFunction"])["Environment"].(map[string]any)["Variables"].(map[string]any) {
		vars[k] = str(v)
	}
	cfg, err := sources.FromVariables(vars)
	if err != nil {
		t.Fatal(err)
	}
	if err := sources.Ungranted(func(k string) string { return vars[k] }, cfg); err != nil {
		t.Fatal(err)
	}
	want := []string{"legacy-orders", "orders", "partner-events", "payments.fifo", "prod-source"}
	if got := slices.Sorted(maps.Keys(cfg)); !slices.Equal(got, want) {
		t.Fatalf("the redrive function's sources are %v, want %v", got, want)
	}
	// Each registered queue's key (which key encrypts which queue is the
	// deployment's; here one each, the stack's own queue its own key).
	keyOf := map[string]string{"orders": key1, "payments.fifo": key1, "partner-events": key2, "legacy-orders": key1}
	replay := func(s *stack, name, arn string) []request {
		parts := strings.Split(arn, ":")
		url := "https://sqs." + parts[3] + ".amazonaws.com/" + parts[4] + "/" + name
		d := func(fn, op string, p any) []request { return describe(fn, parts[3], env.Account, "SQS", op, p) }
		var out []request
		for _, fn := range []string{"RedriveFunction", "OperatorFunction"} {
			out = slices.Concat(out,
				d(fn, "SendMessageBatch", &sqs.SendMessageBatchInput{QueueUrl: aws.String(url)}),
				d(fn, "GetQueueAttributes", &sqs.GetQueueAttributesInput{QueueUrl: aws.String(url)}),
				d(fn, "GetQueueUrl", &sqs.GetQueueUrlInput{QueueName: aws.String(name), QueueOwnerAWSAccountId: aws.String(parts[4])}))
		}
		return out
	}
	check := func(s *stack, calls []request) []string {
		var found []string
		for _, fn := range []string{"RedriveFunction", "OperatorFunction"} {
			var mine []request
			for _, c := range calls {
				if c.Function == fn {
					mine = append(mine, c)
				}
			}
			found = append(found, s.check(fn, mine)...)
		}
		return found
	}
	for _, name := range want {
		arn := cfg[name].ARN
		if k, ok := keyOf[name]; ok {
			s.external[arn] = k
		}
		if found := check(s, replay(s, name, arn)); len(found) > 0 {
			t.Errorf("source %s (%s) is not granted: %q", name, arn, found)
		}
	}

	// A queue nobody registered is not granted, nor a key not listed.
	const unregistered = "arn:aws:sqs:eu-west-1:111122223333:someone-elses"
	wantFinding(t, check(s, replay(s, "someone-elses", unregistered)), "RedriveFunction (role RedriveRole): sqs:SendMessage on "+unregistered, "no statement")
	c := s.clone()
	c.external[cfg["orders"].ARN] = stray
	wantFinding(t, check(c, replay(c, "orders", cfg["orders"].ARN)), "RedriveFunction (role RedriveRole): kms:GenerateDataKey on "+stray, "no statement")
	// Without the managed policies, the registered queues are not granted
	// (the stack's own and the attached one still are).
	c = s.clone()
	delete(c.resources, "RedriveSourceQueuesPolicy")
	wantFinding(t, check(c, replay(c, "partner-events", cfg["partner-events"].ARN)), "OperatorFunction (role RedriveRole): sqs:SendMessage on "+cfg["partner-events"].ARN, "no statement")
	if found := check(c, replay(c, "legacy-orders", attached)); len(found) > 0 {
		t.Errorf("the attached queue depends on the registered queues' policy: %q", found)
	}
	c = s.clone()
	delete(c.resources, "RedriveSourceKeysPolicy")
	wantFinding(t, check(c, replay(c, "orders", cfg["orders"].ARN)), "RedriveFunction (role RedriveRole): kms:GenerateDataKey on "+key1, "no statement")

	// With no registered queue and no key (the defaults), neither policy
	// exists and the stack's own queue alone is granted.
	d := openStack(t, nil)
	for _, id := range []string{"RedriveSourceQueuesPolicy", "RedriveSourceKeysPolicy"} {
		if d.exists(d.resources[id]) {
			t.Errorf("%s exists with empty lists (an empty CommaDelimitedList is [\"\"])", id)
		}
	}
	if found := check(d, replay(d, "prod-source", "arn:aws:sqs:eu-west-1:111122223333:prod-source")); len(found) > 0 {
		t.Errorf("the stack's own queue: %q", found)
	}
	wantFinding(t, check(d, replay(d, "orders", "arn:aws:sqs:eu-west-1:111122223333:orders")), "RedriveFunction (role RedriveRole): sqs:SendMessage on arn:aws:sqs:eu-west-1:111122223333:orders", "no statement")
}

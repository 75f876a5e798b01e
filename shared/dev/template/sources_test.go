package template_test

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	cloudformationcw "github.com/awslabs/goformation/v7/cloudformation/cloudwatch"
	"gopkg.in/yaml.v3"

	"github.com/dlqquarantine/dlqq/shared/dev/template"
	"github.com/dlqquarantine/dlqq/shared/domain/sources"
	"github.com/dlqquarantine/dlqq/shared/usecase/metrics"
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
	// Routed to the stack's DLQ of its kind, every setting defaulted: the
	// ARN alone.
	{"registered", func(string) *sources.Config { return nil }},
	// Its own key pointer, schema and cap (a dlq of its own must be one
	// ingest takes batches from: the attached one, one per stack).
	{"full", func(string) *sources.Config {
		return &sources.Config{IdempotencyPointer: "/event_id", Schema: "inventory-movement.v1", RedriveCap: 3}
	}},
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
			// The size grows about linearly with the sources: estimate from
			// 0 and 64 sources, then step to the exact largest that fits.
			size := func(n int) int {
				s, _ := largestEnvironment(t, stack, sourcesParams(t, n, f), n)
				return s
			}
			s0, s64 := size(0), size(64)
			if s64 <= lambdaEnvLimit {
				t.Fatalf("%s: 64 sources still fit (%d bytes)", f.name, s64)
			}
			lo := max(0, (lambdaEnvLimit-s0)*64/(s64-s0))
			for lo > 0 && size(lo) > lambdaEnvLimit {
				lo--
			}
			for size(lo+1) <= lambdaEnvLimit {
				lo++
			}
			got, id := largestEnvironment(t, stack, sourcesParams(t, lo, f), lo)
			t.Logf("%s, stack %s: %d sources fit (%s's environment: %d bytes)", f.name, stack, lo, id, got)
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
		"ExtraSources":        `{"payments.fifo":{"redrive_cap":2}}`,
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
	replay, check := replayCalls, checkReplay
	for _, name := range want {
		arn := cfg[name].ARN
		if k, ok := keyOf[name]; ok {
			s.external[arn] = k
		}
		if found := check(s, replay(s, name, arn)); len(found) > 0 {
			t.Errorf("source %s (%s) is not granted: %q", name, arn, found)
		}
	}

	// The metrics function reads the depth of the attached DLQ (ingest
	// takes batches from it): a DLQ it could not read would leave that
	// source unmeasured on every run.
	const attachedDLQ = "arn:aws:sqs:eu-west-1:111122223333:legacy-orders-dlq"
	dlqURL := "https://sqs.eu-west-1.amazonaws.com/111122223333/legacy-orders-dlq"
	measure := slices.Concat(
		describe("MetricsFunction", "eu-west-1", env.Account, "SQS", "GetQueueAttributes", &sqs.GetQueueAttributesInput{QueueUrl: aws.String(dlqURL)}),
		describe("MetricsFunction", "eu-west-1", env.Account, "SQS", "GetQueueUrl", &sqs.GetQueueUrlInput{QueueName: aws.String("legacy-orders-dlq")}))
	if found := s.check("MetricsFunction", measure); len(found) > 0 {
		t.Errorf("the attached DLQ %s is not readable by the metrics function: %q", attachedDLQ, found)
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

// replayCalls are the calls the redrive and operator functions make to
// replay into the queue arn of source name.
func replayCalls(s *stack, name, arn string) []request {
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

// checkReplay returns what s's roles do not grant of calls, function by
// function.
func checkReplay(s *stack, calls []request) []string {
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

// With TaggedSourceAccess=Enabled, a source in no ARN list (the sources
// file's) is granted by its queue's tag dlq-quarantine:source=<stack> and
// its key's alike, through SQS: exactly the stack's value, in the stack's
// account, never a DLQ of the stack, and nothing when the switch is off.
// The run reads the tag (ListQueueTags) under the same grant.
func TestTaggedSourcesAreGrantedByTheirTagAlone(t *testing.T) {
	const (
		arn   = "arn:aws:sqs:eu-west-1:111122223333:pharmacy-dispensing-moves"
		other = "arn:aws:sqs:eu-west-1:444455556666:pharmacy-dispensing-moves"
		key   = "arn:aws:kms:eu-west-1:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab"
	)
	s := openStack(t, map[string]any{"TaggedSourceAccess": "Enabled"})
	vars := map[string]string{}
	for k, v := range props(s.resources["RedriveFunction"])["Environment"].(map[string]any)["Variables"].(map[string]any) {
		vars[k] = str(v)
	}
	g, ok, err := sources.TagGrantFromEnv(func(k string) string { return vars[k] })
	if err != nil || !ok || g.Account != env.Account || g.Value != env.StackName {
		t.Fatalf("the redrive function's tag grant: %+v %v %v", g, ok, err)
	}
	stackTag := map[string]string{sources.SourceTagKey: env.StackName}
	tagged := func(s *stack, arn string, tags map[string]string) *stack {
		c := s.clone()
		c.external[arn] = key
		c.tags[arn], c.tags[key] = tags, tags
		return c
	}
	listTags := func(fn, arn string) []request {
		parts := strings.Split(arn, ":")
		return describe(fn, parts[3], env.Account, "SQS", "ListQueueTags", &sqs.ListQueueTagsInput{QueueUrl: aws.String("https://sqs." + parts[3] + ".amazonaws.com/" + parts[4] + "/" + parts[5])})
	}
	calls := slices.Concat(replayCalls(s, "pharmacy-dispensing-moves", arn), listTags("RedriveFunction", arn), listTags("OperatorFunction", arn))
	if found := checkReplay(tagged(s, arn, stackTag), calls); len(found) > 0 {
		t.Fatalf("a tagged source is not granted: %q", found)
	}
	send := "RedriveFunction (role RedriveRole): sqs:SendMessage on "
	wantFinding(t, checkReplay(tagged(s, arn, nil), calls), send+arn, "no statement")
	wantFinding(t, checkReplay(tagged(s, arn, map[string]string{sources.SourceTagKey: "another-stack"}), calls), send+arn, "no statement")
	c := tagged(s, arn, stackTag)
	c.tags[key] = nil
	wantFinding(t, checkReplay(c, calls), "RedriveFunction (role RedriveRole): kms:GenerateDataKey on "+key, "no statement")
	wantFinding(t, checkReplay(tagged(s, other, stackTag), replayCalls(s, "pharmacy-dispensing-moves", other)), send+other, "no statement")
	// Another Region (a stack of the same name there has its own grant).
	const away = "arn:aws:sqs:us-east-2:111122223333:pharmacy-dispensing-moves"
	wantFinding(t, checkReplay(tagged(s, away, stackTag), replayCalls(s, "pharmacy-dispensing-moves", away)), send+away, "no statement")
	if g.Region != env.Region {
		t.Errorf("the tag grant's Region is %q, want the stack's %s", g.Region, env.Region)
	}
	// The key through another service than SQS: not granted.
	c = tagged(s, arn, stackTag)
	direct := request{Function: "RedriveFunction", Action: "kms:Decrypt", Resource: key, Context: map[string]string{"aws:securetransport": "true", "kms:viaservice": "s3.eu-west-1.amazonaws.com", "kms:calleraccount": env.Account}}
	wantFinding(t, c.check("RedriveFunction", []request{direct}), "RedriveFunction (role RedriveRole): kms:Decrypt on "+key, "")
	// The stack's DLQs, tagged: denied (a DLQ is never a source).
	for _, id := range []string{"DeadLetterQueue", "FifoDeadLetterQueue", "LedgerFailureQueue"} {
		name := s.queueName(id)
		dlq := "arn:aws:sqs:" + env.Region + ":" + env.Account + ":" + name
		c := s.clone()
		c.tags[dlq] = stackTag
		wantFinding(t, checkReplay(c, replayCalls(c, name, dlq)), send+dlq, "")
	}
	// Where SQS has no ABAC (four Regions), the switch grants nothing:
	// the functions then refuse, at init, a source no ARN list names.
	e := env
	e.Region = "eu-central-2"
	e.Params = map[string]any{"TaggedSourceAccess": "Enabled"}
	zurich, err := template.Open(template.Path(), e)
	if err != nil {
		t.Fatal(err)
	}
	if conditionHolds(zurich, zurich.Resources["RedriveTaggedSourcesPolicy"]) || !conditionHolds(open(t), open(t).Resources["DeadLetterQueue"]) {
		t.Error("RedriveTaggedSourcesPolicy in eu-central-2, where SQS authorizes on no tag")
	}
	if fn, _ := zurich.GetServerlessFunctionWithName("RedriveFunction"); fn.Environment.Variables[sources.EnvSourceTagValue] != "" {
		t.Error("the redrive function is told of a tag grant in eu-central-2")
	}
	// Off (the default): the tag grants nothing, and no function is told
	// of a grant.
	d := openStack(t, nil)
	if d.exists(d.resources["RedriveTaggedSourcesPolicy"]) {
		t.Error("RedriveTaggedSourcesPolicy exists with TaggedSourceAccess=Disabled")
	}
	wantFinding(t, checkReplay(tagged(d, arn, stackTag), calls), send+arn, "no statement")
	for k, v := range props(d.resources["RedriveFunction"])["Environment"].(map[string]any)["Variables"].(map[string]any) {
		vars[k] = str(v)
	}
	if _, ok, err := sources.TagGrantFromEnv(func(k string) string { return vars[k] }); ok || err != nil {
		t.Fatalf("TaggedSourceAccess=Disabled: a tag grant (%v, %v)", ok, err)
	}
}

// The alarms on the sources' health are Metrics Insights alarms grouped by
// Source, one contributor per source (configured or not): with several
// sources publishing, a breach on one of them fires the alarm once and
// names that source alone, a healthy set never fires, and a second source
// breaching later keeps it in ALARM and is named too. Each of these alarms
// counts against CloudWatch's 200 Metrics Insights alarms per account and
// Region, which docs/operations.md states per stack.
func TestSourceAlarmsNameTheBreachingSource(t *testing.T) {
	tpl := open(t)
	sourcesOf := []string{"prod-source", "orders", "payments.fifo"}
	mi := 0
	for _, id := range slices.Sorted(maps.Keys(tpl.GetAllCloudWatchAlarmResources())) {
		a := tpl.GetAllCloudWatchAlarmResources()[id]
		if len(a.Metrics) != 1 {
			continue
		}
		q, ok := parseMI(t, aws.ToString(a.Metrics[0].Expression))
		if !ok {
			continue
		}
		mi++
		if q.ns != "DLQQuarantine" || q.dim != "Source" {
			t.Errorf("%s groups %s by %s", id, q.ns, q.dim)
		}
		if a.Metrics[0].ReturnData == nil || !*a.Metrics[0].ReturnData || aws.ToInt(a.Metrics[0].Period) == 0 {
			t.Errorf("%s: its query must return data and have a period", id)
		}
		th := aws.ToFloat64(a.Threshold)
		healthy, breach := 0.0, th+1
		if strings.HasPrefix(a.ComparisonOperator, "LessThan") {
			healthy, breach = 100, th-1
		}
		key := func(src string) string {
			return metricKey(q.ns, q.metric, []cloudformationcw.Alarm_Dimension{{Name: q.dim, Value: src}})
		}
		w := world{}
		for _, src := range sourcesOf {
			w[key(src)] = constant(healthy, 0, 120)
		}
		// The same metric with more dimensions is no contributor.
		w[metricKey(q.ns, q.metric, []cloudformationcw.Alarm_Dimension{{Name: "Source", Value: "orders"}, {Name: "Policy", Value: "p"}})] = constant(breach, 0, 120)
		if got := entered(simulate(t, a, w, 120), "ALARM"); len(got) != 0 {
			t.Errorf("%s: healthy sources fire it at %v", id, got)
		}
		w[key("orders")] = func(m int) (float64, bool) {
			if m >= 30 {
				return breach, true
			}
			return healthy, true
		}
		w[key("payments.fifo")] = func(m int) (float64, bool) {
			if m >= 70 {
				return breach, true
			}
			return healthy, true
		}
		period := aws.ToInt(a.Metrics[0].Period)
		res := simulateContributors(t, a, q, period, w, 120, readings{})
		fired := entered(res.changes, "ALARM")
		if len(fired) != 1 || fired[0] < 30 {
			t.Fatalf("%s: one source breaching from minute 30 fires it at %v (changes %v)", id, fired, res.changes)
		}
		if got := res.inAlarm(fired[0]); !slices.Equal(got, []string{"orders"}) {
			t.Errorf("%s names %v at minute %d, want orders", id, got, fired[0])
		}
		if got := res.inAlarm(119); !slices.Equal(got, []string{"orders", "payments.fifo"}) {
			t.Errorf("%s names %v at the end, want both breaching sources", id, got)
		}
		if got := slices.Sorted(maps.Keys(res.by)); !slices.Equal(got, []string{"orders", "payments.fifo", "prod-source"}) {
			t.Errorf("%s's contributors are %v", id, got)
		}
	}
	doc := strings.Join(strings.Fields(readDoc(t, "operations.md")), " ")
	if want := fmt.Sprintf("%d Metrics Insights alarms", mi); mi == 0 || !strings.Contains(doc, want) {
		t.Errorf("docs/operations.md does not say %q (the stack's share of the 200 per account and Region)", want)
	}
}

// The dashboard shows every source's health with the alarms' queries
// (Metrics Insights, GROUP BY Source, the 100 worst of each), and names no
// source: a source added later appears without a change.
func TestDashboardShowsEverySource(t *testing.T) {
	dash := lookup(t, open(t).GetCloudWatchDashboardWithName, "HealthDashboard")
	var body struct {
		Widgets []struct {
			Properties struct {
				Title   string  `json:"title"`
				Metrics [][]any `json:"metrics"`
			} `json:"properties"`
		} `json:"widgets"`
	}
	if err := json.Unmarshal([]byte(dash.DashboardBody), &body); err != nil {
		t.Fatal(err)
	}
	shown := map[string]bool{}
	for _, w := range body.Widgets {
		for _, m := range w.Properties.Metrics {
			q, ok := m[0].(map[string]any)
			if !ok {
				continue
			}
			expr, _ := q["expression"].(string)
			base, limit, ok := strings.Cut(expr, " ORDER BY ")
			if !ok || !strings.HasSuffix(limit, " LIMIT 100") {
				t.Errorf("widget %q: %q is not ordered and limited to the 100 worst sources", w.Properties.Title, expr)
			}
			mi, ok := parseMI(t, base)
			if !ok || mi.dim != "Source" || mi.ns != "DLQQuarantine" {
				t.Errorf("widget %q: %q is no Metrics Insights query grouped by Source", w.Properties.Title, expr)
				continue
			}
			if worst := map[string]string{"Minimum": "ASC"}[mi.stat]; worst == "ASC" != strings.Contains(limit, "ASC") {
				t.Errorf("widget %q: %q does not show the worst first", w.Properties.Title, expr)
			}
			shown[mi.metric] = true
		}
	}
	for _, m := range []string{metrics.MetricDLQDepth, metrics.MetricDLQInFlight, metrics.MetricOldestAge, metrics.MetricArrivals, metrics.MetricSuccessRate,
		metrics.MetricPoison, metrics.MetricIntegrityHolds, metrics.MetricDominantShare} {
		if !shown[m] {
			t.Errorf("the dashboard shows no %s by source", m)
		}
	}
	if strings.Contains(dash.DashboardBody, `"Source","`) || strings.Contains(dash.DashboardBody, "prod-source") {
		t.Error("the dashboard names a source")
	}
}

// Whoever may tag a queue or a key of the account widens the redrive
// role's reach under TaggedSourceAccess: no role of the stack may, on any
// queue or key (a function's stolen credentials never widen another's).
func TestNoRoleOfTheStackCanTag(t *testing.T) {
	s := openStack(t, map[string]any{"TaggedSourceAccess": "Enabled", "ExtraDLQArn": "arn:aws:sqs:eu-west-1:111122223333:legacy-dlq"})
	queue := "arn:aws:sqs:eu-west-1:" + env.Account + ":pharmacy-dispensing-moves"
	key := "arn:aws:kms:eu-west-1:" + env.Account + ":key/1234abcd-12ab-34cd-56ef-1234567890ab"
	roles := s.of("AWS::IAM::Role")
	if len(roles) < 5 {
		t.Fatalf("the template's roles: %v", roles)
	}
	for _, role := range roles {
		for _, q := range []request{
			{Action: "sqs:TagQueue", Resource: queue}, {Action: "sqs:UntagQueue", Resource: queue},
			{Action: "sqs:TagQueue", Resource: "arn:aws:sqs:eu-west-1:" + env.Account + ":" + s.queueName("DeadLetterQueue")},
			{Action: "kms:TagResource", Resource: key}, {Action: "kms:UntagResource", Resource: key},
		} {
			q.Context = map[string]string{"aws:securetransport": "true"}
			if why := s.decide(role, q); why == "" {
				t.Errorf("role %s may %s", role, q)
			}
		}
	}
}

// The checker takes a resource's tags as absent on the template's own
// resources: right for an Allow that rests on one (it never matches), not
// for a Deny, which no policy of the stack's roles may therefore hold.
// (The guardrails, which the stack's roles never hold, deny by the tag:
// TestGuardrailsDenyEveryControl gives their requests the tags.)
func TestNoDenyRestsOnAResourceTag(t *testing.T) {
	s := openStack(t, map[string]any{"TaggedSourceAccess": "Enabled"})
	var walk func(v any, deny bool)
	walk = func(v any, deny bool) {
		switch x := v.(type) {
		case map[string]any:
			if x["Effect"] == "Deny" {
				deny = true
			}
			for k, e := range x {
				if deny && strings.HasPrefix(strings.ToLower(k), "aws:resourcetag/") {
					t.Errorf("a Deny rests on %s", k)
				}
				walk(e, deny)
			}
		case []any:
			for _, e := range x {
				walk(e, deny)
			}
		}
	}
	roles := 0
	for _, role := range s.of("AWS::IAM::Role") {
		ids, problems := s.identityPolicies(role)
		if len(problems) > 0 {
			t.Fatal(problems)
		}
		for _, st := range ids {
			walk(st.st, false)
		}
		roles++
	}
	if roles < 5 {
		t.Fatalf("%d roles", roles)
	}
}

// Every function's package holds config/ beside bootstrap (sam build's
// targets and make build's zips), where SOURCES_FILE names the sources
// file; the repository's own file is a valid configuration.
func TestEveryPackageShipsTheSourcesFile(t *testing.T) {
	root := filepath.Join(filepath.Dir(template.Path()), "..")
	raw, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	if fns := open(t).GetAllServerlessFunctionResources(); fns["IngestFunction"].Environment.Variables[sources.EnvSourcesFile] != "" {
		t.Error("a stack without SourcesFile names a sources file")
	}
	tpl := openWith(t, map[string]any{"SourcesFile": "config/sources.json"})
	fns := tpl.GetAllServerlessFunctionResources()
	files := 0
	for _, id := range slices.Sorted(maps.Keys(fns)) {
		target := regexp.MustCompile(`(?m)^build-` + id + `:\n\tCGO_ENABLED=0 [^\n]*-o \$\(ARTIFACTS_DIR\)/bootstrap [^\n]*\n\tcp -R config \$\(ARTIFACTS_DIR\)/\n`)
		if !target.Match(raw) {
			t.Errorf("the Makefile's build-%s does not copy config/ into the package", id)
		}
		fn := fns[id]
		if fn.Environment == nil || fn.Environment.Variables[sources.EnvSourcesFile] == "" {
			continue
		}
		files++
		vars := maps.Clone(fn.Environment.Variables)
		vars["LAMBDA_TASK_ROOT"] = root
		if p := sources.SourcesFilePath(func(k string) string { return vars[k] }); p != filepath.Join(root, "config", "sources.json") {
			t.Errorf("%s reads its sources file from %s", id, p)
		}
		if _, err := sources.FromVariables(vars); err != nil {
			t.Errorf("%s with the repository's sources file: %v", id, err)
		}
	}
	if files != 4 {
		t.Errorf("%d functions read a sources file, want the 4 that read the sources", files)
	}
	// SourcesFile names a JSON file under config/, inside the package.
	var decl struct {
		Parameters map[string]map[string]any `yaml:"Parameters"`
	}
	rawTpl, err := os.ReadFile(template.Path())
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(rawTpl, &decl); err != nil {
		t.Fatal(err)
	}
	pattern := regexp.MustCompile(decl.Parameters["SourcesFile"]["AllowedPattern"].(string))
	for v, ok := range map[string]bool{"": true, "config/sources.json": true, "config/prod/sources.v2.json": true,
		"config/../etc/x.json": false, "config/./x.json": false, "/var/task/config/sources.json": false, "config/sources.yaml": false, "sources.json": false} {
		if pattern.MatchString(v) != ok {
			t.Errorf("SourcesFile %q: allowed %v, want %v", v, !ok, ok)
		}
	}
	if !strings.Contains(string(raw), "$(GO) run ./internal/mkzip $@ $(BUILD)/$*/bootstrap config\n") {
		t.Error("make build's zips do not hold config/")
	}
	// The file's example in docs/configuration.md is a sources file.
	doc, err := os.ReadFile(filepath.Join(root, "docs", "configuration.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, _ := strings.Cut(string(doc), "### The sources file")
	section, _, _ = strings.Cut(section, "\n### ")
	m := regexp.MustCompile("(?s)```json\n(.*?)```").FindStringSubmatch(section)
	if m == nil {
		t.Fatal("docs/configuration.md shows no sources file")
	}
	cfg, err := sources.MergeFile("", "", m[1], sources.Registry{DLQ: "prod-dlq"})
	if err != nil || len(cfg) == 0 {
		t.Fatalf("the documented sources file: %v, %v", cfg, err)
	}
	for name, c := range cfg {
		if c.ARN == "" || c.DLQ != "prod-dlq" {
			t.Errorf("the documented sources file's %s: %+v", name, c)
		}
	}
}

// A tagged source dead-letters into the stack's DLQ of its kind: with
// TaggedSourceAccess alone (no registered ARN), both DLQs let any queue of
// the account name them in a redrive policy, as registered sources do
// (SQS refuses a RedrivePolicy whose DLQ's RedriveAllowPolicy does not
// allow the queue).
func TestTaggedSourcesMayDeadLetterIntoTheStacksDLQs(t *testing.T) {
	for _, c := range []struct {
		params map[string]any
		want   string
	}{
		{nil, ""},
		{map[string]any{"TaggedSourceAccess": "Enabled"}, "allowAll"},
		{map[string]any{"SourceQueueArns": "arn:aws:sqs:eu-west-1:111122223333:orders"}, "allowAll"},
	} {
		tpl := openWith(t, c.params)
		for _, id := range []string{"DeadLetterQueue", "FifoDeadLetterQueue"} {
			q := lookup(t, tpl.GetSQSQueueWithName, id)
			got, _ := q.RedriveAllowPolicy.(map[string]any)["redrivePermission"].(string)
			if (c.want == "allowAll") != (got == "allowAll") {
				t.Errorf("%v: %s's RedriveAllowPolicy is %v", c.params, id, q.RedriveAllowPolicy)
			}
		}
	}
}

// Every benchmark the docs tell a reader to run exists, in the package
// the command names (a renamed benchmark would make the command measure
// nothing and pass).
func TestDocsBenchmarksExist(t *testing.T) {
	root := filepath.Join(filepath.Dir(template.Path()), "..")
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := regexp.MustCompile(`(?s)go test -run '\^\$' -bench '?\^?(Benchmark\w+)\$?'?[^.` + "`" + `]*?(\./[\w/]+/)`)
	found := 0
	for _, doc := range append(docs, filepath.Join(root, "README.md")) {
		raw, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range cmd.FindAllStringSubmatch(string(raw), -1) {
			found++
			files, _ := filepath.Glob(filepath.Join(root, m[2], "*_test.go"))
			defined := false
			for _, f := range files {
				src, err := os.ReadFile(f)
				if err != nil {
					t.Fatal(err)
				}
				defined = defined || strings.Contains(string(src), "func "+m[1]+"(b *testing.B)")
			}
			if !defined {
				t.Errorf("%s: %s is no benchmark of %s", filepath.Base(doc), m[1], m[2])
			}
		}
	}
	if found < 2 {
		t.Errorf("found %d benchmark commands in the docs", found)
	}
}

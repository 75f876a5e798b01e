package template_test

// Checks for issue 18: a template that deploys, survives its own deletion,
// and pages someone when a piece of it breaks. The emulators enforce no
// IAM, run no lifecycle rule and deliver no alarm, so each property is
// checked here on the template itself.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/awslabs/goformation/v7/cloudformation"
	cloudformationcw "github.com/awslabs/goformation/v7/cloudformation/cloudwatch"
	"gopkg.in/yaml.v3"

	"github.com/dlqquarantine/dlqq/shared/adapter/s3store"
	"github.com/dlqquarantine/dlqq/shared/dev/s3fake"
	"github.com/dlqquarantine/dlqq/shared/dev/template"
	"github.com/dlqquarantine/dlqq/shared/usecase/metrics"
)

// resourceMeta is a resource's policies and properties as CloudFormation
// reads them.
type resourceMeta struct {
	Type                string
	DeletionPolicy      string
	UpdateReplacePolicy string
	DependsOn           []string
	Properties          json.RawMessage
}

// keptOnDelete reports whether deleting the stack keeps the resource:
// Retain, or RetainExceptOnCreate (kept but for the failed create that
// made it).
func (m resourceMeta) keptOnDelete() bool {
	return m.DeletionPolicy == "Retain" || m.DeletionPolicy == "RetainExceptOnCreate"
}

func meta(t *testing.T, tpl *cloudformation.Template, id string) resourceMeta {
	t.Helper()
	res, ok := tpl.Resources[id]
	if !ok {
		t.Fatalf("no resource %s", id)
	}
	raw, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	var m resourceMeta
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// statementsOf returns a policy document's statements.
func statementsOf(t *testing.T, doc any) []map[string]any {
	t.Helper()
	raw, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	var d struct{ Statement []map[string]any }
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatalf("policy document %s: %v", raw, err)
	}
	return d.Statement
}

// list reads a policy element that may be a string or a list of strings.
func list(v any) []string {
	switch x := v.(type) {
	case string:
		return []string{x}
	case []any:
		var out []string
		for _, e := range x {
			if s, ok := e.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}

// arnLike matches IAM's ArnLike / StringLike: * is any run of characters,
// ? one character.
func arnLike(pattern, s string) bool {
	re := "^" + strings.NewReplacer(`\*`, ".*", `\?`, ".").Replace(regexp.QuoteMeta(pattern)) + "$"
	return regexp.MustCompile(re).MatchString(s)
}

// condition returns the values a statement's condition operator gives key.
func condition(st map[string]any, op, key string) []string {
	c, _ := st["Condition"].(map[string]any)
	o, _ := c[op].(map[string]any)
	return list(o[key])
}

func servicePrincipal(st map[string]any) []string {
	p, _ := st["Principal"].(map[string]any)
	return list(p["Service"])
}

// Item 1: the key outlives the stack with what it encrypts.
func TestRetainedDataKeepsItsKey(t *testing.T) {
	tpl := open(t)
	keys := tpl.GetAllKMSKeyResources()
	if len(keys) == 0 {
		t.Fatal("no KMS key")
	}
	_, names, err := template.OpenNamed(template.Path(), env)
	if err != nil {
		t.Fatal(err)
	}
	used := 0
	for id := range tpl.Resources {
		m := meta(t, tpl, id)
		if !m.keptOnDelete() || m.Type == "AWS::KMS::Key" {
			continue
		}
		for kid := range keys {
			if !bytes.Contains(m.Properties, []byte(names[kid])) {
				continue
			}
			used++
			km := meta(t, tpl, kid)
			if !km.keptOnDelete() || km.UpdateReplacePolicy != "Retain" {
				t.Errorf("%s is retained but its key %s has DeletionPolicy %q, UpdateReplacePolicy %q: deleting the stack schedules the key for deletion and %s becomes unreadable",
					id, kid, km.DeletionPolicy, km.UpdateReplacePolicy, id)
			}
		}
	}
	if used < 3 {
		t.Errorf("%d retained resources are encrypted with the key, want the table and both buckets", used)
	}
	aliased := false
	for id, a := range tpl.GetAllKMSAliasResources() {
		if a.TargetKeyId == quarantineAlias {
			aliased = true
			if !strings.HasPrefix(a.AliasName, "alias/prod-") {
				t.Errorf("%s: alias %s does not name the stack", id, a.AliasName)
			}
		}
	}
	if !aliased {
		t.Error("the customer key has no alias: once the stack is gone nothing says what the retained key is for")
	}
}

// Item 2: any stack name deploys, and a stack deployed again after a delete
// does not collide with its retained table and buckets.
func TestRetainedNamesWorkForAnyStackName(t *testing.T) {
	bucketName := regexp.MustCompile(`^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$`)
	// 56 characters with capitals: the longest the documented rule allows.
	for _, stack := range []string{"prod", "Prod-EU-West-Quarantine-For-Controlled-Substances-Movesx"} {
		e := env
		e.StackName = stack
		tpl, err := template.Open(template.Path(), e)
		if err != nil {
			t.Fatal(err)
		}
		for id, fn := range tpl.GetAllServerlessFunctionResources() {
			if n := len(aws.ToString(fn.FunctionName)); n > 64 {
				t.Errorf("stack %s: function %s name has %d characters, Lambda allows 64", stack, id, n)
			}
		}
		for id, q := range tpl.GetAllSQSQueueResources() {
			if n := len(aws.ToString(q.QueueName)); n > 80 {
				t.Errorf("stack %s: queue %s name has %d characters, SQS allows 80", stack, id, n)
			}
		}
		for id, b := range tpl.GetAllS3BucketResources() {
			name := aws.ToString(b.BucketName)
			if !bucketName.MatchString(name) {
				t.Errorf("stack %s: bucket %s would be named %q, which S3 refuses", stack, id, name)
			}
			if meta(t, tpl, id).keptOnDelete() && name != template.GeneratedName(stack, id, 63) {
				t.Errorf("stack %s: retained bucket %s has the fixed name %q: deploying the stack again after a delete fails on it", stack, id, name)
			}
		}
		for id, tb := range tpl.GetAllDynamoDBTableResources() {
			if meta(t, tpl, id).keptOnDelete() && aws.ToString(tb.TableName) != template.GeneratedName(stack, id, 255) {
				t.Errorf("stack %s: retained table %s has the fixed name %q: deploying the stack again after a delete fails on it", stack, id, aws.ToString(tb.TableName))
			}
		}
	}
	// A stack deployed with the fixed names keeps them with NamingMode
	// legacy, and NamingMode has no default: an update must choose, so a
	// stack that predates it is never silently given new, empty stores.
	e := env
	e.Params = map[string]any{"NamingMode": "legacy"}
	tpl, err := template.Open(template.Path(), e)
	if err != nil {
		t.Fatal(err)
	}
	pb, _ := tpl.GetS3BucketWithName("PayloadBucket")
	ab, _ := tpl.GetS3BucketWithName("ArchiveBucket")
	tb, _ := tpl.GetDynamoDBTableWithName("QuarantineTable")
	if aws.ToString(pb.BucketName) != "prod-payloads-111122223333" || aws.ToString(ab.BucketName) != "prod-archive-111122223333" || aws.ToString(tb.TableName) != "prod-quarantine" {
		t.Errorf("with NamingMode legacy the names are %s, %s, %s", aws.ToString(pb.BucketName), aws.ToString(ab.BucketName), aws.ToString(tb.TableName))
	}
	// (The resolver fills parameters in; read the declaration itself.)
	var decl struct {
		Parameters map[string]map[string]any `yaml:"Parameters"`
	}
	raw, err := os.ReadFile(template.Path())
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(raw, &decl); err != nil {
		t.Fatal(err)
	}
	p, ok := decl.Parameters["NamingMode"]
	if _, hasDefault := p["Default"]; !ok || hasDefault || fmt.Sprint(p["AllowedValues"]) != "[generated legacy]" {
		t.Errorf("NamingMode: %v; want no default and generated|legacy", p)
	}
}

// Item 3: the extra DLQ's mapping is created after the policy that lets the
// role read it, and takes FIFO queues.
func TestExtraDLQMapping(t *testing.T) {
	tpl := open(t)
	m := lookup(t, tpl.GetLambdaEventSourceMappingWithName, "IngestExtraDLQMapping")
	if !slices.Contains(meta(t, tpl, "IngestExtraDLQMapping").DependsOn, "IngestExtraDLQPolicy") {
		t.Error("IngestExtraDLQMapping does not depend on IngestExtraDLQPolicy: Lambda checks the role when it creates the mapping")
	}
	if m.MaximumBatchingWindowInSeconds != nil {
		t.Errorf("IngestExtraDLQMapping sets a batching window of %d s, which Lambda refuses for a FIFO queue", *m.MaximumBatchingWindowInSeconds)
	}
}

// Item 4: the deploy steps (docs/operations.md) find the template, and no invoke of a
// 15-minute function retries after the CLI's 60 s read timeout.
func TestReadmeDeployAndInvoke(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(filepath.Dir(template.Path()), "..", "docs", "operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(raw), "\n")
	builds := 0
	for i, l := range lines {
		l = strings.TrimSpace(l)
		if strings.HasPrefix(l, "sam build") {
			builds++
			if !strings.Contains(l, "-t infra/template.yaml") && !strings.Contains(l, "--template-file infra/template.yaml") {
				t.Errorf("docs/operations.md line %d: %q finds no template from the repository root", i+1, l)
			}
		}
		if strings.Contains(l, "aws lambda invoke") && !strings.Contains(l, "--cli-read-timeout 0") {
			t.Errorf("docs/operations.md line %d: %q without --cli-read-timeout 0 retries a long run after 60 s and starts a duplicate", i+1, l)
		}
	}
	if builds == 0 {
		t.Error("docs/operations.md has no sam build step")
	}
}

// Item 5: the DLQ is watched by SQS itself, a silent metrics function
// alarms, and every function's errors and throttles alarm.
func TestFailuresThatNobodyWouldSee(t *testing.T) {
	tpl := open(t)
	alarms := tpl.GetAllCloudWatchAlarmResources()
	find := func(ns, metric, dim, value string) []string {
		var out []string
		for id, a := range alarms {
			if aws.ToString(a.Namespace) != ns || aws.ToString(a.MetricName) != metric {
				continue
			}
			for _, d := range a.Dimensions {
				if d.Name == dim && d.Value == value {
					out = append(out, id)
				}
			}
		}
		return out
	}
	for _, m := range []string{"ApproximateNumberOfMessagesVisible", "ApproximateAgeOfOldestMessage"} {
		if len(find("AWS/SQS", m, "QueueName", "prod-dlq")) == 0 {
			t.Errorf("no AWS/SQS %s alarm on the DLQ: a broken metrics function silences every DLQ alarm", m)
		}
	}
	// The heartbeat is metric math: the sample count, an empty period
	// filled with 0, below 1 (TestSweeperHeartbeat runs it).
	heartbeat := false
	for _, id := range mathAlarmOn(tpl, metricKey("DLQQuarantine", metrics.MetricOldestAge, []cloudformationcw.Alarm_Dimension{{Name: "Source", Value: "prod-source"}})) {
		a := alarms[id]
		for _, q := range a.Metrics {
			if ms := q.MetricStat; ms != nil && ms.Stat == "SampleCount" && aws.ToString(a.TreatMissingData) == "breaching" && a.ComparisonOperator == "LessThanThreshold" &&
				aws.ToFloat64(a.Threshold) == 1 && slices.ContainsFunc(a.Metrics, func(e cloudformationcw.Alarm_MetricDataQuery) bool {
				return aws.ToString(e.Expression) == "FILL("+q.Id+", 0)"
			}) {
				heartbeat = true
			}
		}
	}
	if !heartbeat {
		t.Error("no heartbeat alarm on the metrics function's output (FILL(SampleCount, 0) below 1, missing data breaching)")
	}
	// An attached extra DLQ is watched the same way.
	e := env
	e.Params = map[string]any{"ExtraDLQArn": "arn:aws:sqs:eu-west-1:111122223333:legacy-dlq", "ExtraSourceQueueArn": "arn:aws:sqs:eu-west-1:111122223333:legacy"}
	extra, err := template.Open(template.Path(), e)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []string{"ApproximateNumberOfMessagesVisible", "ApproximateAgeOfOldestMessage"} {
		n := 0
		for _, a := range extra.GetAllCloudWatchAlarmResources() {
			for _, d := range a.Dimensions {
				if aws.ToString(a.Namespace) == "AWS/SQS" && aws.ToString(a.MetricName) == m && d.Name == "QueueName" && d.Value == "legacy-dlq" {
					n++
				}
			}
		}
		if n == 0 {
			t.Errorf("no AWS/SQS %s alarm on the extra DLQ", m)
		}
	}
	for id, fn := range tpl.GetAllServerlessFunctionResources() {
		// Redrive runs one at a time: its throttles are by design; what it
		// loses is a dropped event.
		want := []string{"Errors", "Throttles"}
		if id == "RedriveFunction" {
			want = []string{"Errors", "AsyncEventsDropped"}
		}
		for _, m := range want {
			if len(find("AWS/Lambda", m, "FunctionName", aws.ToString(fn.FunctionName))) == 0 {
				t.Errorf("no alarm on %s %s", id, m)
			}
		}
	}
}

// Item 6: every scheduled (asynchronous) invocation has an on-failure
// destination, its EventBridge target a dead-letter queue the queue policy
// lets EventBridge write to, and an alarm watches that queue.
func TestScheduledInvocationsHaveAFailureDestination(t *testing.T) {
	tpl := open(t)
	fns := map[string]string{} // function ARN → logical id
	for id, fn := range tpl.GetAllServerlessFunctionResources() {
		fns["arn:aws:lambda:eu-west-1:111122223333:function:"+aws.ToString(fn.FunctionName)] = id
	}
	configs := map[string]string{} // function name → on-failure destination
	retries := map[string]*int{}
	for id, c := range tpl.GetAllLambdaEventInvokeConfigResources() {
		if c.Qualifier != "$LATEST" {
			t.Errorf("%s configures qualifier %q; the schedules invoke $LATEST", id, c.Qualifier)
		}
		if c.DestinationConfig != nil && c.DestinationConfig.OnFailure != nil {
			configs[c.FunctionName] = c.DestinationConfig.OnFailure.Destination
		}
		retries[c.FunctionName] = c.MaximumRetryAttempts
	}
	var queue string
	scheduled := 0
	for ruleID, rule := range tpl.GetAllEventsRuleResources() {
		ruleArn := "arn:aws:events:eu-west-1:111122223333:rule/prod-" + ruleID
		if rule.Name != nil { // a named rule's ARN ends with its name
			ruleArn = "arn:aws:events:eu-west-1:111122223333:rule/" + *rule.Name
		}
		for _, target := range rule.Targets {
			fnID, ok := fns[target.Arn]
			if !ok {
				continue
			}
			scheduled++
			fn, _ := tpl.GetServerlessFunctionWithName(fnID)
			name := aws.ToString(fn.FunctionName)
			dest := configs[name]
			if dest == "" {
				t.Errorf("%s invokes %s asynchronously with no on-failure destination: a failed run is retried and dropped unseen", ruleID, fnID)
				continue
			}
			if retries[name] == nil {
				t.Errorf("%s: MaximumRetryAttempts is not set deliberately", fnID)
			}
			if queue == "" {
				queue = dest
			}
			if dest != queue {
				t.Errorf("%s reports failures to %s, others to %s: one shared queue, one alarm", fnID, dest, queue)
			}
			if target.DeadLetterConfig == nil || aws.ToString(target.DeadLetterConfig.Arn) != queue {
				t.Errorf("%s target %s has no dead-letter queue (%+v)", ruleID, target.Id, target.DeadLetterConfig)
			}
			roleID := strings.TrimPrefix(aws.ToString(fn.Role), "arn:aws:iam::111122223333:role/prod-")
			if !slices.Contains(grants(t, tpl, roleID)["sqs:SendMessage"], queue) {
				t.Errorf("%s may not send to %s: Lambda sends the failure record with the function's role", roleID, queue)
			}
			allowed := false
			for _, p := range tpl.GetAllSQSQueuePolicyResources() {
				for _, st := range statementsOf(t, p.PolicyDocument) {
					if st["Effect"] == "Allow" && slices.Contains(servicePrincipal(st), "events.amazonaws.com") &&
						slices.Contains(list(st["Action"]), "sqs:SendMessage") && slices.Contains(list(st["Resource"]), queue) &&
						slices.Contains(condition(st, "ArnEquals", "aws:SourceArn"), ruleArn) {
						allowed = true
					}
				}
			}
			if !allowed {
				t.Errorf("no queue policy lets EventBridge send %s's undelivered events to %s", ruleID, queue)
			}
		}
	}
	if scheduled < 5 {
		t.Fatalf("%d scheduled targets, want settle, policies, sweeper, metrics and the ledger's digest", scheduled)
	}
	name := queue[strings.LastIndex(queue, ":")+1:]
	watched := false
	for _, a := range tpl.GetAllCloudWatchAlarmResources() {
		for _, d := range a.Dimensions {
			// Messages sent, not visible: a queue that keeps earlier records
			// would hold the alarm in ALARM, and a later failure would notify
			// nobody.
			if aws.ToString(a.Namespace) == "AWS/SQS" && aws.ToString(a.MetricName) == "NumberOfMessagesSent" && d.Name == "QueueName" && d.Value == name &&
				a.ComparisonOperator == "GreaterThanThreshold" && aws.ToFloat64(a.Threshold) == 0 && aws.ToString(a.Statistic) == "Sum" {
				watched = true
			}
		}
	}
	if !watched {
		t.Errorf("no alarm on each new message in %s", name)
	}
	// A failed invocation that Lambda cannot even deliver there.
	for _, fn := range []string{"RedriveFunction", "SweeperFunction", "MetricsFunction", "LedgerFunction", "DigestFunction"} {
		f := lookup(t, tpl.GetServerlessFunctionWithName, fn)
		found := false
		for _, a := range tpl.GetAllCloudWatchAlarmResources() {
			for _, d := range a.Dimensions {
				found = found || (aws.ToString(a.MetricName) == "DestinationDeliveryFailures" && d.Name == "FunctionName" && d.Value == aws.ToString(f.FunctionName))
			}
		}
		if !found {
			t.Errorf("no alarm on %s DestinationDeliveryFailures", fn)
		}
	}
}

// Item 7: redrive runs one at a time, so rate_per_second caps what the
// source queue receives, and a scheduled event can wait out one full run.
func TestRedriveRateIsACapPerSource(t *testing.T) {
	tpl := open(t)
	fn := lookup(t, tpl.GetServerlessFunctionWithName, "RedriveFunction")
	if aws.ToInt(fn.ReservedConcurrentExecutions) != 1 {
		t.Fatalf("redrive reserved concurrency %v: schedules and manual runs overlap and each sends at rate_per_second", fn.ReservedConcurrentExecutions)
	}
	var sources map[string]any
	if err := json.Unmarshal([]byte(fn.Environment.Variables["SOURCES"]), &sources); err != nil || len(sources) != 1 {
		t.Errorf("the redrive function serves %d sources; the cap holds per function, so one source each (%v)", len(sources), err)
	}
	for _, c := range tpl.GetAllLambdaEventInvokeConfigResources() {
		if c.FunctionName == aws.ToString(fn.FunctionName) && aws.ToInt(c.MaximumEventAgeInSeconds) < aws.ToInt(fn.Timeout) {
			t.Errorf("a scheduled redrive event expires after %d s, before one full run (%d s) it waits behind ends", aws.ToInt(c.MaximumEventAgeInSeconds), aws.ToInt(fn.Timeout))
		}
	}
}

// capture is an s3store.ArchiveAPI that records the put.
type capture struct{ put *s3.PutObjectInput }

func (c *capture) PutObject(_ context.Context, in *s3.PutObjectInput, _ ...func(*s3.Options)) (*s3.PutObjectOutput, error) {
	c.put = in
	return &s3.PutObjectOutput{VersionId: aws.String("v1")}, nil
}
func (c *capture) GetObject(context.Context, *s3.GetObjectInput, ...func(*s3.Options)) (*s3.GetObjectOutput, error) {
	panic("unused")
}
func (c *capture) GetObjectRetention(context.Context, *s3.GetObjectRetentionInput, ...func(*s3.Options)) (*s3.GetObjectRetentionOutput, error) {
	panic("unused")
}
func (c *capture) ListObjectVersions(context.Context, *s3.ListObjectVersionsInput, ...func(*s3.Options)) (*s3.ListObjectVersionsOutput, error) {
	panic("unused")
}

// Item 8: the archive role may put into the archive only a conditional
// create, and the sweeper's put is one.
func TestArchivePutsAreCreatesOnly(t *testing.T) {
	tpl := open(t)
	b, _ := tpl.GetS3BucketWithName("ArchiveBucket")
	archiveObjects := "arn:aws:s3:::" + aws.ToString(b.BucketName) + "/*"
	role := lookup(t, tpl.GetIAMRoleWithName, "SweeperRole")
	var denies []map[string]any
	for _, p := range role.Policies {
		for _, st := range statementsOf(t, p.PolicyDocument) {
			if st["Effect"] == "Deny" && slices.Contains(list(st["Action"]), "s3:PutObject") && slices.Contains(list(st["Resource"]), archiveObjects) {
				denies = append(denies, st)
			}
		}
	}
	// denied evaluates the deny statements against a put: each must have
	// exactly the Null test on s3:if-none-match this test understands.
	denied := func(in *s3.PutObjectInput) bool {
		for _, st := range denies {
			c, _ := st["Condition"].(map[string]any)
			null, _ := c["Null"].(map[string]any)
			if len(c) != 1 || len(null) != 1 || null["s3:if-none-match"] != "true" {
				t.Fatalf("deny statement %v has a condition this test does not model", st["Sid"])
			}
			if in.IfNoneMatch == nil {
				return true
			}
		}
		return false
	}
	if !denied(&s3.PutObjectInput{}) {
		t.Fatal("the sweeper's role may overwrite archive objects: nothing denies a put without If-None-Match")
	}
	api := &capture{}
	raw := []byte(`{"format":1}`)
	if _, _, err := (s3store.Archiver{API: api}).PutArchive(context.Background(), aws.ToString(b.BucketName), "", "archive/k", raw, "00", time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if api.put == nil || denied(api.put) || aws.ToString(api.put.IfNoneMatch) != "*" {
		t.Fatalf("the sweeper's archive put (If-None-Match %v) is refused by its own role", api.put.IfNoneMatch)
	}
}

// Item 9: queues and the alarm topic refuse requests without TLS; the log
// groups are encrypted with the customer key, which CloudWatch Logs may use
// for exactly these log groups; CloudWatch may use the key only for this
// stack's alarms.
func TestTLSOnlyAndKeyGrantsByResource(t *testing.T) {
	tpl := open(t)
	tlsDeny := func(st map[string]any, action, resource string) bool {
		return st["Effect"] == "Deny" && st["Principal"] == "*" && slices.Contains(list(st["Action"]), action) &&
			slices.Contains(list(st["Resource"]), resource) && slices.Contains(condition(st, "Bool", "aws:SecureTransport"), "false")
	}
	for id, q := range tpl.GetAllSQSQueueResources() {
		url := env.Endpoint + "/111122223333/" + aws.ToString(q.QueueName)
		arn := "arn:aws:sqs:eu-west-1:111122223333:" + aws.ToString(q.QueueName)
		ok := false
		for _, p := range tpl.GetAllSQSQueuePolicyResources() {
			if !slices.Contains(p.Queues, url) {
				continue
			}
			for _, st := range statementsOf(t, p.PolicyDocument) {
				ok = ok || tlsDeny(st, "sqs:*", arn)
			}
		}
		if !ok {
			t.Errorf("queue %s accepts requests without TLS", id)
		}
	}
	topic := "arn:aws:sns:eu-west-1:111122223333:prod-alarmtopic"
	var alarmArns []string
	for id, a := range tpl.GetAllCloudWatchAlarmResources() {
		if !strings.HasPrefix(aws.ToString(a.AlarmName), "prod.") {
			t.Errorf("alarm %s is named %q, outside the stack's prefix the key and topic grants use", id, aws.ToString(a.AlarmName))
		}
		alarmArns = append(alarmArns, "arn:aws:cloudwatch:eu-west-1:111122223333:alarm:"+aws.ToString(a.AlarmName))
	}
	// Another stack whose name starts with this one's ("prod-eu") must not
	// be covered: stack names cannot hold the '.' alarm names put after it.
	foreigns := []string{"arn:aws:cloudwatch:eu-west-1:111122223333:alarm:other-stack-alarm",
		"arn:aws:cloudwatch:eu-west-1:111122223333:alarm:prod-eu.dlq-depth", "arn:aws:cloudwatch:eu-west-1:111122223333:alarm:prod-extra-dlq-depth"}
	coversAlarms := func(what string, st map[string]any) {
		patterns := condition(st, "ArnLike", "aws:SourceArn")
		if len(patterns) == 0 {
			t.Errorf("%s: CloudWatch is limited by account only, not by the alarms' ARNs", what)
			return
		}
		for _, a := range alarmArns {
			if !slices.ContainsFunc(patterns, func(p string) bool { return arnLike(p, a) }) {
				t.Errorf("%s: alarm %s is not covered by %v", what, a, patterns)
			}
		}
		for _, foreign := range foreigns {
			if slices.ContainsFunc(patterns, func(p string) bool { return arnLike(p, foreign) }) {
				t.Errorf("%s: another stack's alarm %s is covered by %v", what, foreign, patterns)
			}
		}
	}
	topicOK, publish := false, false
	for _, p := range tpl.GetAllSNSTopicPolicyResources() {
		if !slices.Contains(p.Topics, topic) {
			continue
		}
		for _, st := range statementsOf(t, p.PolicyDocument) {
			topicOK = topicOK || tlsDeny(st, "sns:*", topic)
			if st["Effect"] == "Allow" && slices.Contains(servicePrincipal(st), "cloudwatch.amazonaws.com") && slices.Contains(list(st["Action"]), "sns:Publish") {
				publish = true
				coversAlarms("topic policy", st)
			}
		}
	}
	if !topicOK {
		t.Error("the alarm topic accepts requests without TLS")
	}
	if !publish {
		t.Error("the topic policy (which replaces the default one) does not let the alarms publish")
	}

	key := lookup(t, tpl.GetKMSKeyWithName, "QuarantineKey")
	keyArn := "arn:aws:kms:eu-west-1:111122223333:" + quarantineAlias
	var logsPatterns []string
	cloudwatch := false
	for _, st := range statementsOf(t, key.KeyPolicy) {
		if st["Effect"] != "Allow" {
			continue
		}
		if slices.Contains(servicePrincipal(st), "logs.eu-west-1.amazonaws.com") {
			logsPatterns = append(logsPatterns, condition(st, "ArnLike", "kms:EncryptionContext:aws:logs:arn")...)
			logsPatterns = append(logsPatterns, condition(st, "ArnEquals", "kms:EncryptionContext:aws:logs:arn")...)
			if len(logsPatterns) == 0 {
				t.Error("CloudWatch Logs may use the key for any log group: no encryption-context condition")
			}
		}
		if slices.Contains(servicePrincipal(st), "cloudwatch.amazonaws.com") {
			cloudwatch = true
			coversAlarms("key policy", st)
		}
	}
	if !cloudwatch {
		t.Error("the key does not let CloudWatch publish to the encrypted topic")
	}
	groups := map[string]bool{}
	for id, lg := range tpl.GetAllLogsLogGroupResources() {
		name := aws.ToString(lg.LogGroupName)
		groups[name] = true
		if aws.ToString(lg.KmsKeyId) != keyArn {
			t.Errorf("log group %s is encrypted with %q, not the customer key", id, aws.ToString(lg.KmsKeyId))
		}
		arn := "arn:aws:logs:eu-west-1:111122223333:log-group:" + name
		if !slices.ContainsFunc(logsPatterns, func(p string) bool { return arnLike(p, arn) }) {
			t.Errorf("the key policy does not let CloudWatch Logs encrypt %s", name)
		}
		other := strings.Replace(arn, "/aws/lambda/prod-", "/aws/lambda/prod-eu-", 1)
		if slices.ContainsFunc(logsPatterns, func(p string) bool { return arnLike(p, other) }) {
			t.Errorf("the key policy lets CloudWatch Logs encrypt another stack's %s", other)
		}
	}
	for id, fn := range tpl.GetAllServerlessFunctionResources() {
		if !groups["/aws/lambda/"+aws.ToString(fn.FunctionName)] {
			t.Errorf("%s has no declared log group (retention, encryption)", id)
		}
	}
}

// lifecycleRules turns the bucket's lifecycle configuration into the rules
// the fake applies, failing on anything the fake does not model (so a new
// kind of rule cannot slip past this test).
func lifecycleRules(t *testing.T, tpl *cloudformation.Template, bucketID string) []s3fake.Rule {
	t.Helper()
	b := lookup(t, tpl.GetS3BucketWithName, bucketID)
	var rules []s3fake.Rule
	for _, r := range b.LifecycleConfiguration.Rules {
		if r.Status != "Enabled" {
			continue
		}
		raw, _ := json.Marshal(r)
		var fields map[string]any
		_ = json.Unmarshal(raw, &fields)
		for f := range fields {
			switch f {
			case "Id", "Status", "TagFilters", "NoncurrentVersionExpiration", "NoncurrentVersionExpirationInDays", "ExpiredObjectDeleteMarker":
			default:
				t.Fatalf("rule %s: %s is not modelled", aws.ToString(r.Id), f)
			}
		}
		fr := s3fake.Rule{NoncurrentDays: aws.ToInt(r.NoncurrentVersionExpirationInDays), ExpiredObjectDeleteMarker: aws.ToBool(r.ExpiredObjectDeleteMarker)}
		if r.NoncurrentVersionExpiration != nil {
			fr.NoncurrentDays = r.NoncurrentVersionExpiration.NoncurrentDays
		}
		switch len(r.TagFilters) {
		case 0:
		case 1:
			fr.TagKey, fr.TagValue = r.TagFilters[0].Key, r.TagFilters[0].Value
		default:
			t.Fatalf("rule %s: several tag filters are not modelled", aws.ToString(r.Id))
		}
		rules = append(rules, fr)
	}
	return rules
}

// Item 10: the payload bucket's lifecycle removes the bodies of archived
// records, and of no other record, whatever deletes a key; and only the
// sweeper may set the mark the lifecycle acts on.
func TestPayloadLifecycleRemovesOnlyArchivedRecordsBodies(t *testing.T) {
	tpl := open(t)
	rules := lifecycleRules(t, tpl, "PayloadBucket")
	ctx := context.Background()
	const bucket = "payloads"
	f := s3fake.New(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC), 7)
	p := s3store.New(f, bucket, "")
	// A quarantined record's body, whose key then gets a delete marker: the
	// sweeper's s3:DeleteObject covers every key (a bug, a wrong id), and
	// so may an operator's.
	held, err := p.PutPayload(ctx, "bodies/src/open/sum", []byte("a quarantined body"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(bucket), Key: aws.String(held.Key)}); err != nil {
		t.Fatal(err)
	}
	// An archived record's body, deleted by the sweeper after its stub.
	done, err := p.PutPayload(ctx, "bodies/src/done/sum", []byte("an archived body"))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.DeletePayload(ctx, done); err != nil {
		t.Fatal(err)
	}
	for range 40 {
		f.Advance(24 * time.Hour)
		f.ApplyRules(rules)
	}
	if got, err := p.GetPayload(ctx, held); err != nil || string(got) != "a quarantined body" {
		t.Fatalf("the lifecycle removed the body of a record that is not archived: %q %v", got, err)
	}
	if vs := f.Versions(bucket, done.Key); len(vs) != 0 {
		t.Errorf("the archived record's body is still kept: %+v", vs)
	}

	// The mark: set only by the sweeper, with only that tag.
	var tagFilter []string
	for _, r := range rules {
		if r.NoncurrentDays > 0 {
			tagFilter = append(tagFilter, r.TagKey+"="+r.TagValue)
		}
	}
	if want := s3store.ArchivedTagKey + "=" + s3store.ArchivedTagValue; !slices.Equal(tagFilter, []string{want}) {
		t.Errorf("the lifecycle removes versions tagged %v; the sweeper marks %s", tagFilter, want)
	}
	b, _ := tpl.GetS3BucketWithName("PayloadBucket")
	objects := "arn:aws:s3:::" + aws.ToString(b.BucketName) + "/*"
	for id, role := range tpl.GetAllIAMRoleResources() {
		if id == "SweeperRole" {
			continue
		}
		for _, p := range role.Policies {
			for _, st := range statementsOf(t, p.PolicyDocument) {
				for _, a := range list(st["Action"]) {
					if st["Effect"] == "Allow" && (strings.Contains(a, "Tagging") || a == "s3:DeleteObjectVersion" || a == "s3:DeleteObject") {
						t.Errorf("%s may %s: only the sweeper marks or deletes claim-check objects", id, a)
					}
				}
			}
		}
	}
	role, _ := tpl.GetIAMRoleWithName("SweeperRole")
	tagging := 0
	for _, pol := range role.Policies {
		for _, st := range statementsOf(t, pol.PolicyDocument) {
			if st["Effect"] != "Allow" {
				continue
			}
			for _, a := range list(st["Action"]) {
				switch a {
				case "s3:DeleteObjectVersion":
					t.Error("the sweeper may remove claim-check versions itself")
				case "s3:PutObjectTagging", "s3:PutObjectVersionTagging":
					tagging++
					if !slices.Equal(list(st["Resource"]), []string{objects}) ||
						!slices.Equal(condition(st, "StringEquals", "s3:RequestObjectTag/"+s3store.ArchivedTagKey), []string{s3store.ArchivedTagValue}) ||
						!slices.Equal(condition(st, "ForAllValues:StringEquals", "s3:RequestObjectTagKeys"), []string{s3store.ArchivedTagKey}) {
						t.Errorf("the sweeper's %s is not limited to the archived mark on payload objects: %v", a, st)
					}
				}
			}
		}
	}
	if tagging != 2 {
		t.Errorf("the sweeper may tag with %d of PutObjectTagging, PutObjectVersionTagging", tagging)
	}
}

// Item 12: objects move to Glacier Instant Retrieval only where it is
// cheaper (it bills every object as at least 128 KB), and the cost is
// written down.
func TestArchiveColdStorageWhereItSaves(t *testing.T) {
	tpl := open(t)
	b, _ := tpl.GetS3BucketWithName("ArchiveBucket")
	for _, r := range b.LifecycleConfiguration.Rules {
		for _, tr := range r.Transitions {
			if tr.StorageClass != "GLACIER_IR" {
				continue
			}
			size, err := strconv.ParseInt(aws.ToString(r.ObjectSizeGreaterThan), 10, 64)
			if err != nil || size < 128<<10 {
				t.Errorf("rule %s moves objects of %q bytes and up to GLACIER_IR, which bills each as 128 KB", aws.ToString(r.Id), aws.ToString(r.ObjectSizeGreaterThan))
			}
		}
	}
	raw, err := os.ReadFile(filepath.Join(filepath.Dir(template.Path()), "..", "docs", "template.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(raw)
	i := strings.Index(doc, "## What the archive costs")
	if i < 0 {
		t.Fatal("docs/template.md does not say what the archive costs")
	}
	section := doc[i:]
	if !regexp.MustCompile(`20\d\d-\d\d-\d\d`).MatchString(section) || !strings.Contains(section, "per million records") || !strings.Contains(section, "GLACIER_IR") {
		t.Error("the archive cost section has no dated prices, no per-million figure or no word on GLACIER_IR")
	}
}

package template_test

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/awslabs/goformation/v7/cloudformation"
	cloudformationcw "github.com/awslabs/goformation/v7/cloudformation/cloudwatch"
	cfnddb "github.com/awslabs/goformation/v7/cloudformation/dynamodb"

	"github.com/dlqquarantine/dlqq/shared/adapter/dynamostore"
	"github.com/dlqquarantine/dlqq/shared/dev/template"
	"github.com/dlqquarantine/dlqq/shared/usecase/ingest"
	"github.com/dlqquarantine/dlqq/shared/usecase/ledger"
	"github.com/dlqquarantine/dlqq/shared/usecase/metrics"
	"github.com/dlqquarantine/dlqq/shared/usecase/redrive"
	"github.com/dlqquarantine/dlqq/shared/usecase/sweeper"
)

var env = template.Env{StackName: "prod", Region: "eu-west-1", Account: "111122223333", Endpoint: "https://sqs.eu-west-1.amazonaws.com"}

// The aliases the template declares for its keys (AWS::KMS::Alias), which
// Ref on a key resolves to.
const (
	quarantineAlias = "alias/prod-quarantine"
	signingAlias    = "alias/prod-ledger-signing"
)

func open(t *testing.T) *cloudformation.Template {
	t.Helper()
	tpl, err := template.Open(template.Path(), env)
	if err != nil {
		t.Fatal(err)
	}
	return tpl
}

// lookup is the resource id found with get (one of the template's
// Get…WithName), failing t when the template has none.
func lookup[T any](t *testing.T, get func(string) (T, error), id string) T {
	t.Helper()
	r, err := get(id)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func param(t *testing.T, tpl *cloudformation.Template, name string) float64 {
	t.Helper()
	p, ok := tpl.Parameters[name]
	if !ok {
		t.Fatalf("no parameter %s", name)
	}
	switch v := p.Default.(type) {
	case float64:
		return v
	case int:
		return float64(v)
	}
	t.Fatalf("parameter %s default %v is not a number", name, p.Default)
	return 0
}

func TestNothingUnresolved(t *testing.T) {
	tpl := open(t)
	raw, err := json.Marshal(tpl.Resources)
	if err != nil {
		t.Fatal(err)
	}
	if i := strings.Index(string(raw), "unresolved:"); i >= 0 {
		t.Fatalf("unresolved reference near %s", raw[i:min(len(raw), i+80)])
	}
}

func TestIngestFunctionAndTrigger(t *testing.T) {
	tpl := open(t)
	fn := lookup(t, tpl.GetServerlessFunctionWithName, "IngestFunction")
	if aws.ToString(fn.Runtime) != "provided.al2023" || !slices.Equal(fn.Architectures, []string{"arm64"}) || aws.ToString(fn.Handler) != "bootstrap" {
		t.Fatalf("runtime %v arch %v handler %v", aws.ToString(fn.Runtime), fn.Architectures, aws.ToString(fn.Handler))
	}
	if fn.AWSCloudFormationMetadata["BuildMethod"] != "makefile" {
		t.Fatalf("BuildMethod = %v", fn.AWSCloudFormationMetadata["BuildMethod"])
	}
	cfg, err := ingest.ConfigFromEnv(func(k string) string { return fn.Environment.Variables[k] })
	if err != nil {
		t.Fatalf("the function's environment is not a valid configuration: %v", err)
	}
	if cfg.Sources["prod-source"].DLQ != "prod-dlq" || cfg.TableName != template.GeneratedName("prod", "QuarantineTable", 255) {
		t.Fatalf("config %+v", cfg)
	}

	m := lookup(t, tpl.GetLambdaEventSourceMappingWithName, "IngestDLQMapping")
	if aws.ToString(m.EventSourceArn) != "arn:aws:sqs:eu-west-1:111122223333:prod-dlq" {
		t.Fatalf("mapping reads %s", aws.ToString(m.EventSourceArn))
	}
	if !slices.Contains(m.FunctionResponseTypes, "ReportBatchItemFailures") {
		t.Fatal("mapping does not report batch item failures")
	}
	if m.BatchSize == nil || *m.BatchSize > 10 {
		t.Fatalf("batch size %v", m.BatchSize)
	}
	timeout := param(t, tpl, "IngestTimeoutSeconds")
	dlq, _ := tpl.GetSQSQueueWithName("DeadLetterQueue")
	if float64(aws.ToInt(dlq.VisibilityTimeout)) < 6*timeout {
		t.Fatalf("DLQ visibility %d < 6 × ingest timeout %v", aws.ToInt(dlq.VisibilityTimeout), timeout)
	}
}

func TestQueues(t *testing.T) {
	tpl := open(t)
	src, _ := tpl.GetSQSQueueWithName("SourceQueue")
	dlq, _ := tpl.GetSQSQueueWithName("DeadLetterQueue")
	key := quarantineAlias
	for name, q := range map[string]string{"source": aws.ToString(src.KmsMasterKeyId), "dlq": aws.ToString(dlq.KmsMasterKeyId)} {
		if q != key {
			t.Errorf("%s queue key %q, want the customer key %q", name, q, key)
		}
	}
	if aws.ToInt(dlq.MessageRetentionPeriod) != 14*24*3600 {
		t.Errorf("DLQ retention %d", aws.ToInt(dlq.MessageRetentionPeriod))
	}
	rp := src.RedrivePolicy.(map[string]any)
	if rp["deadLetterTargetArn"] != "arn:aws:sqs:eu-west-1:111122223333:prod-dlq" || rp["maxReceiveCount"] != param(t, tpl, "MaxReceiveCount") {
		t.Errorf("redrive policy %v", rp)
	}
	if float64(aws.ToInt(src.VisibilityTimeout)) < 6*param(t, tpl, "ConsumerTimeoutSeconds") {
		t.Errorf("source visibility %d < 6 × consumer timeout", aws.ToInt(src.VisibilityTimeout))
	}
	allow := dlq.RedriveAllowPolicy.(map[string]any)
	if allow["redrivePermission"] != "byQueue" || len(allow["sourceQueueArns"].([]any)) != 1 || allow["sourceQueueArns"].([]any)[0] != "arn:aws:sqs:eu-west-1:111122223333:prod-source" {
		t.Errorf("redrive allow policy %v", allow)
	}
}

func TestTable(t *testing.T) {
	tpl := open(t)
	tb := lookup(t, tpl.GetDynamoDBTableWithName, "QuarantineTable")
	if aws.ToString(tb.BillingMode) != "PAY_PER_REQUEST" || !aws.ToBool(tb.DeletionProtectionEnabled) ||
		tb.PointInTimeRecoverySpecification == nil || !aws.ToBool(tb.PointInTimeRecoverySpecification.PointInTimeRecoveryEnabled) {
		t.Fatal("table must be on-demand, deletion-protected, with point-in-time recovery")
	}
	if s := tb.SSESpecification; s == nil || !s.SSEEnabled || aws.ToString(s.SSEType) != "KMS" || aws.ToString(s.KMSMasterKeyId) != quarantineAlias {
		t.Fatalf("table encryption %+v", tb.SSESpecification)
	}
	if len(tb.KeySchema) != 1 || tb.KeySchema[0].AttributeName != "dlq_id" {
		t.Fatalf("key schema %+v", tb.KeySchema)
	}
	// LegacyStatusIndex=drop (a new stack): the source index only. keep (a
	// stack moving over, docs/operations.md): the status index as well, the
	// same projection; the source index projects the status too, which is
	// not its key.
	for legacy, names := range map[string][]string{"drop": {dynamostore.IndexBySource}, "keep": {dynamostore.IndexByStatus, dynamostore.IndexBySource}} {
		e := env
		e.Params = map[string]any{"LegacyStatusIndex": legacy}
		tpl, err := template.Open(template.Path(), e)
		if err != nil {
			t.Fatal(err)
		}
		tb := lookup(t, tpl.GetDynamoDBTableWithName, "QuarantineTable")
		checkIndexes(t, "LegacyStatusIndex="+legacy, tb, names)
	}
}

// checkIndexes fails unless table's indexes are exactly names (each keyed
// as layout.go says and projecting what listings read), and every
// attribute definition is a string that some key uses (DynamoDB refuses
// one that none does).
func checkIndexes(t *testing.T, what string, tb *cfnddb.Table, names []string) {
	t.Helper()
	hashOf := map[string]string{dynamostore.IndexByStatus: "status", dynamostore.IndexBySource: dynamostore.IndexKeyAttr}
	var got []string
	used := map[string]bool{}
	for _, k := range tb.KeySchema {
		used[k.AttributeName] = true
	}
	for _, g := range tb.GlobalSecondaryIndexes {
		got = append(got, g.IndexName)
		for _, k := range g.KeySchema {
			used[k.AttributeName] = true
		}
		hash := hashOf[g.IndexName]
		if len(g.KeySchema) != 2 || g.KeySchema[0].AttributeName != hash || g.KeySchema[1].AttributeName != "first_seen" {
			t.Errorf("%s: index %s keys %+v, want %s + first_seen", what, g.IndexName, g.KeySchema, hash)
		}
		projected := func(a string) bool {
			return a == "dlq_id" || a == hash || a == "first_seen" || aws.ToString(g.Projection.ProjectionType) == "ALL" || slices.Contains(g.Projection.NonKeyAttributes, a)
		}
		// A filter on an index sees only what it projects: an unprojected
		// integrity_hold would look absent, and held records would be
		// listed (and replayed) again.
		for _, a := range dynamostore.FilteredAttributes() {
			if !projected(a) {
				t.Errorf("%s: index %s does not project %s, which listings filter on", what, g.IndexName, a)
			}
		}
		// Listing entries (FIFO order) are read from the index alone.
		for _, a := range dynamostore.EntryAttributes() {
			if !projected(a) {
				t.Errorf("%s: index %s does not project %s, which listing entries read", what, g.IndexName, a)
			}
		}
	}
	if !slices.Equal(got, names) {
		t.Errorf("%s: indexes %v, want %v", what, got, names)
	}
	for _, a := range tb.AttributeDefinitions {
		if a.AttributeType != "S" || !used[a.AttributeName] {
			t.Errorf("%s: attribute definition %s (%s): not a string that a key uses", what, a.AttributeName, a.AttributeType)
		}
		delete(used, a.AttributeName)
	}
	if len(used) > 0 {
		t.Errorf("%s: keys without an attribute definition: %v", what, slices.Sorted(maps.Keys(used)))
	}
}

func TestPayloadBucket(t *testing.T) {
	tpl := open(t)
	b := lookup(t, tpl.GetS3BucketWithName, "PayloadBucket")
	enc := b.BucketEncryption.ServerSideEncryptionConfiguration[0].ServerSideEncryptionByDefault
	if enc.SSEAlgorithm != "aws:kms" || !strings.Contains(aws.ToString(enc.KMSMasterKeyID), quarantineAlias) {
		t.Fatalf("bucket encryption %+v", enc)
	}
	p := b.PublicAccessBlockConfiguration
	if p == nil || !aws.ToBool(p.BlockPublicAcls) || !aws.ToBool(p.BlockPublicPolicy) || !aws.ToBool(p.IgnorePublicAcls) || !aws.ToBool(p.RestrictPublicBuckets) {
		t.Fatal("public access not fully blocked")
	}
	pol := lookup(t, tpl.GetS3BucketPolicyWithName, "PayloadBucketPolicy")
	raw, _ := json.Marshal(pol.PolicyDocument)
	if !strings.Contains(string(raw), `"aws:SecureTransport":"false"`) || !strings.Contains(string(raw), `"Effect":"Deny"`) {
		t.Fatalf("bucket policy is not TLS-only: %s", raw)
	}
}

// grants returns, for a role, each action it allows and the resources it
// allows it on; it fails on wildcard actions or resources.
func grants(t *testing.T, tpl *cloudformation.Template, roleID string) map[string][]string {
	t.Helper()
	role := lookup(t, tpl.GetIAMRoleWithName, roleID)
	out := map[string][]string{}
	for _, p := range role.Policies {
		for _, st := range p.PolicyDocument.(map[string]any)["Statement"].([]any) {
			st := st.(map[string]any)
			if st["Effect"] != "Allow" {
				continue
			}
			for _, a := range st["Action"].([]any) {
				if strings.Contains(a.(string), "*") {
					t.Errorf("%s: wildcard action %s", roleID, a)
				}
				resources, ok := st["Resource"].([]any)
				if !ok {
					resources = []any{st["Resource"]}
				}
				for _, r := range resources {
					// cloudwatch:PutMetricData has no resource-level
					// permissions: AWS requires "*", narrowed by namespace.
					wildOK := a == "cloudwatch:PutMetricData" && st["Condition"] != nil ||
						// lambda:ListEventSourceMappings has none either (a
						// read: the ledger records its own mapping).
						a == "lambda:ListEventSourceMappings"
					if (r == "*" && !wildOK) || strings.Contains(r.(string), "unresolved") {
						t.Errorf("%s: statement %v has resource %v", roleID, st["Sid"], r)
					}
					out[a.(string)] = append(out[a.(string)], r.(string))
				}
			}
		}
	}
	return out
}

func TestIngestRoleIsLeastPrivilege(t *testing.T) {
	tpl := open(t)
	actions := grants(t, tpl, "IngestRole")
	for _, forbidden := range []string{"sqs:SendMessage", "dynamodb:Scan", "dynamodb:DeleteItem", "s3:DeleteObject", "s3:DeleteObjectVersion"} {
		if _, ok := actions[forbidden]; ok {
			t.Errorf("ingest may %s", forbidden)
		}
	}
	lg := lookup(t, tpl.GetLogsLogGroupWithName, "IngestLogGroup")
	if aws.ToInt(lg.RetentionInDays) == 0 || aws.ToString(lg.LogGroupName) != "/aws/lambda/prod-ingest" {
		t.Fatalf("log group %v retention %v", aws.ToString(lg.LogGroupName), lg.RetentionInDays)
	}
}

func TestRedriveFunction(t *testing.T) {
	tpl := open(t)
	actions := grants(t, tpl, "RedriveRole")
	// The source queue, and the failed-invocations queue Lambda reports a
	// failed scheduled run to with this role (the on-failure destination).
	if got := actions["sqs:SendMessage"]; !slices.Equal(got, []string{"arn:aws:sqs:eu-west-1:111122223333:prod-source", "arn:aws:sqs:eu-west-1:111122223333:prod-failed-invocations"}) {
		t.Errorf("redrive may send to %v, want only the source queue and the failed-invocations queue", got)
	}
	for a := range actions {
		if strings.HasPrefix(a, "sqs:") && a != "sqs:SendMessage" && a != "sqs:GetQueueUrl" && a != "sqs:GetQueueAttributes" {
			t.Errorf("redrive may %s", a)
		}
	}
	if got := actions["sqs:GetQueueAttributes"]; !slices.Equal(got, []string{"arn:aws:sqs:eu-west-1:111122223333:prod-source"}) {
		t.Errorf("redrive may read the attributes of %v, want the source queue (its settle window)", got)
	}
	for _, forbidden := range []string{"sqs:DeleteMessage", "dynamodb:Scan", "dynamodb:DeleteItem", "s3:DeleteObject"} {
		if _, ok := actions[forbidden]; ok {
			t.Errorf("redrive may %s", forbidden)
		}
	}
	// It writes payload objects only for large corrections, beside the
	// originals, never over them.
	if got := actions["s3:PutObject"]; !slices.Equal(got, []string{"arn:aws:s3:::" + template.GeneratedName("prod", "PayloadBucket", 63) + "/corrections/*"}) {
		t.Errorf("redrive may put objects in %v, want only corrections/", got)
	}
	if rule, err := tpl.GetEventsRuleWithName("RedrivePolicyRule"); err != nil || !strings.Contains(aws.ToString(rule.Targets[0].Input), `"action":"policies"`) || rule.Targets[0].Arn != "arn:aws:lambda:eu-west-1:111122223333:function:prod-redrive" {
		t.Errorf("standing policy schedule %+v %v", rule, err)
	}
	fn := lookup(t, tpl.GetServerlessFunctionWithName, "RedriveFunction")
	cfg, err := redrive.ConfigFromEnv(func(k string) string { return fn.Environment.Variables[k] })
	if err != nil {
		t.Fatalf("the redrive function's environment is not a valid configuration: %v", err)
	}
	if cfg.Service.Lease <= time.Duration(aws.ToInt(fn.Timeout))*time.Second {
		t.Errorf("lease %s does not outlast the function timeout %ds", cfg.Service.Lease, aws.ToInt(fn.Timeout))
	}
	ingestFn, _ := tpl.GetServerlessFunctionWithName("IngestFunction")
	if fn.Environment.Variables["SOURCES"] != ingestFn.Environment.Variables["SOURCES"] {
		t.Error("ingest and redrive see different SOURCES")
	}
	rule := lookup(t, tpl.GetEventsRuleWithName, "RedriveSettleRule")
	target := rule.Targets[0]
	if target.Arn != "arn:aws:lambda:eu-west-1:111122223333:function:prod-redrive" {
		t.Errorf("settle rule targets %s", target.Arn)
	}
	req, err := redrive.ParseRequest([]byte(aws.ToString(target.Input)))
	if err != nil || req.Action != redrive.ActionSettle || req.Source != "prod-source" {
		t.Errorf("settle rule input %s: %+v %v", aws.ToString(target.Input), req, err)
	}
}

func TestArchiveBucketAndSweeper(t *testing.T) {
	tpl := open(t)
	b := lookup(t, tpl.GetS3BucketWithName, "ArchiveBucket")
	lock := b.ObjectLockConfiguration
	if !aws.ToBool(b.ObjectLockEnabled) || lock == nil || lock.Rule == nil || lock.Rule.DefaultRetention == nil ||
		aws.ToString(lock.Rule.DefaultRetention.Mode) != "COMPLIANCE" || aws.ToInt(lock.Rule.DefaultRetention.Days) < 365 {
		t.Fatalf("archive bucket lock %+v", lock)
	}
	if b.VersioningConfiguration == nil || b.VersioningConfiguration.Status != "Enabled" {
		t.Fatal("archive bucket not versioned")
	}
	if enc := b.BucketEncryption.ServerSideEncryptionConfiguration[0].ServerSideEncryptionByDefault; enc.SSEAlgorithm != "aws:kms" {
		t.Fatalf("archive encryption %+v", enc)
	}
	p := b.PublicAccessBlockConfiguration
	if p == nil || !aws.ToBool(p.BlockPublicAcls) || !aws.ToBool(p.BlockPublicPolicy) || !aws.ToBool(p.IgnorePublicAcls) || !aws.ToBool(p.RestrictPublicBuckets) {
		t.Fatal("archive public access not fully blocked")
	}
	if lc := b.LifecycleConfiguration; lc == nil || len(lc.Rules) == 0 || len(lc.Rules[0].Transitions) == 0 {
		t.Fatal("no lifecycle rule to a colder storage class")
	}
	pol := lookup(t, tpl.GetS3BucketPolicyWithName, "ArchiveBucketPolicy")
	raw, _ := json.Marshal(pol.PolicyDocument)
	if !strings.Contains(string(raw), `"aws:SecureTransport":"false"`) {
		t.Fatalf("archive bucket policy is not TLS-only: %s", raw)
	}
	for _, role := range []string{"IngestRole", "RedriveRole", "SweeperRole"} {
		actions := grants(t, tpl, role)
		for _, forbidden := range []string{"s3:DeleteObjectVersion", "s3:BypassGovernanceRetention", "s3:PutBucketObjectLockConfiguration", "s3:DeleteBucket"} {
			if _, ok := actions[forbidden]; ok {
				t.Errorf("%s may %s", role, forbidden)
			}
		}
		for _, r := range actions["s3:DeleteObject"] {
			if strings.Contains(r, "archive") {
				t.Errorf("%s may delete archive objects", role)
			}
		}
	}
	fn := lookup(t, tpl.GetServerlessFunctionWithName, "SweeperFunction")
	cfg, err := sweeper.ConfigFromEnv(func(k string) string { return fn.Environment.Variables[k] })
	if err != nil {
		t.Fatalf("the sweeper's environment is not a valid configuration: %v", err)
	}
	if cfg.Sweeper.Bucket != aws.ToString(b.BucketName) || cfg.Sweeper.Retention != 2557*24*time.Hour {
		t.Fatalf("sweeper config %+v", cfg)
	}
	rule, err := tpl.GetEventsRuleWithName("SweeperSchedule")
	if err != nil || aws.ToString(rule.ScheduleExpression) == "" || rule.Targets[0].Arn != "arn:aws:lambda:eu-west-1:111122223333:function:prod-sweeper" {
		t.Fatalf("sweeper schedule %+v %v", rule, err)
	}
}

// Every alarm on the project's namespace watches a metric a function
// publishes, with dimensions it publishes; the topic is KMS-encrypted.
func TestAlarmsWatchPublishedMetrics(t *testing.T) {
	// With an attached DLQ, whose alarms watch it.
	tpl := openWith(t, map[string]any{"ExtraDLQArn": "arn:aws:sqs:eu-west-1:111122223333:legacy-dlq", "ExtraSourceQueueArn": "arn:aws:sqs:eu-west-1:111122223333:legacy"})
	published := map[string][]string{ // metric → dimension names
		metrics.MetricDLQDepth: {"Source"}, metrics.MetricDLQInFlight: {"Source"}, metrics.MetricOldestAge: {"Source"},
		metrics.MetricArrivals: {"Source"}, metrics.MetricSuccessRate: {"Source"}, metrics.MetricPoison: {"Source"},
		metrics.MetricNewPoison: {"Source"}, metrics.MetricDominantShare: {"Source"}, metrics.MetricIntegrityHolds: {"Source"}, metrics.MetricNewIntegrityHolds: {"Source"}, metrics.MetricRecords: {"Source", "Status", "Class"},
		sweeper.MetricArchived: nil, sweeper.MetricFailures: nil, sweeper.MetricOldestParkedS: nil, sweeper.MetricCompleted: {"Table"},
		"Quarantined": {"Class", "Source"}, "StoreFailures": {"Source"}, "Duplicates": {"Source"}, "Arrivals": {"Source"}, // ingest EMF
		redrive.MetricPolicies: {"Source"}, redrive.MetricPolicySuspended: {"Source", "Policy"}, redrive.MetricPolicyReplayed: {"Source", "Policy"},
		redrive.MetricPolicyCameBack: {"Source", "Policy"}, redrive.MetricPolicyShare: {"Source", "Policy"},
		ledger.MetricAnchoringLag:     {ledger.MetricDimensionTable}, // the digest run (EMF), by table: one stack's runs keep no other's alarm quiet
		ledger.MetricPipelineProblems: {ledger.MetricDimensionTable}, // the same run's pipeline check
		ledger.MetricHeadsUnproven:    {ledger.MetricDimensionTable}, // the digest run and the stream handler (EMF)
	}
	queues := []string{"legacy-dlq"}
	for _, q := range tpl.GetAllSQSQueueResources() {
		queues = append(queues, aws.ToString(q.QueueName))
	}
	seen := map[string]bool{}
	for id, a := range tpl.GetAllCloudWatchAlarmResources() {
		if len(a.AlarmActions) != 1 || a.AlarmActions[0] != "arn:aws:sns:eu-west-1:111122223333:prod-alarmtopic" {
			t.Errorf("%s notifies %v", id, a.AlarmActions)
		}
		// A metric alarm watches its metric; a metric-math alarm each
		// metric its expressions read, and returns one time series.
		type watched struct {
			ns, name string
			dims     []cloudformationcw.Alarm_Dimension
		}
		watches := []watched{{aws.ToString(a.Namespace), aws.ToString(a.MetricName), a.Dimensions}}
		if len(a.Metrics) > 0 {
			watches = nil
			returned := 0
			for _, q := range a.Metrics {
				if q.ReturnData == nil || *q.ReturnData {
					returned++
				}
				if ms := q.MetricStat; ms != nil && ms.Metric != nil {
					watches = append(watches, watched{aws.ToString(ms.Metric.Namespace), aws.ToString(ms.Metric.MetricName), ms.Metric.Dimensions})
				} else if mi, ok := parseMI(t, aws.ToString(q.Expression)); ok {
					// A Metrics Insights query: every value of its schema's
					// dimension (Value "").
					watches = append(watches, watched{mi.ns, mi.metric, []cloudformationcw.Alarm_Dimension{{Name: mi.dim}}})
				} else if aws.ToString(q.Expression) == "" {
					t.Errorf("%s: query %s has neither a metric nor an expression", id, q.Id)
				}
			}
			if returned != 1 || a.MetricName != nil || a.Namespace != nil || a.Statistic != nil || a.Period != nil {
				t.Errorf("%s: a metric-math alarm returns %d series and sets metric %q %q, statistic %v, period %v", id, returned, aws.ToString(a.Namespace), aws.ToString(a.MetricName), aws.ToString(a.Statistic), aws.ToInt(a.Period))
			}
		}
		for _, w := range watches {
			ns, name := w.ns, w.name
			seen[name] = true
			if ns == "AWS/SQS" {
				// One of the stack's queues (the rest is checked by
				// TestFailuresThatNobodyWouldSee).
				if len(w.dims) != 1 || w.dims[0].Name != "QueueName" || !slices.Contains(queues, w.dims[0].Value) {
					t.Errorf("%s watches %s of %v, no queue of the stack (%v)", id, name, w.dims, queues)
				}
				continue
			}
			if ns == "AWS/Lambda" {
				continue // checked by TestFailuresThatNobodyWouldSee
			}
			if ns != "DLQQuarantine" {
				t.Errorf("%s watches namespace %s", id, ns)
				continue
			}
			dims, ok := published[name]
			if !ok {
				t.Errorf("%s watches %s, which nothing publishes", id, name)
			}
			var got []string
			for _, d := range w.dims {
				got = append(got, d.Name)
				if d.Name == "Source" && d.Value != "prod-source" && d.Value != "" {
					t.Errorf("%s watches source %s", id, d.Value)
				}
				if table := lookup(t, tpl.GetDynamoDBTableWithName, "QuarantineTable").TableName; d.Name == "Table" && d.Value != aws.ToString(table) {
					t.Errorf("%s watches table %s, not %s", id, d.Value, aws.ToString(table))
				}
			}
			if !slices.Equal(got, dims) {
				t.Errorf("%s dimensions %v, published with %v", id, got, dims)
			}
		}
	}
	for _, want := range []string{metrics.MetricDLQDepth, metrics.MetricOldestAge, metrics.MetricNewPoison, metrics.MetricNewIntegrityHolds, metrics.MetricDominantShare, metrics.MetricSuccessRate, "StoreFailures", "Errors", sweeper.MetricFailures, redrive.MetricPolicies} {
		if !seen[want] {
			t.Errorf("no alarm on %s", want)
		}
	}
	defaults := map[string]float64{"DepthAlarmThreshold": 100, "OldestAgeAlarmSeconds": 1800, "DominantShareAlarmPercent": 40}
	for p, v := range defaults {
		if got := param(t, tpl, p); got != v {
			t.Errorf("%s default %v, want %v", p, got, v)
		}
	}
	topic, err := tpl.GetSNSTopicWithName("AlarmTopic")
	if err != nil || aws.ToString(topic.KmsMasterKeyId) != quarantineAlias {
		t.Fatalf("alarm topic %+v %v", topic, err)
	}
	fn := lookup(t, tpl.GetServerlessFunctionWithName, "MetricsFunction")
	if _, err := metrics.ConfigFromEnv(func(k string) string { return fn.Environment.Variables[k] }); err != nil {
		t.Fatalf("the metrics function's environment is not a valid configuration: %v", err)
	}
	actions := grants(t, tpl, "MetricsRole")
	if _, ok := actions["dynamodb:Scan"]; ok {
		t.Error("the metrics function may scan")
	}
	dash := lookup(t, tpl.GetCloudWatchDashboardWithName, "HealthDashboard")
	if !json.Valid([]byte(dash.DashboardBody)) {
		t.Fatalf("dashboard body is not JSON: %s", dash.DashboardBody)
	}
	for _, m := range []string{"DLQDepth", "OldestQuarantinedAgeSeconds", "ArrivalsPerMinute", "RedriveSuccessRate", "PoisonRecords", "ArchivedRecords"} {
		// A metric, or a Metrics Insights query of it (per source).
		if !strings.Contains(dash.DashboardBody, `"`+m+`"`) && !strings.Contains(dash.DashboardBody, "("+m+")") {
			t.Errorf("the dashboard does not show %s", m)
		}
	}
}

// The default settle window cannot resolve a replay before it can come
// back: a replay the consumer keeps failing returns after MaxReceiveCount
// receives, each hidden for the source visibility timeout, plus the ingest
// lag (the DLQ batching window, an ingest invocation, two redeliveries
// after the DLQ visibility timeout), which the settle margin must cover.
// Redrive derives the same minimum from the live queue; the defaults agree.
func TestSettleWindowDefaultsCoverAComeback(t *testing.T) {
	tpl := open(t)
	m := lookup(t, tpl.GetLambdaEventSourceMappingWithName, "IngestDLQMapping")
	lag := float64(aws.ToInt(m.MaximumBatchingWindowInSeconds)) + param(t, tpl, "IngestTimeoutSeconds") + 2*param(t, tpl, "DLQVisibilityTimeoutSeconds")
	margin := param(t, tpl, "SettleMarginSeconds")
	if margin < lag {
		t.Errorf("SettleMarginSeconds %v < ingest lag %v", margin, lag)
	}
	src, _ := tpl.GetSQSQueueWithName("SourceQueue")
	rp := src.RedrivePolicy.(map[string]any)
	receives, _ := rp["maxReceiveCount"].(float64)
	vis := float64(aws.ToInt(src.VisibilityTimeout))
	if window := param(t, tpl, "SettleWindowSeconds"); receives < 1 || window < receives*vis+margin {
		t.Errorf("SettleWindowSeconds %v < maxReceiveCount %v × visibility %v s + margin %v s", window, receives, vis, margin)
	}
	fn := lookup(t, tpl.GetServerlessFunctionWithName, "RedriveFunction")
	cfg, err := redrive.ConfigFromEnv(func(k string) string { return fn.Environment.Variables[k] })
	if err != nil {
		t.Fatal(err)
	}
	derived, err := redrive.MinSettleWindow(map[string]string{"VisibilityTimeout": fmt.Sprint(vis), "RedrivePolicy": fmt.Sprintf(`{"maxReceiveCount":%v}`, receives)}, cfg.Service.SettleMargin)
	if err != nil || cfg.Service.SettleWindow < derived || cfg.Service.SettleMargin != time.Duration(margin)*time.Second {
		t.Errorf("the function settles after %s with margin %s; the queue needs %s (%v)", cfg.Service.SettleWindow, cfg.Service.SettleMargin, derived, err)
	}
}

package template_test

// Checks for issue 17: the ledger's resources and the operator and auditor
// policies. The emulators enforce no IAM and run no mapping, so every
// property is checked on the template, and each IAM property through the
// checker (iam_test.go) so that a narrowed or widened statement fails.

import (
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	dtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	cloudformationcw "github.com/awslabs/goformation/v7/cloudformation/cloudwatch"

	"github.com/dlqquarantine/dlqq/shared/dev/localrunner"
	"github.com/dlqquarantine/dlqq/shared/dev/template"
)

const (
	ledgerRoleARN = "arn:aws:iam::111122223333:role/prod-LedgerRole"
	signingKey    = "arn:aws:kms:eu-west-1:111122223333:alias/prod-ledger-signing"
	quarantineKey = "arn:aws:kms:eu-west-1:111122223333:alias/prod-quarantine"
	failedQueue   = "arn:aws:sqs:eu-west-1:111122223333:prod-failed-invocations"
)

// The ledger-failures queue is named by CloudFormation (retained, it must
// not collide with a stack deployed again under the same name).
var (
	ledgerQueueName = template.GeneratedName("prod", "LedgerFailureQueue", 80)
	ledgerQueue     = "arn:aws:sqs:eu-west-1:111122223333:" + ledgerQueueName
)

func tableName() string   { return template.GeneratedName("prod", "QuarantineTable", 255) }
func tableARN() string    { return "arn:aws:dynamodb:eu-west-1:111122223333:table/" + tableName() }
func archiveName() string { return template.GeneratedName("prod", "ArchiveBucket", 63) }
func streamARN() string   { return template.StreamARN("eu-west-1", "111122223333", tableName()) }

// The two functions of the ledger (issue 26): the stream function and the
// digest function, built like the others from the same code base (one
// entry point each), with the same role and exactly the environment each
// reads (design section 5).
func TestLedgerFunction(t *testing.T) {
	tpl := open(t)
	common := map[string]string{
		"TABLE_NAME":            tableName(),
		"LEDGER_BUCKET":         archiveName(),
		"LEDGER_RETENTION_DAYS": "2557",
		"SIGNING_KEY_ID":        signingKey,
		"STREAM_ARN":            streamARN(),
	}
	digestEnv := maps.Clone(common)
	maps.Copy(digestEnv, map[string]string{
		// The pipeline check lists the stream function's mappings.
		"STREAM_FUNCTION_NAME": "prod-ledger",
		"DIGEST_MAX_AGE":       "55m",
		"WRITER_PROOFS":        "true", // LedgerWriterProofs' default
		// The writer keys the digests record (issue 25 review).
		"INGEST_WRITER_KEY_ARN":  "arn:aws:kms:eu-west-1:111122223333:alias/prod-writer-ingest",
		"REDRIVE_WRITER_KEY_ARN": "arn:aws:kms:eu-west-1:111122223333:alias/prod-writer-redrive",
		"SWEEPER_WRITER_KEY_ARN": "arn:aws:kms:eu-west-1:111122223333:alias/prod-writer-sweeper",
	})
	for _, c := range []struct {
		id, name, logGroup string
		env                map[string]string
	}{
		{"LedgerFunction", "prod-ledger", "LedgerLogGroup", common},
		{"DigestFunction", "prod-digest", "DigestLogGroup", digestEnv},
	} {
		fn := lookup(t, tpl.GetServerlessFunctionWithName, c.id)
		if aws.ToString(fn.Runtime) != "provided.al2023" || !slices.Equal(fn.Architectures, []string{"arm64"}) || aws.ToString(fn.Handler) != "bootstrap" ||
			fn.AWSCloudFormationMetadata["BuildMethod"] != "makefile" || aws.ToString(fn.FunctionName) != c.name {
			t.Fatalf("%s: runtime %v arch %v handler %v build %v name %v", c.id, aws.ToString(fn.Runtime), fn.Architectures, aws.ToString(fn.Handler),
				fn.AWSCloudFormationMetadata["BuildMethod"], aws.ToString(fn.FunctionName))
		}
		if to := aws.ToInt(fn.Timeout); to < 60 || to > 900 {
			t.Errorf("%s: timeout %d s", c.id, to)
		}
		if aws.ToString(fn.Role) != ledgerRoleARN {
			t.Errorf("%s runs with %s", c.id, aws.ToString(fn.Role))
		}
		if got := fn.Environment.Variables; !maps.Equal(got, c.env) {
			t.Errorf("%s: environment %v, want %v", c.id, got, c.env)
		}
		lg := lookup(t, tpl.GetLogsLogGroupWithName, c.logGroup)
		if aws.ToString(lg.LogGroupName) != "/aws/lambda/"+c.name || aws.ToInt(lg.RetentionInDays) == 0 || aws.ToString(lg.KmsKeyId) != quarantineKey {
			t.Errorf("%s: log group %s retention %v key %s", c.id, aws.ToString(lg.LogGroupName), lg.RetentionInDays, aws.ToString(lg.KmsKeyId))
		}
		// The role can sign (and check signatures) before the first run.
		if !slices.Contains(meta(t, tpl, c.id).DependsOn, "LedgerSigningPolicy") {
			t.Errorf("%s does not depend on LedgerSigningPolicy", c.id)
		}
	}
	// A digest at least once an hour, and before the lag alarm fires on a
	// quiet stack.
	if d, err := time.ParseDuration(digestEnv["DIGEST_MAX_AGE"]); err != nil || d <= 0 || d >= time.Hour {
		t.Errorf("DIGEST_MAX_AGE %q (%v): a digest must be written at least every hour", digestEnv["DIGEST_MAX_AGE"], err)
	}
	// The Makefile builds each with sam build, from its own main.
	raw, err := os.ReadFile(filepath.Join(filepath.Dir(template.Path()), "..", "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	for id, dir := range map[string]string{"LedgerFunction": "ledger", "DigestFunction": "digest"} {
		if !strings.Contains(string(raw), "build-"+id+":\n\tCGO_ENABLED=0 GOOS=linux GOARCH=arm64 $(GO) build $(LAMBDA_FLAGS) -o $(ARTIFACTS_DIR)/bootstrap ./functions/"+dir+"\n") {
			t.Errorf("the Makefile has no build-%s target building ./functions/%s", id, dir)
		}
	}
	if !regexp.MustCompile(`(?m)^FUNCTIONS := .*\bdigest\b`).Match(raw) {
		t.Error("the Makefile's FUNCTIONS does not build the digest function")
	}
	// The bucket is the COMPLIANCE one, for as long as the archive.
	b := lookup(t, tpl.GetS3BucketWithName, "ArchiveBucket")
	if r := b.ObjectLockConfiguration.Rule.DefaultRetention; aws.ToString(r.Mode) != "COMPLIANCE" || aws.ToInt(r.Days) != 2557 {
		t.Errorf("the ledger bucket's default retention %+v", r)
	}
}

// The mapping: no record is ever skipped, one writer per shard, the shard
// id in every event (design section 0), failures kept.
func TestLedgerStreamMapping(t *testing.T) {
	tpl := open(t)
	m := lookup(t, tpl.GetLambdaEventSourceMappingWithName, "LedgerStreamMapping")
	checks := []struct {
		what      string
		got, want any
	}{
		{"EventSourceArn", aws.ToString(m.EventSourceArn), streamARN()},
		{"FunctionName", m.FunctionName, "prod-ledger"},
		{"StartingPosition", aws.ToString(m.StartingPosition), "TRIM_HORIZON"},
		{"BatchSize", aws.ToInt(m.BatchSize), 1000},
		{"MaximumBatchingWindowInSeconds", aws.ToInt(m.MaximumBatchingWindowInSeconds), 1},
		{"TumblingWindowInSeconds", aws.ToInt(m.TumblingWindowInSeconds), 60},
		{"FunctionResponseTypes", strings.Join(m.FunctionResponseTypes, ","), "ReportBatchItemFailures"},
		{"BisectBatchOnFunctionError", aws.ToBool(m.BisectBatchOnFunctionError), true},
		{"MaximumRetryAttempts", m.MaximumRetryAttempts != nil && *m.MaximumRetryAttempts == -1, true},
		{"MaximumRecordAgeInSeconds", m.MaximumRecordAgeInSeconds != nil && *m.MaximumRecordAgeInSeconds == -1, true},
		{"ParallelizationFactor", aws.ToInt(m.ParallelizationFactor), 1},
		{"OnFailure", m.DestinationConfig != nil && m.DestinationConfig.OnFailure != nil && aws.ToString(m.DestinationConfig.OnFailure.Destination) == ledgerQueue, true},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("LedgerStreamMapping %s = %v, want %v", c.what, c.got, c.want)
		}
	}
	// Lambda takes a standard queue as a stream's on-failure destination;
	// it holds shard and sequence numbers for 14 days, under the customer
	// key.
	q := lookup(t, tpl.GetSQSQueueWithName, "LedgerFailureQueue")
	if aws.ToBool(q.FifoQueue) || aws.ToInt(q.MessageRetentionPeriod) != 14*24*3600 || aws.ToString(q.KmsMasterKeyId) != quarantineAlias {
		t.Errorf("ledger failure queue fifo %v retention %v key %v", aws.ToBool(q.FifoQueue), aws.ToInt(q.MessageRetentionPeriod), aws.ToString(q.KmsMasterKeyId))
	}
	// The table streams both images (the ledger keeps the new one, and
	// the old one on a REMOVE).
	tb := lookup(t, tpl.GetDynamoDBTableWithName, "QuarantineTable")
	if tb.StreamSpecification == nil || tb.StreamSpecification.StreamViewType != "NEW_AND_OLD_IMAGES" {
		t.Errorf("table stream %+v", tb.StreamSpecification)
	}
}

// keyPolicyEffect evaluates the signing key's policy alone for a principal
// in the account: "deny", "allow" or "" (no statement).
func keyPolicyEffect(t *testing.T, s *stack, principal, action string) string {
	t.Helper()
	q := request{Action: action, Resource: signingKey, Context: map[string]string{"aws:principalarn": principal, "aws:principalaccount": env.Account, "aws:securetransport": "true"}}
	return effectOf(t, s.resourcePolicies(signingKey), q, principal)
}

// The signing key: asymmetric, never rotated, retained; only the ledger
// role signs, whatever anyone's IAM policies allow; the account reads the
// public key and verifies.
func TestLedgerSigningKey(t *testing.T) {
	tpl := open(t)
	k := lookup(t, tpl.GetKMSKeyWithName, "LedgerSigningKey")
	if aws.ToString(k.KeySpec) != "ECC_NIST_P256" || aws.ToString(k.KeyUsage) != "SIGN_VERIFY" || aws.ToBool(k.EnableKeyRotation) {
		t.Errorf("key spec %v usage %v rotation %v", aws.ToString(k.KeySpec), aws.ToString(k.KeyUsage), aws.ToBool(k.EnableKeyRotation))
	}
	if m := meta(t, tpl, "LedgerSigningKey"); !m.keptOnDelete() || m.UpdateReplacePolicy != "Retain" {
		t.Errorf("LedgerSigningKey %s / %s: old digests must stay verifiable", m.DeletionPolicy, m.UpdateReplacePolicy)
	}
	aliased := false
	for _, a := range tpl.GetAllKMSAliasResources() {
		aliased = aliased || (a.TargetKeyId == signingAlias && a.AliasName == "alias/prod-ledger-signing")
	}
	if !aliased {
		t.Error("no alias/prod-ledger-signing for the signing key")
	}
	s := openStack(t, nil)
	others := []string{"arn:aws:iam::111122223333:root", "arn:aws:iam::111122223333:user/alice", "arn:aws:iam::111122223333:role/prod-SweeperRole",
		"arn:aws:iam::111122223333:role/prod-LedgerRole-copy", "arn:aws:iam::111122223333:role/Admin"}
	for _, p := range others {
		if got := keyPolicyEffect(t, s, p, "kms:Sign"); got != "deny" {
			t.Errorf("kms:Sign by %s: key policy %q, want an explicit deny", p, got)
		}
		for _, a := range []string{"kms:GetPublicKey", "kms:Verify"} {
			if got := keyPolicyEffect(t, s, p, a); got != "allow" {
				t.Errorf("%s by %s: key policy %q, want allow (auditors verify)", a, p, got)
			}
		}
	}
	if got := keyPolicyEffect(t, s, ledgerRoleARN, "kms:Sign"); got != "allow" {
		t.Errorf("kms:Sign by the ledger role: key policy %q", got)
	}
	// Administration stays with the account.
	for _, a := range []string{"kms:PutKeyPolicy", "kms:DescribeKey", "kms:ScheduleKeyDeletion"} {
		if got := keyPolicyEffect(t, s, "arn:aws:iam::111122223333:root", a); got != "allow" {
			t.Errorf("%s by the account: %q", a, got)
		}
	}
	// The IAM side: the ledger role signs (in the digest function); no
	// other role may.
	for _, fn := range []string{"LedgerFunction", "DigestFunction"} {
		if found := s.check(fn, sampleCalls(t, s)[fn]); len(found) > 0 {
			t.Fatalf("the %s's calls: %q", fn, found)
		}
	}
	// The key policy delegates the ledger role's signing to its IAM
	// policy: without LedgerSigningPolicy it cannot sign.
	c0 := s.clone()
	delete(c0.resources, "LedgerSigningPolicy")
	wantFinding(t, c0.check("DigestFunction", sampleCalls(t, s)["DigestFunction"]), "DigestFunction (role LedgerRole): kms:Sign on "+signingKey, "no statement")
	sign := request{Function: "SweeperFunction", Op: "Sign", Action: "kms:Sign", Resource: signingKey, Context: map[string]string{"aws:securetransport": "true"}}
	c := s.clone()
	stmt(t, c, "SweeperRole", "UseTheKey")["Resource"] = []any{"*"}
	stmt(t, c, "SweeperRole", "UseTheKey")["Action"] = []any{"kms:*"}
	wantFinding(t, c.check("SweeperFunction", []request{sign}), "SweeperFunction (role SweeperRole): kms:Sign on "+signingKey, "denied by LedgerSigningKey/OnlyTheLedgerSigns")
}

// The role: it reads the stream, writes only its own state and the
// counters, only ledger/ objects and only as creates, signs with the
// signing key, and reports failures.
func TestLedgerRoleIsLeastPrivilege(t *testing.T) {
	tpl := open(t)
	actions := grants(t, tpl, "LedgerRole")
	// Scan is granted for the one-off baseline, on the table only (not
	// its indexes): a read.
	if got := actions["dynamodb:Scan"]; !slices.Equal(got, []string{tableARN()}) {
		t.Errorf("the ledger role may dynamodb:Scan on %v, want the table only (the baseline)", got)
	}
	for _, forbidden := range []string{"dynamodb:DeleteItem", "dynamodb:Query", "dynamodb:BatchWriteItem", "s3:DeleteObject", "s3:DeleteObjectVersion",
		"s3:BypassGovernanceRetention", "s3:PutObjectLegalHold", "kms:Sign", "sqs:ReceiveMessage", "sqs:DeleteMessage"} {
		if _, ok := actions[forbidden]; ok {
			t.Errorf("the ledger role may %s", forbidden)
		}
	}
	for _, a := range []string{"s3:PutObject", "s3:PutObjectRetention", "s3:GetObject"} {
		if got := actions[a]; !slices.Equal(got, []string{"arn:aws:s3:::" + archiveName() + "/ledger/*"}) {
			t.Errorf("the ledger role may %s on %v, want only ledger/ of the archive", a, got)
		}
	}
	// It reads its own stream mapping (no resource-level permission
	// exists) and nothing else of Lambda.
	for a, rs := range actions {
		if strings.HasPrefix(a, "lambda:") && (a != "lambda:ListEventSourceMappings" || !slices.Equal(rs, []string{"*"})) {
			t.Errorf("the ledger role may %s on %v", a, rs)
		}
	}
	if _, ok := actions["lambda:ListEventSourceMappings"]; !ok {
		t.Error("the ledger role may not read its stream mapping (lambda:ListEventSourceMappings)")
	}
	if got := actions["sqs:SendMessage"]; !slices.Equal(got, []string{ledgerQueue, failedQueue}) {
		t.Errorf("the ledger role may send to %v", got)
	}

	s := openStack(t, nil)
	table, bucket := tableARN(), "arn:aws:s3:::"+archiveName()
	d := func(op string, p any) []request {
		svc := "DynamoDB"
		if strings.HasPrefix(op, "s3:") {
			svc, op = "S3", strings.TrimPrefix(op, "s3:")
		}
		return describe("LedgerFunction", env.Region, env.Account, svc, op, p)
	}
	name := aws.String(tableName())
	for _, c := range []struct {
		what  string
		calls []request
		want  string // finding prefix after the function and role
		why   string
	}{
		{"a record's write", d("PutItem", &dynamodb.PutItemInput{TableName: name, Item: key("prod-source#0123abcd")}), "dynamodb:PutItem on " + table, "no statement"},
		{"a standing policy's update", d("UpdateItem", &dynamodb.UpdateItemInput{TableName: name, Key: key("#pol#prod-source#p1")}), "dynamodb:UpdateItem on " + table, "no statement"},
		{"a transaction that slips a record in", d("TransactWriteItems", &dynamodb.TransactWriteItemsInput{TransactItems: []dtypes.TransactWriteItem{
			{Update: &dtypes.Update{TableName: name, Key: key("#ctr#x")}}, {Put: &dtypes.Put{TableName: name, Item: key("prod-source#0123abcd")}}}}), "dynamodb:PutItem on " + table, "no statement"},
		{"a record's read", d("GetItem", &dynamodb.GetItemInput{TableName: name, Key: key("prod-source#0123abcd")}), "dynamodb:GetItem on " + table, "no statement"},
		{"a batch read with one record", d("BatchGetItem", &dynamodb.BatchGetItemInput{RequestItems: map[string]dtypes.KeysAndAttributes{
			tableName(): {Keys: []map[string]dtypes.AttributeValue{key("#led#head#a"), key("prod-source#0123abcd")}}}}), "dynamodb:BatchGetItem on " + table, "no statement"},
		{"a delete", d("DeleteItem", &dynamodb.DeleteItemInput{TableName: name, Key: key("#led#head#a")}), "dynamodb:DeleteItem on " + table, "no statement"},
		{"an archive object", d("s3:PutObject", &s3.PutObjectInput{Bucket: aws.String(archiveName()), Key: aws.String("archive/x"), IfNoneMatch: aws.String("*")}),
			"s3:PutObject on " + bucket + "/archive/x", "no statement"},
		{"an overwrite", d("s3:PutObject", &s3.PutObjectInput{Bucket: aws.String(archiveName()), Key: aws.String("ledger/digests/000000000001.json")}),
			"s3:PutObject on " + bucket + "/ledger/digests/000000000001.json", "denied by LedgerRole/ledger/LedgerPutsAreCreatesOnly"},
		{"a listing outside ledger/", d("s3:ListObjectsV2", &s3.ListObjectsV2Input{Bucket: aws.String(archiveName()), Prefix: aws.String("archive/")}),
			"s3:ListBucket on " + bucket, "no statement"},
	} {
		wantFinding(t, s.check("LedgerFunction", c.calls), "LedgerFunction (role LedgerRole): "+c.want, c.why)
	}
	// The calls Lambda makes with the role: the stream, and the batch it
	// gives up on.
	c := s.clone()
	stmt(t, c, "LedgerRole", "ReadTheStream")["Action"] = []any{"dynamodb:DescribeStream", "dynamodb:GetShardIterator", "dynamodb:ListStreams"}
	wantFinding(t, c.check("LedgerFunction", nil), "LedgerFunction (role LedgerRole): dynamodb:GetRecords on "+streamARN()+" (for LedgerStreamMapping)", "no statement")
	c = s.clone()
	setResource(t, c, "LedgerRole", "ReportFailures", failedQueue)
	wantFinding(t, c.check("LedgerFunction", nil), "LedgerFunction (role LedgerRole): sqs:SendMessage on "+ledgerQueue+" (for LedgerStreamMapping OnFailure)", "no statement")
	c = s.clone()
	stmt(t, c, "LedgerRole", "UseTheKey")["Action"] = []any{"kms:Decrypt"}
	wantFinding(t, c.check("LedgerFunction", nil), "LedgerFunction (role LedgerRole): kms:GenerateDataKey on "+quarantineKey+" (for sqs:SendMessage on "+ledgerQueue, "no statement")
	// Nobody else writes ledger/, whatever their role says.
	c = s.clone()
	setResource(t, c, "SweeperRole", "WriteTheArchive", bucket+"/*")
	put := d("s3:PutObject", &s3.PutObjectInput{Bucket: aws.String(archiveName()), Key: aws.String("ledger/digests/000000000002.json"), IfNoneMatch: aws.String("*")})
	for i := range put {
		put[i].Function = "SweeperFunction"
	}
	wantFinding(t, c.check("SweeperFunction", put), "SweeperFunction (role SweeperRole): s3:PutObject on "+bucket+"/ledger/digests/", "denied by ArchiveBucketPolicy/OnlyTheLedgerWritesTheLedger")
}

// The digest schedule: every 5 minutes, the digest input, its failures
// kept like every schedule's, and run by the local runner.
func TestLedgerDigestSchedule(t *testing.T) {
	tpl := open(t)
	rule := lookup(t, tpl.GetEventsRuleWithName, "LedgerDigestSchedule")
	if aws.ToString(rule.ScheduleExpression) != "rate(5 minutes)" || len(rule.Targets) != 1 {
		t.Fatalf("schedule %v targets %d", aws.ToString(rule.ScheduleExpression), len(rule.Targets))
	}
	target := rule.Targets[0]
	if target.Arn != "arn:aws:lambda:eu-west-1:111122223333:function:prod-digest" || aws.ToString(target.Input) != `{"action":"digest"}` {
		t.Errorf("target %s input %s", target.Arn, aws.ToString(target.Input))
	}
	if target.DeadLetterConfig == nil || aws.ToString(target.DeadLetterConfig.Arn) != failedQueue || target.RetryPolicy == nil {
		t.Errorf("target dead-letter %+v retry %+v", target.DeadLetterConfig, target.RetryPolicy)
	}
	permitted := false
	for _, p := range tpl.GetAllLambdaPermissionResources() {
		permitted = permitted || (p.FunctionName == "prod-digest" && p.Principal == "events.amazonaws.com" && aws.ToString(p.SourceArn) == "arn:aws:events:eu-west-1:111122223333:rule/prod-digest")
	}
	if !permitted {
		t.Error("EventBridge may not invoke the digest function for the digest schedule")
	}
	// A digest run is not retried (the next one is), and its failure is
	// kept: the digest function's invoke config.
	c := lookup(t, tpl.GetLambdaEventInvokeConfigWithName, "LedgerInvokeConfig")
	if c.FunctionName != "prod-digest" || c.Qualifier != "$LATEST" || aws.ToInt(c.MaximumRetryAttempts) != 0 || aws.ToInt(c.MaximumEventAgeInSeconds) != 300 ||
		c.DestinationConfig == nil || c.DestinationConfig.OnFailure == nil || c.DestinationConfig.OnFailure.Destination != failedQueue {
		raw, _ := json.Marshal(c)
		t.Errorf("LedgerInvokeConfig: %s", raw)
	}
	scheds, err := localrunner.SchedulesFromTemplate(tpl)
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(scheds, func(s localrunner.Schedule) bool { return s.Rule == "LedgerDigestSchedule" })
	if i < 0 || scheds[i].Every != 5*time.Minute || scheds[i].Function != "prod-digest" || scheds[i].Name() != "digest" || string(scheds[i].Payload(time.Now())) != `{"action":"digest"}` {
		t.Errorf("the local runner reads the digest schedule as %+v", scheds)
	}
}

// The alarms: the anchoring lag (an empty period breaches: the digest run
// publishes it every 5 minutes), the function's errors, the mapping's
// iterator age (the same), the records Lambda gave up on; the lag on the
// dashboard. What the lag and age alarms do over time is
// TestLedgerSilencePages's.
func TestLedgerAlarms(t *testing.T) {
	tpl := open(t)
	type want struct {
		ns, metric, stat, op, missing string
		dim, value                    string
		period                        int
		threshold                     float64
		periods, datapoints           int
	}
	for id, w := range map[string]want{
		"LedgerHeadsUnprovenAlarm":       {"DLQQuarantine", "LedgerHeadsUnproven", "Maximum", "GreaterThanThreshold", "notBreaching", "Table", tableName(), 300, 0, 1, 0},
		"LedgerErrorsAlarm":              {"AWS/Lambda", "Errors", "Sum", "GreaterThanThreshold", "notBreaching", "FunctionName", "prod-ledger", 300, 0, 1, 0},
		"LedgerThrottlesAlarm":           {"AWS/Lambda", "Throttles", "Sum", "GreaterThanThreshold", "notBreaching", "FunctionName", "prod-ledger", 300, 0, 1, 0},
		"LedgerDestinationFailuresAlarm": {"AWS/Lambda", "DestinationDeliveryFailures", "Sum", "GreaterThanThreshold", "notBreaching", "FunctionName", "prod-ledger", 300, 0, 1, 0},
		// The digest function's own (issue 26), named after it.
		"DigestErrorsAlarm":              {"AWS/Lambda", "Errors", "Sum", "GreaterThanThreshold", "notBreaching", "FunctionName", "prod-digest", 300, 0, 1, 0},
		"DigestThrottlesAlarm":           {"AWS/Lambda", "Throttles", "Sum", "GreaterThanThreshold", "notBreaching", "FunctionName", "prod-digest", 300, 0, 1, 0},
		"DigestDestinationFailuresAlarm": {"AWS/Lambda", "DestinationDeliveryFailures", "Sum", "GreaterThanThreshold", "notBreaching", "FunctionName", "prod-digest", 300, 0, 1, 0},
		"LedgerPipelineAlarm":            {"DLQQuarantine", "LedgerPipelineProblems", "Maximum", "GreaterThanThreshold", "notBreaching", "Table", tableName(), 300, 0, 1, 0},
		"LedgerFailuresAlarm":            {"AWS/SQS", "ApproximateNumberOfMessagesVisible", "Maximum", "GreaterThanThreshold", "notBreaching", "QueueName", ledgerQueueName, 300, 0, 1, 0},
	} {
		a := lookup(t, tpl.GetCloudWatchAlarmWithName, id)
		var dims []string
		for _, d := range a.Dimensions {
			dims = append(dims, d.Name+"="+d.Value)
		}
		wantDims := []string(nil)
		if w.dim != "" {
			wantDims = []string{w.dim + "=" + w.value}
		}
		if aws.ToString(a.Namespace) != w.ns || aws.ToString(a.MetricName) != w.metric || aws.ToString(a.Statistic) != w.stat || a.ComparisonOperator != w.op ||
			aws.ToString(a.TreatMissingData) != w.missing || aws.ToInt(a.Period) != w.period || aws.ToFloat64(a.Threshold) != w.threshold ||
			a.EvaluationPeriods != w.periods || aws.ToInt(a.DatapointsToAlarm) != w.datapoints || !slices.Equal(dims, wantDims) {
			raw, _ := json.Marshal(a)
			t.Errorf("%s: %s", id, raw)
		}
	}
	// Metric math: the metric, an empty period filled above the threshold.
	for id, w := range map[string]want{
		"LedgerAnchoringLagAlarm": {"DLQQuarantine", "LedgerAnchoringLag", "Maximum", "GreaterThanThreshold", "breaching", "Table", tableName(), 300, 900, 4, 3},
		"LedgerIteratorAgeAlarm":  {"AWS/Lambda", "IteratorAge", "Maximum", "GreaterThanThreshold", "breaching", "FunctionName", "prod-ledger", 300, 600000, 4, 3},
	} {
		a := lookup(t, tpl.GetCloudWatchAlarmWithName, id)
		var stat *cloudformationcw.Alarm_MetricStat
		var fill []string
		for _, q := range a.Metrics {
			if q.MetricStat != nil {
				stat = q.MetricStat
			} else {
				fill = regexp.MustCompile(`^FILL\((\w+), (\d+)\)$`).FindStringSubmatch(aws.ToString(q.Expression))
			}
		}
		if stat == nil || len(a.Metrics) != 2 || fill == nil || !slices.Equal(watched(a), []string{metricKey(w.ns, w.metric, []cloudformationcw.Alarm_Dimension{{Name: w.dim, Value: w.value}})}) ||
			stat.Stat != w.stat || stat.Period != w.period || a.ComparisonOperator != w.op || aws.ToString(a.TreatMissingData) != w.missing ||
			aws.ToFloat64(a.Threshold) != w.threshold || a.EvaluationPeriods != w.periods || aws.ToInt(a.DatapointsToAlarm) != w.datapoints {
			raw, _ := json.Marshal(a)
			t.Errorf("%s: %s", id, raw)
			continue
		}
		if v, err := strconv.ParseFloat(fill[2], 64); err != nil || v <= w.threshold {
			t.Errorf("%s: %s fills an empty period with %s, not above the threshold %v", id, fill[0], fill[2], w.threshold)
		}
	}
	for id, name := range map[string]string{"DigestErrorsAlarm": "prod.digest-errors", "DigestThrottlesAlarm": "prod.digest-throttles",
		"DigestDestinationFailuresAlarm": "prod.digest-destination-failures"} {
		if a := lookup(t, tpl.GetCloudWatchAlarmWithName, id); aws.ToString(a.AlarmName) != name || len(a.AlarmActions) == 0 {
			t.Errorf("%s is named %q and notifies %v", id, aws.ToString(a.AlarmName), a.AlarmActions)
		}
	}
	dash := lookup(t, tpl.GetCloudWatchDashboardWithName, "HealthDashboard")
	if !strings.Contains(dash.DashboardBody, `"LedgerAnchoringLag"`) {
		t.Error("the dashboard does not show the anchoring lag")
	}
}

// managedEffect evaluates a managed policy of the template for a request
// of a user it is attached to: "deny", "allow" or "".
// attachedWith is what a person is given with a managed policy: the
// operator's and the auditor's policy each go with the guardrail
// policies (docs/template.md; SourceGuardrailPolicy and
// SourceKeyGuardrailPolicy only on a stack with registered sources and
// keys, which managedEffect skips where the stack has none); any other
// policy alone.
func attachedWith(policyID string) []string {
	switch policyID {
	case "OperatorPolicy", "AuditorPolicy":
		return []string{policyID, "GuardrailPolicy", "WatchGuardrailPolicy", "SourceGuardrailPolicy", "SourceKeyGuardrailPolicy", "SourceTagGuardrailPolicy"}
	}
	return []string{policyID}
}

func managedEffect(t *testing.T, s *stack, policyID string, q request) string {
	t.Helper()
	const user = "arn:aws:iam::111122223333:user/alice"
	ctx := map[string]string{"aws:principalarn": user, "aws:principalaccount": env.Account, "aws:securetransport": "true"}
	maps.Copy(ctx, q.Context)
	q.Context = ctx
	var statements []statement
	for _, id := range attachedWith(policyID) {
		if _, ok := s.resources[id]; !ok && strings.HasPrefix(id, "Source") {
			continue // a stack without registered sources
		}
		statements = append(statements, namedStatements(id, props(s.resources[id])["PolicyDocument"], true)...)
	}
	return effectOf(t, statements, q, user)
}

// effectOf is what statements decide for q made by principal: "deny" when
// a Deny matches, "allow" when only Allows do, "" when none does. A
// condition the checker does not model fails t.
func effectOf(t *testing.T, statements []statement, q request, principal string) string {
	t.Helper()
	effect := ""
	for _, st := range statements {
		o, k := applies(st.st, q, principal, env.Account)
		if o == undecidable {
			t.Fatalf("%s: condition on %s not modeled", st.from, k)
		}
		if o != matches {
			continue
		}
		if st.st["Effect"] == "Deny" {
			return "deny"
		}
		effect = "allow"
	}
	return effect
}

// The operator and auditor policies: exported, read-only, with explicit
// denies of every write an operator or auditor could otherwise be given by
// another policy. The allowed calls are the ones dlqctl makes
// (internal/dlqctl: ls, show, buckets, ids and verify read the table and its
// index; redrive, fix, park, unpark and payload reads invoke the redrive
// function and read its SOURCES; health lists metrics, reads their
// statistics and the stack's alarms; verify reads the archive, the ledger
// and, auditors only, the claim-checked bodies).
func TestOperatorAndAuditorPolicies(t *testing.T) {
	tpl := open(t)
	for _, out := range []string{"OperatorPolicyArn", "AuditorPolicyArn"} {
		o, ok := tpl.Outputs[out]
		raw, _ := json.Marshal(o)
		if !ok || !strings.Contains(string(raw), "Export") {
			t.Errorf("output %s is not exported: %s", out, raw)
		}
	}
	s := openStack(t, nil)
	table, index := tableARN(), tableARN()+"/index/status-first-seen-v2"
	redriveFn := "arn:aws:lambda:eu-west-1:111122223333:function:prod-redrive"
	archive, payload := "arn:aws:s3:::"+archiveName(), "arn:aws:s3:::"+template.GeneratedName("prod", "PayloadBucket", 63)
	via := func(svc string) map[string]string {
		return map[string]string{"kms:viaservice": svc + ".eu-west-1.amazonaws.com", "kms:calleraccount": env.Account}
	}
	q := func(action, resource string, ctx map[string]string) request {
		return request{Action: action, Resource: resource, Context: ctx}
	}
	reads := []request{
		q("dynamodb:GetItem", table, nil), q("dynamodb:BatchGetItem", table, nil), q("dynamodb:Scan", table, nil),
		q("dynamodb:Query", index, nil), q("dynamodb:DescribeTable", table, nil),
		q("kms:Decrypt", quarantineKey, via("dynamodb")),
		q("cloudwatch:ListMetrics", "*", nil), q("cloudwatch:GetMetricStatistics", "*", nil), q("cloudwatch:GetMetricData", "*", nil),
		q("cloudwatch:DescribeAlarms", "*", nil),
		// dlqctl --stack: this stack's outputs, no other's.
		q("cloudformation:DescribeStacks", "arn:aws:cloudformation:eu-west-1:111122223333:stack/prod/0f1e2d3c-0000-4000-8000-000000000000", nil),
	}
	denied := []request{
		q("dynamodb:PutItem", table, nil), q("dynamodb:UpdateItem", table, nil), q("dynamodb:DeleteItem", table, nil),
		q("dynamodb:BatchWriteItem", table, nil), q("dynamodb:PartiQLUpdate", table, nil), q("dynamodb:UpdateItem", index, nil),
		q("s3:PutObject", archive+"/ledger/digests/000000000009.json", nil), q("s3:DeleteObject", payload+"/bodies/x", nil),
		q("s3:PutObjectRetention", archive+"/archive/x", nil), q("s3:DeleteObjectVersion", archive+"/ledger/x", nil),
		q("s3:PutBucketPolicy", archive, nil), q("s3:PutLifecycleConfiguration", payload, nil),
		q("kms:Sign", signingKey, nil), q("kms:PutKeyPolicy", signingKey, nil), q("kms:CreateGrant", signingKey, nil),
		// Acting as a function, inventing events, stopping the ledger,
		// losing the history: denied even where another policy allows it.
		q("lambda:InvokeFunction", "arn:aws:lambda:eu-west-1:111122223333:function:prod-ingest", nil),
		q("lambda:InvokeFunction", "arn:aws:lambda:eu-west-1:111122223333:function:prod-ledger", nil),
		q("lambda:UpdateFunctionCode", "arn:aws:lambda:eu-west-1:111122223333:function:prod-ledger", nil),
		q("lambda:UpdateFunctionConfiguration", redriveFn, nil),
		q("lambda:AddPermission", "arn:aws:lambda:eu-west-1:111122223333:function:prod-ledger", nil),
		q("iam:PassRole", "arn:aws:iam::111122223333:role/prod-LedgerRole", nil),
		q("dynamodb:UpdateTable", table, nil), q("dynamodb:RestoreTableToPointInTime", table, nil),
		q("kms:ScheduleKeyDeletion", signingKey, nil), q("kms:DisableKey", signingKey, nil),
		q("cloudwatch:PutMetricAlarm", "arn:aws:cloudwatch:eu-west-1:111122223333:alarm:prod.dlq-depth", nil),
	}
	notAllowed := []request{
		q("kms:Decrypt", quarantineKey, nil),
		q("dynamodb:GetRecords", streamARN(), nil),
		q("cloudformation:DescribeStacks", "arn:aws:cloudformation:eu-west-1:111122223333:stack/prod-other/0f1e2d3c-0000-4000-8000-000000000000", nil),
	}
	// dlqctl verify re-reads claim-checked bodies: the auditor may, the
	// operator reads a payload only through the redrive function.
	payloadReads := []request{
		q("s3:GetObject", payload+"/bodies/x", nil), q("s3:GetObjectVersion", payload+"/bodies/x", nil), q("kms:Decrypt", quarantineKey, via("s3")),
	}
	archiveReads := []request{
		q("s3:GetObject", archive+"/archive/prod-source/2026/12/01/h/v1.json", nil), q("s3:GetObjectVersion", archive+"/archive/prod-source/2026/12/01/h/v1.json", nil),
		q("s3:GetObjectRetention", archive+"/archive/prod-source/2026/12/01/h/v1.json", nil), q("s3:GetObject", archive+"/ledger/digests/000000000001.json", nil),
		q("s3:ListBucket", archive, nil), q("s3:ListBucketVersions", archive, nil), q("kms:Decrypt", quarantineKey, via("s3")),
		q("kms:GetPublicKey", signingKey, nil), q("kms:Verify", signingKey, nil),
	}
	functionCalls := []request{q("lambda:InvokeFunction", redriveFn, nil), q("lambda:GetFunctionConfiguration", redriveFn, nil)}
	for _, c := range []struct {
		policy   string
		want     string
		requests []request
	}{
		{"OperatorPolicy", "allow", slices.Concat(reads, functionCalls)},
		{"OperatorPolicy", "deny", denied},
		{"OperatorPolicy", "", slices.Concat(notAllowed, archiveReads, payloadReads)},
		{"AuditorPolicy", "allow", slices.Concat(reads, archiveReads, payloadReads)},
		{"AuditorPolicy", "deny", denied},
		{"AuditorPolicy", "", slices.Concat(notAllowed, functionCalls)},
	} {
		for _, r := range c.requests {
			if got := managedEffect(t, s, c.policy, r); got != c.want {
				t.Errorf("%s: %s gives %q, want %q", c.policy, r, got, c.want)
			}
		}
	}
	// What the auditor verifies with, the key policy lets the account do.
	for _, a := range []string{"kms:GetPublicKey", "kms:Verify"} {
		if got := keyPolicyEffect(t, s, "arn:aws:iam::111122223333:user/alice", a); got != "allow" {
			t.Errorf("the signing key's policy gives %s to an auditor %q", a, got)
		}
	}
}

// LedgerMappingEnabled=false (the first deploy on an existing table, so
// that the baseline runs before the ledger's first segment or digest)
// turns off the stream mapping and the digest schedule together; the
// default runs both.
func TestLedgerMappingParameter(t *testing.T) {
	for _, c := range []struct {
		value string
		on    bool
	}{{"", true}, {"true", true}, {"false", false}} {
		e := env
		if c.value != "" {
			e.Params = map[string]any{"LedgerMappingEnabled": c.value}
		}
		tpl, err := template.Open(template.Path(), e)
		if err != nil {
			t.Fatal(err)
		}
		m := lookup(t, tpl.GetLambdaEventSourceMappingWithName, "LedgerStreamMapping")
		rule := lookup(t, tpl.GetEventsRuleWithName, "LedgerDigestSchedule")
		state := map[bool]string{true: "ENABLED", false: "DISABLED"}[c.on]
		if m.Enabled == nil || *m.Enabled != c.on || aws.ToString(rule.State) != state {
			t.Errorf("LedgerMappingEnabled=%q: mapping enabled %v, schedule %v; want %v, %s", c.value, m.Enabled, aws.ToString(rule.State), c.on, state)
		}
		// No batch is missing data that breaches only while the mapping is
		// meant to deliver them (the upgrade turns it off; issue 25).
		age := lookup(t, tpl.GetCloudWatchAlarmWithName, "LedgerIteratorAgeAlarm")
		missing := map[bool]string{true: "breaching", false: "notBreaching"}[c.on]
		if got := aws.ToString(age.TreatMissingData); got != missing {
			t.Errorf("LedgerMappingEnabled=%q: the iterator-age alarm treats missing data as %q, want %q", c.value, got, missing)
		}
	}
}

// The storm defaults (docs/operations.md "Storm capacity", issue 28's
// 10,000 messages a second): the DLQ mapping may run 400 ingest
// invocations at once, within Lambda's 2 to 1,000.
func TestIngestMaxConcurrencyDefault(t *testing.T) {
	tpl := open(t)
	if got := param(t, tpl, "IngestMaxConcurrency"); got != 400 {
		t.Fatalf("IngestMaxConcurrency defaults to %v, want 400", got)
	}
}

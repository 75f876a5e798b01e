package template_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
)

// patternMatches is EventBridge's matching for the pattern forms the
// template uses: each field a list of exact values or {"prefix": …}, a
// nested object matched field by field.
func patternMatches(pattern, event map[string]any) bool {
	for k, want := range pattern {
		got, ok := event[k]
		if !ok {
			return false
		}
		switch w := want.(type) {
		case map[string]any:
			sub, ok := got.(map[string]any)
			if !ok || !patternMatches(w, sub) {
				return false
			}
		case []any:
			s, _ := got.(string)
			if !slices.ContainsFunc(w, func(v any) bool {
				switch v := v.(type) {
				case string:
					return v == s
				case map[string]any:
					p, ok := v["prefix"].(string)
					return ok && len(v) == 1 && strings.HasPrefix(s, p)
				}
				return false
			}) {
				return false
			}
		default:
			return false
		}
	}
	return true
}

func cloudTrailEvent(source, eventSource, name string) map[string]any {
	return map[string]any{"source": source, "detail-type": "AWS API Call via CloudTrail",
		"detail": map[string]any{"eventSource": eventSource, "eventName": name}}
}

// tamperCase is one CloudTrail event and whether a tamper rule pages on it.
type tamperCase struct {
	source, eventSource, name string
	want                      bool
}

// checkTamperRule checks the rule with logical id id: enabled, named
// name (the key's policy names it), matching exactly cases' events as
// CloudTrail delivers them, its pattern under EventBridge's 2,048
// characters, its target the alarm topic with a dead-letter queue, and
// the topic's and the key's policies letting it publish.
func checkTamperRule(t *testing.T, id, name string, cases []tamperCase) {
	t.Helper()
	tpl := open(t)
	rule := lookup(t, tpl.GetEventsRuleWithName, id)
	if aws.ToString(rule.State) != "ENABLED" || aws.ToString(rule.Name) != name {
		t.Fatalf("%s: state %q name %q, want ENABLED %q", id, aws.ToString(rule.State), aws.ToString(rule.Name), name)
	}
	raw, err := json.Marshal(rule.EventPattern)
	if err != nil {
		t.Fatal(err)
	}
	var pattern map[string]any
	if err := json.Unmarshal(raw, &pattern); err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		if got := patternMatches(pattern, cloudTrailEvent(c.source, c.eventSource, c.name)); got != c.want {
			t.Errorf("%s: %s %s: matched %v, want %v (pattern %s)", id, c.source, c.name, got, c.want, raw)
		}
	}
	// EventBridge's event pattern limit is 2048 characters by default
	// (adjustable to 4096): the rule would not deploy above it.
	if len(raw) >= 2048 {
		t.Errorf("%s: the event pattern is %d characters, over EventBridge's 2048 default", id, len(raw))
	}
	if len(cases) > 0 {
		c := cases[0]
		event := cloudTrailEvent(c.source, c.eventSource, c.name)
		if patternMatches(pattern, map[string]any{"source": c.source, "detail-type": "AWS Service Event via CloudTrail", "detail": event["detail"]}) {
			t.Errorf("%s: the rule matches events other than API calls", id)
		}
	}

	topic := "arn:aws:sns:eu-west-1:111122223333:prod-alarmtopic"
	ruleARN := "arn:aws:events:eu-west-1:111122223333:rule/" + name
	if len(rule.Targets) < 1 || rule.Targets[0].Arn != topic || rule.Targets[0].DeadLetterConfig == nil {
		t.Fatalf("%s: targets %+v, want the alarm topic with a dead-letter queue", id, rule.Targets)
	}
	var topicPolicy, keyPolicy bool
	for _, p := range tpl.GetAllSNSTopicPolicyResources() {
		for _, st := range statementsOf(t, p.PolicyDocument) {
			if st["Effect"] == "Allow" && slices.Contains(servicePrincipal(st), "events.amazonaws.com") {
				topicPolicy = slices.Equal(list(st["Action"]), []string{"sns:Publish"}) && slices.Equal(list(st["Resource"]), []string{topic}) &&
					slices.Contains(condition(st, "ArnEquals", "aws:SourceArn"), ruleARN)
				if !topicPolicy {
					t.Errorf("%s: the topic lets EventBridge publish as %v", id, st)
				}
			}
		}
	}
	key := lookup(t, tpl.GetKMSKeyWithName, "QuarantineKey")
	for _, st := range statementsOf(t, key.KeyPolicy) {
		if st["Effect"] == "Allow" && slices.Contains(servicePrincipal(st), "events.amazonaws.com") {
			keyPolicy = slices.Equal(list(st["Action"]), []string{"kms:GenerateDataKey", "kms:Decrypt"}) &&
				slices.Contains(condition(st, "ArnLike", "aws:SourceArn"), ruleARN) &&
				slices.Equal(condition(st, "StringEquals", "aws:SourceAccount"), []string{"111122223333"})
			if !keyPolicy {
				t.Errorf("%s: the topic's key lets EventBridge use it as %v", id, st)
			}
		}
	}
	if !topicPolicy || !keyPolicy {
		t.Fatalf("%s: EventBridge may not publish to the encrypted alarm topic: topic policy %v, key policy %v", id, topicPolicy, keyPolicy)
	}
	// Every rule EventBridge publishes to the topic for is one of the two
	// tamper rules: the grants name no other.
	for _, st := range statementsOf(t, key.KeyPolicy) {
		if slices.Contains(servicePrincipal(st), "events.amazonaws.com") {
			for _, arn := range condition(st, "ArnLike", "aws:SourceArn") {
				if !strings.HasSuffix(arn, ":rule/prod-tamper") && !strings.HasSuffix(arn, ":rule/prod-guard") {
					t.Errorf("the key lets EventBridge publish for %s", arn)
				}
			}
		}
	}
}

// Any change to what feeds, schedules or watches the ledger pages the
// alarm topic (issue 25): the stream's mappings, the rules and their
// targets, the alarms, the table's stream, as CloudTrail delivers them to
// EventBridge; the topic's policy and its key let that rule, and only it,
// publish. Its name fits EventBridge's 64 characters with a 56-character
// stack name (issue 26: "<stack>-ledger-tamper" did not).
func TestLedgerTamperRule(t *testing.T) {
	checkTamperRule(t, "LedgerTamperRule", "prod-tamper", []tamperCase{
		{"aws.lambda", "lambda.amazonaws.com", "CreateEventSourceMapping20150331", true},
		{"aws.lambda", "lambda.amazonaws.com", "UpdateEventSourceMapping20150331", true},
		{"aws.lambda", "lambda.amazonaws.com", "DeleteEventSourceMapping20150331", true},
		{"aws.events", "events.amazonaws.com", "PutRule", true},
		{"aws.events", "events.amazonaws.com", "DeleteRule", true},
		{"aws.events", "events.amazonaws.com", "DisableRule", true},
		{"aws.events", "events.amazonaws.com", "PutTargets", true},
		{"aws.events", "events.amazonaws.com", "RemoveTargets", true},
		{"aws.cloudwatch", "monitoring.amazonaws.com", "DeleteAlarms", true},
		{"aws.cloudwatch", "monitoring.amazonaws.com", "DisableAlarmActions", true},
		{"aws.cloudwatch", "monitoring.amazonaws.com", "PutMetricAlarm", true},
		{"aws.dynamodb", "dynamodb.amazonaws.com", "UpdateTable", true},
		// The trail the rule depends on, the functions, the keys, the
		// roles (issue 25 review).
		{"aws.cloudtrail", "cloudtrail.amazonaws.com", "StopLogging", true},
		{"aws.cloudtrail", "cloudtrail.amazonaws.com", "DeleteTrail", true},
		{"aws.cloudtrail", "cloudtrail.amazonaws.com", "PutEventSelectors", true},
		{"aws.cloudtrail", "cloudtrail.amazonaws.com", "UpdateTrail", true},
		{"aws.lambda", "lambda.amazonaws.com", "UpdateFunctionCode20150331v2", true},
		{"aws.lambda", "lambda.amazonaws.com", "UpdateFunctionConfiguration20150331v2", true},
		{"aws.lambda", "lambda.amazonaws.com", "PutFunctionConcurrency20171031", true},
		{"aws.lambda", "lambda.amazonaws.com", "DeleteFunctionConcurrency20171031", true},
		{"aws.lambda", "lambda.amazonaws.com", "AddPermission20150331v2", true},
		{"aws.kms", "kms.amazonaws.com", "PutKeyPolicy", true},
		{"aws.kms", "kms.amazonaws.com", "CreateGrant", true},
		{"aws.kms", "kms.amazonaws.com", "DisableKey", true},
		{"aws.kms", "kms.amazonaws.com", "ScheduleKeyDeletion", true},
		{"aws.iam", "iam.amazonaws.com", "UpdateAssumeRolePolicy", true},
		{"aws.iam", "iam.amazonaws.com", "PutRolePolicy", true},
		{"aws.iam", "iam.amazonaws.com", "AttachRolePolicy", true},
		{"aws.iam", "iam.amazonaws.com", "DetachRolePolicy", true},
		{"aws.iam", "iam.amazonaws.com", "DeleteRolePolicy", true},
		{"aws.kms", "kms.amazonaws.com", "GenerateMac", false},
		{"aws.kms", "kms.amazonaws.com", "Sign", false},
		{"aws.cloudtrail", "cloudtrail.amazonaws.com", "StartLogging", false},
		{"aws.lambda", "lambda.amazonaws.com", "GetFunction20150331v2", false},
		{"aws.iam", "iam.amazonaws.com", "GetRole", false},
		// Calls that change none of them do not page.
		{"aws.dynamodb", "dynamodb.amazonaws.com", "DescribeTable", false},
		{"aws.lambda", "lambda.amazonaws.com", "ListEventSourceMappings20150331", false},
		{"aws.cloudwatch", "monitoring.amazonaws.com", "EnableAlarmActions", false},
		{"aws.s3", "s3.amazonaws.com", "PutBucketPolicy", false}, // GuardrailTamperRule's
	})
}

// Issue 26: what the guardrails deny beyond the ledger's own resources
// pages too: the buckets' policies and configuration (bucket-policy
// changes above all: a policy rewritten lifts every deny it holds), the
// queues, the alarm topic, the log groups, the table's other control
// calls, key rotation and grants, the managed policies, the functions'
// deletion and permissions, the stack. Event names as CloudTrail records
// them (S3's PutBucketLifecycle for PutBucketLifecycleConfiguration,
// PutObjectLockConfiguration; Lambda's with their API-version suffix).
func TestGuardrailTamperRule(t *testing.T) {
	checkTamperRule(t, "GuardrailTamperRule", "prod-guard", []tamperCase{
		{"aws.s3", "s3.amazonaws.com", "PutBucketPolicy", true},
		{"aws.s3", "s3.amazonaws.com", "DeleteBucketPolicy", true},
		{"aws.s3", "s3.amazonaws.com", "PutBucketLifecycle", true},
		{"aws.s3", "s3.amazonaws.com", "DeleteBucketLifecycle", true},
		{"aws.s3", "s3.amazonaws.com", "PutBucketVersioning", true},
		{"aws.s3", "s3.amazonaws.com", "PutObjectLockConfiguration", true},
		{"aws.s3", "s3.amazonaws.com", "PutBucketReplication", true},
		{"aws.s3", "s3.amazonaws.com", "PutBucketEncryption", true},
		{"aws.sqs", "sqs.amazonaws.com", "PurgeQueue", true},
		{"aws.sqs", "sqs.amazonaws.com", "SetQueueAttributes", true},
		{"aws.sqs", "sqs.amazonaws.com", "DeleteQueue", true},
		{"aws.sqs", "sqs.amazonaws.com", "StartMessageMoveTask", true},
		{"aws.sns", "sns.amazonaws.com", "Unsubscribe", true},
		{"aws.sns", "sns.amazonaws.com", "SetTopicAttributes", true},
		{"aws.sns", "sns.amazonaws.com", "DeleteTopic", true},
		{"aws.logs", "logs.amazonaws.com", "DeleteLogGroup", true},
		{"aws.logs", "logs.amazonaws.com", "PutRetentionPolicy", true},
		{"aws.dynamodb", "dynamodb.amazonaws.com", "PutResourcePolicy", true},
		{"aws.dynamodb", "dynamodb.amazonaws.com", "DeleteTable", true},
		{"aws.dynamodb", "dynamodb.amazonaws.com", "UpdateContinuousBackups", true},
		{"aws.dynamodb", "dynamodb.amazonaws.com", "RestoreTableToPointInTime", true},
		{"aws.dynamodb", "dynamodb.amazonaws.com", "ExportTableToPointInTime", true},
		{"aws.kms", "kms.amazonaws.com", "DisableKeyRotation", true},
		{"aws.kms", "kms.amazonaws.com", "RevokeGrant", true},
		{"aws.iam", "iam.amazonaws.com", "CreatePolicyVersion", true},
		{"aws.iam", "iam.amazonaws.com", "DetachUserPolicy", true},
		{"aws.lambda", "lambda.amazonaws.com", "DeleteFunction20150331", true},
		{"aws.lambda", "lambda.amazonaws.com", "RemovePermission20150331v2", true},
		{"aws.lambda", "lambda.amazonaws.com", "CreateFunctionUrlConfig20211031", true},
		{"aws.cloudformation", "cloudformation.amazonaws.com", "UpdateStack", true},
		{"aws.cloudformation", "cloudformation.amazonaws.com", "DeleteStack", true},
		{"aws.cloudwatch", "monitoring.amazonaws.com", "SetAlarmState", true},
		{"aws.cloudwatch", "monitoring.amazonaws.com", "PutAlarmMuteRule", true},
		{"aws.events", "events.amazonaws.com", "UpdateEventBus", true},
		{"aws.logs", "logs.amazonaws.com", "PutAccountPolicy", true},
		// The rules, LedgerTamperRule's own changes among them: each rule
		// watches the other.
		{"aws.events", "events.amazonaws.com", "DisableRule", true},
		{"aws.events", "events.amazonaws.com", "DeleteRule", true},
		{"aws.events", "events.amazonaws.com", "PutTargets", true},
		// Reads and the functions' own work do not page.
		{"aws.s3", "s3.amazonaws.com", "GetBucketPolicy", false},
		{"aws.sqs", "sqs.amazonaws.com", "GetQueueAttributes", false},
		{"aws.sns", "sns.amazonaws.com", "Publish", false},
		{"aws.dynamodb", "dynamodb.amazonaws.com", "DescribeTable", false},
		{"aws.kms", "kms.amazonaws.com", "Decrypt", false},
		{"aws.cloudformation", "cloudformation.amazonaws.com", "DescribeStacks", false},
	})
}

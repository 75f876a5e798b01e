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

// Any change to what feeds, schedules or watches the ledger pages the
// alarm topic (issue 25): the stream's mappings, the rules and their
// targets, the alarms, the table's stream, as CloudTrail delivers them to
// EventBridge; the topic's policy and its key let that rule, and only it,
// publish.
func TestLedgerTamperRule(t *testing.T) {
	tpl := open(t)
	rule := lookup(t, tpl.GetEventsRuleWithName, "LedgerTamperRule")
	if aws.ToString(rule.State) != "ENABLED" || aws.ToString(rule.Name) != "prod-ledger-tamper" {
		t.Fatalf("rule state %q name %q", aws.ToString(rule.State), aws.ToString(rule.Name))
	}
	raw, err := json.Marshal(rule.EventPattern)
	if err != nil {
		t.Fatal(err)
	}
	var pattern map[string]any
	if err := json.Unmarshal(raw, &pattern); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		source, eventSource, name string
		want                      bool
	}{
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
		{"aws.s3", "s3.amazonaws.com", "PutBucketPolicy", false},
	} {
		if got := patternMatches(pattern, cloudTrailEvent(c.source, c.eventSource, c.name)); got != c.want {
			t.Errorf("%s %s: matched %v, want %v (pattern %s)", c.source, c.name, got, c.want, raw)
		}
	}
	// EventBridge's event pattern limit is 2048 characters by default
	// (adjustable to 4096): the rule would not deploy above it.
	if len(raw) >= 2048 {
		t.Errorf("the event pattern is %d characters, over EventBridge's 2048 default", len(raw))
	}
	if event := cloudTrailEvent("aws.lambda", "lambda.amazonaws.com", "UpdateEventSourceMapping20150331"); patternMatches(pattern, map[string]any{"source": "aws.lambda", "detail-type": "AWS Service Event via CloudTrail", "detail": event["detail"]}) {
		t.Error("the rule matches events other than API calls")
	}

	topic := "arn:aws:sns:eu-west-1:111122223333:prod-alarmtopic"
	ruleARN := "arn:aws:events:eu-west-1:111122223333:rule/prod-ledger-tamper"
	if len(rule.Targets) != 1 || rule.Targets[0].Arn != topic || rule.Targets[0].DeadLetterConfig == nil {
		t.Fatalf("targets %+v, want the alarm topic with a dead-letter queue", rule.Targets)
	}
	var topicPolicy, keyPolicy bool
	for _, p := range tpl.GetAllSNSTopicPolicyResources() {
		for _, st := range statementsOf(t, p.PolicyDocument) {
			if st["Effect"] == "Allow" && slices.Contains(servicePrincipal(st), "events.amazonaws.com") {
				topicPolicy = slices.Equal(list(st["Action"]), []string{"sns:Publish"}) && slices.Equal(list(st["Resource"]), []string{topic}) &&
					slices.Equal(condition(st, "ArnEquals", "aws:SourceArn"), []string{ruleARN})
				if !topicPolicy {
					t.Errorf("the topic lets EventBridge publish as %v", st)
				}
			}
		}
	}
	key := lookup(t, tpl.GetKMSKeyWithName, "QuarantineKey")
	for _, st := range statementsOf(t, key.KeyPolicy) {
		if st["Effect"] == "Allow" && slices.Contains(servicePrincipal(st), "events.amazonaws.com") {
			keyPolicy = slices.Equal(list(st["Action"]), []string{"kms:GenerateDataKey", "kms:Decrypt"}) &&
				slices.Equal(condition(st, "ArnLike", "aws:SourceArn"), []string{ruleARN}) &&
				slices.Equal(condition(st, "StringEquals", "aws:SourceAccount"), []string{"111122223333"})
			if !keyPolicy {
				t.Errorf("the topic's key lets EventBridge use it as %v", st)
			}
		}
	}
	if !topicPolicy || !keyPolicy {
		t.Fatalf("EventBridge may not publish to the encrypted alarm topic: topic policy %v, key policy %v", topicPolicy, keyPolicy)
	}
}

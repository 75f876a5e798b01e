package template_test

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/dlqquarantine/dlqq/shared/dev/template"
)

// Issue 26: the controls an insider holding a broad policy besides the
// operator's or the auditor's could use to get around the ledger, each
// denied to both (with the guardrail policies they are attached with,
// attachedWith), whatever else they hold. Each row is a finding of the
// outside review; today's template (c4cb269) allows every row marked
// "new" to such an insider.
func TestGuardrailsDenyEveryControl(t *testing.T) {
	const (
		region  = "eu-west-1"
		account = "111122223333"
	)
	const pager = "arn:aws:sns:eu-west-1:111122223333:pager"
	const pagerKey = "arn:aws:kms:eu-west-1:111122223333:key/0f1e2d3c-0000-4000-8000-00000000aaaa"
	// Registered sources, one in another account and Region.
	registered := []string{"arn:aws:sqs:eu-west-1:111122223333:payments", "arn:aws:sqs:eu-west-1:111122223333:meter-reads.fifo",
		"arn:aws:sqs:us-east-2:444455556666:partner-events"}
	// Their keys, and the attached DLQ's.
	sourceKeys := []string{"arn:aws:kms:eu-west-1:111122223333:key/0f1e2d3c-0000-4000-8000-00000000bbbb",
		"arn:aws:kms:us-east-2:444455556666:key/0f1e2d3c-0000-4000-8000-00000000cccc"}
	const extraDLQKey = "arn:aws:kms:eu-west-1:111122223333:key/0f1e2d3c-0000-4000-8000-00000000dddd"
	s := openStack(t, map[string]any{
		"ExtraDLQArn":              "arn:aws:sqs:eu-west-1:111122223333:legacy-dlq",
		"ExtraSourceQueueArn":      "arn:aws:sqs:eu-west-1:111122223333:legacy-source",
		"ExternalAlarmTopicArn":    pager,
		"ExternalAlarmTopicKeyArn": pagerKey,
		"SourceQueueArns":          strings.Join(registered, ","),
		"SourceKmsKeyArns":         strings.Join(sourceKeys, ","),
		"ExtraDLQKmsKeyArn":        extraDLQKey,
		"TaggedSourceAccess":       "Enabled",
	})
	arn := func(service, rest string) string {
		return "arn:aws:" + service + ":" + region + ":" + account + ":" + rest
	}
	fn := func(name string) string { return arn("lambda", "function:prod-"+name) }
	_, names, err := template.OpenNamed(template.Path(), env)
	if err != nil {
		t.Fatal(err)
	}
	queue := func(id string) string { return arn("sqs", names[id]) }
	rule := func(id string) string {
		if n := names[id]; n != "" {
			return arn("events", "rule/"+n)
		}
		return arn("events", "rule/prod-"+id)
	}
	mapping := func(id string) string { return arn("lambda", "event-source-mapping:prod-"+id) }
	roles := []string{"IngestRole", "RedriveRole", "SweeperRole", "MetricsRole", "LedgerRole"}
	keys := []string{quarantineKey, signingKey, "arn:aws:kms:eu-west-1:111122223333:alias/prod-writer-ingest",
		"arn:aws:kms:eu-west-1:111122223333:alias/prod-writer-redrive", "arn:aws:kms:eu-west-1:111122223333:alias/prod-writer-sweeper"}
	guardrailARN := "arn:aws:iam::111122223333:policy/prod-GuardrailPolicy-1A2B3C4D5E6F7"
	q := func(action, resource string, ctx map[string]string) request {
		return request{Action: action, Resource: resource, Context: ctx}
	}
	var denied []request
	// EventBridge: a target rewritten on a schedule delivers any event to
	// the function it names.
	for _, id := range []string{"LedgerDigestSchedule", "RedriveSettleRule", "RedrivePolicyRule", "SweeperSchedule", "MetricsScheduleRule", "LedgerTamperRule", "GuardrailTamperRule"} {
		for _, a := range []string{"events:PutTargets", "events:RemoveTargets", "events:PutRule", "events:DisableRule", "events:DeleteRule"} {
			denied = append(denied, q(a, rule(id), nil))
		}
	}
	// Every key, the customer key among them (deleting it crypto-shreds
	// the table, the payloads and the archive).
	for _, k := range keys {
		for _, a := range []string{"kms:ScheduleKeyDeletion", "kms:DisableKey", "kms:PutKeyPolicy", "kms:CreateGrant", "kms:RevokeGrant",
			"kms:RetireGrant", "kms:DisableKeyRotation", "kms:UpdateKeyDescription", "kms:DeleteImportedKeyMaterial",
			// Tags: a key policy or an IAM policy that grants by
			// aws:ResourceTag would grant or refuse anew.
			"kms:TagResource", "kms:UntagResource"} {
			denied = append(denied, q(a, k, nil))
		}
	}
	denied = append(denied, q("kms:Sign", signingKey, nil), q("kms:GenerateMac", keys[2], nil))
	// Every mapping of the template by its own ARN (no lambda:FunctionArn
	// in the request), and no new mapping into any function of the stack.
	mappings := slices.Sorted(maps.Keys(openWith(t, map[string]any{"ExtraDLQArn": "arn:aws:sqs:eu-west-1:111122223333:legacy-dlq"}).GetAllLambdaEventSourceMappingResources()))
	if len(mappings) < 4 {
		t.Fatalf("the template's mappings: %v", mappings)
	}
	for _, id := range mappings {
		denied = append(denied, q("lambda:UpdateEventSourceMapping", mapping(id), nil), q("lambda:DeleteEventSourceMapping", mapping(id), nil))
	}
	for _, f := range []string{"ingest", "ledger", "digest", "redrive", "sweeper", "metrics"} {
		denied = append(denied, q("lambda:CreateEventSourceMapping", "*", map[string]string{"lambda:functionarn": fn(f)}))
		// Another mapping of the account (on someone's own queue)
		// re-pointed at a function of the stack, or one of theirs taken
		// off it (review of issue 26).
		for _, a := range []string{"lambda:UpdateEventSourceMapping", "lambda:DeleteEventSourceMapping"} {
			denied = append(denied, q(a, arn("lambda", "event-source-mapping:0f1e2d3c-0000-4000-8000-000000000000"), map[string]string{"lambda:functionarn": fn(f)}))
		}
	}
	// The queues dead letters pass through, before ingest seals them, and
	// the failure queues.
	for _, id := range []string{"DeadLetterQueue", "FifoDeadLetterQueue", "SourceQueue"} {
		for _, a := range []string{"sqs:PurgeQueue", "sqs:DeleteMessage", "sqs:SetQueueAttributes", "sqs:SendMessage", "sqs:ReceiveMessage",
			"sqs:ChangeMessageVisibility", "sqs:DeleteQueue", "sqs:StartMessageMoveTask"} {
			denied = append(denied, q(a, queue(id), nil))
		}
	}
	// The failure queues: never forged, purged or reconfigured.
	for _, id := range []string{"LedgerFailureQueue", "FailedInvocationsQueue"} {
		for _, a := range []string{"sqs:PurgeQueue", "sqs:SetQueueAttributes", "sqs:SendMessage", "sqs:DeleteQueue", "sqs:StartMessageMoveTask"} {
			denied = append(denied, q(a, queue(id), nil))
		}
	}
	for _, extra := range []string{"arn:aws:sqs:eu-west-1:111122223333:legacy-dlq", "arn:aws:sqs:eu-west-1:111122223333:legacy-source"} {
		denied = append(denied, q("sqs:PurgeQueue", extra, nil), q("sqs:SendMessage", extra, nil), q("sqs:DeleteMessage", extra, nil))
	}
	// Every registered source, like the stack's own: a message sent by
	// hand is a replay nothing records, a purge or a receive loses
	// messages, a new redrive policy sends failures past the quarantine.
	for _, src := range registered {
		for _, a := range []string{"sqs:PurgeQueue", "sqs:DeleteMessage", "sqs:SetQueueAttributes", "sqs:SendMessage", "sqs:SendMessageBatch",
			"sqs:ReceiveMessage", "sqs:ChangeMessageVisibility", "sqs:DeleteQueue", "sqs:StartMessageMoveTask", "sqs:AddPermission"} {
			denied = append(denied, q(a, src, nil))
		}
	}
	// The tagged sources (TaggedSourceAccess) and their keys, like the
	// registered ones; and the tag itself, put on or taken off a queue or
	// a key (or a new one created with it), which widens or narrows the
	// redrive role's reach without a deploy.
	stackTag := map[string]string{"aws:resourcetag/dlq-quarantine:source": "prod"}
	tagged, taggedKey := arn("sqs", "pharmacy-moves"), arn("kms", "key/0f1e2d3c-0000-4000-8000-00000000eeee")
	for _, a := range []string{"sqs:PurgeQueue", "sqs:DeleteMessage", "sqs:SetQueueAttributes", "sqs:SendMessage", "sqs:SendMessageBatch",
		"sqs:ReceiveMessage", "sqs:ChangeMessageVisibility", "sqs:DeleteQueue", "sqs:StartMessageMoveTask", "sqs:AddPermission"} {
		denied = append(denied, q(a, tagged, stackTag))
	}
	for _, a := range []string{"kms:DisableKey", "kms:ScheduleKeyDeletion", "kms:PutKeyPolicy", "kms:CreateGrant", "kms:RevokeGrant", "kms:UpdateKeyDescription"} {
		denied = append(denied, q(a, taggedKey, stackTag))
	}
	for _, a := range []string{"sqs:TagQueue", "sqs:UntagQueue", "sqs:CreateQueue"} {
		denied = append(denied, q(a, arn("sqs", "orders"), map[string]string{"aws:tagkeys": "team\x00dlq-quarantine:source"}))
	}
	for _, a := range []string{"kms:TagResource", "kms:UntagResource", "kms:CreateKey"} {
		denied = append(denied, q(a, "*", map[string]string{"aws:tagkeys": "team\x00dlq-quarantine:source"}))
	}
	// Tag keys are case-sensitive; aws:ResourceTag/<key> matches a key in
	// any case: another case of the key is the same grant.
	denied = append(denied, q("sqs:TagQueue", arn("sqs", "orders"), map[string]string{"aws:tagkeys": "DLQ-Quarantine:Source"}),
		q("kms:TagResource", "*", map[string]string{"aws:tagkeys": "Dlq-Quarantine:SOURCE"}))
	// Their keys and the attached DLQ's: disabled, deleted or re-policied,
	// the queue's messages can no longer be read and expire unreplayed.
	for _, k := range append(sourceKeys, extraDLQKey) {
		for _, a := range []string{"kms:DisableKey", "kms:ScheduleKeyDeletion", "kms:PutKeyPolicy", "kms:CreateGrant", "kms:RevokeGrant", "kms:UpdateKeyDescription", "kms:TagResource", "kms:UntagResource"} {
			denied = append(denied, q(a, k, nil))
		}
	}
	// The table: its resource policy, its backups and exports.
	for _, a := range []string{"dynamodb:PutResourcePolicy", "dynamodb:DeleteResourcePolicy", "dynamodb:UpdateContinuousBackups",
		"dynamodb:ExportTableToPointInTime", "dynamodb:DeleteTable", "dynamodb:UpdateTable", "dynamodb:EnableKinesisStreamingDestination"} {
		denied = append(denied, q(a, tableARN(), nil))
	}
	// Silencing the alarms: the alarms, the metrics they watch, the topic,
	// the logs.
	for _, a := range []string{"cloudwatch:DeleteAlarms", "cloudwatch:DisableAlarmActions", "cloudwatch:PutMetricAlarm", "cloudwatch:SetAlarmState"} {
		denied = append(denied, q(a, arn("cloudwatch", "alarm:prod.ledger-failures"), nil))
	}
	denied = append(denied,
		q("cloudwatch:PutMetricData", "*", map[string]string{"cloudwatch:namespace": "DLQQuarantine"}),
		q("cloudwatch:DeleteDashboards", "arn:aws:cloudwatch::111122223333:dashboard/prod-dlq-health", nil),
		q("sns:Unsubscribe", "arn:aws:sns:eu-west-1:111122223333:prod-alarmtopic", nil),
		q("sns:Unsubscribe", "arn:aws:sns:eu-west-1:111122223333:prod-alarmtopic:0f1e2d3c-0000-4000-8000-000000000000", nil),
		q("sns:SetTopicAttributes", "arn:aws:sns:eu-west-1:111122223333:prod-alarmtopic", nil),
		q("sns:DeleteTopic", "arn:aws:sns:eu-west-1:111122223333:prod-alarmtopic", nil),
		q("sns:SetSubscriptionAttributes", "arn:aws:sns:eu-west-1:111122223333:prod-alarmtopic:0f1e2d3c-0000-4000-8000-000000000000", nil),
		// The external alarm topic, when the alarms page there (it may be
		// the only destination).
		q("sns:DeleteTopic", pager, nil), q("sns:Unsubscribe", pager+":0f1e2d3c-0000-4000-8000-000000000000", nil),
		q("sns:SetTopicAttributes", pager, nil),
		// Fake notifications on either topic, and the external topic's key
		// disabled (second review round of issue 26).
		q("sns:Publish", "arn:aws:sns:eu-west-1:111122223333:prod-alarmtopic", nil), q("sns:Publish", pager, nil),
		q("kms:DisableKey", pagerKey, nil), q("kms:ScheduleKeyDeletion", pagerKey, nil), q("kms:PutKeyPolicy", pagerKey, nil),
		// One mute rule silences every alarm's actions.
		q("cloudwatch:PutAlarmMuteRule", arn("cloudwatch", "alarm:prod.dlq-depth"), nil),
		// Account-level settings that reach the rules and the log groups.
		q("events:UpdateEventBus", arn("events", "event-bus/default"), nil),
		q("logs:PutAccountPolicy", "*", nil),
	)
	for _, f := range []string{"ingest", "ledger", "digest", "redrive", "sweeper", "metrics"} {
		lg := arn("logs", "log-group:/aws/lambda/prod-"+f)
		denied = append(denied, q("logs:DeleteLogGroup", lg, nil), q("logs:PutRetentionPolicy", lg, nil),
			q("logs:DisassociateKmsKey", lg, nil), q("logs:PutLogEvents", lg+":log-stream:x", nil), q("logs:DeleteLogStream", lg+":log-stream:x", nil))
		// lambda:Update* and the rest beyond the actions listed before.
		for _, a := range []string{"lambda:UpdateFunctionCode", "lambda:UpdateFunctionConfiguration", "lambda:UpdateFunctionEventInvokeConfig",
			"lambda:PutFunctionEventInvokeConfig", "lambda:DeleteFunctionConcurrency", "lambda:PutFunctionConcurrency",
			"lambda:CreateFunctionUrlConfig", "lambda:UpdateFunctionUrlConfig", "lambda:PutProvisionedConcurrencyConfig",
			"lambda:DeleteFunction", "lambda:AddPermission", "lambda:RemovePermission", "lambda:PublishVersion", "lambda:CreateAlias", "lambda:UpdateAlias"} {
			denied = append(denied, q(a, fn(f), nil), q(a, fn(f)+":live", nil))
		}
	}
	// No event a person writes reaches the functions that take events.
	for _, f := range []string{"ingest", "ledger", "digest"} {
		denied = append(denied, q("lambda:InvokeFunction", fn(f), nil), q("lambda:InvokeFunction", fn(f)+":$LATEST", nil), q("lambda:InvokeAsync", fn(f), nil))
	}
	// The five roles: passed, or their trust and policies changed.
	for _, r := range roles {
		role := "arn:aws:iam::111122223333:role/prod-" + r
		for _, a := range []string{"iam:PassRole", "iam:UpdateAssumeRolePolicy", "iam:PutRolePolicy", "iam:AttachRolePolicy",
			"iam:DetachRolePolicy", "iam:DeleteRolePolicy", "iam:PutRolePermissionsBoundary", "iam:DeleteRole"} {
			denied = append(denied, q(a, role, nil))
		}
	}
	// The guardrails themselves: a new version, or detached from whoever
	// holds them.
	denied = append(denied,
		q("iam:CreatePolicyVersion", guardrailARN, nil), q("iam:SetDefaultPolicyVersion", guardrailARN, nil), q("iam:DeletePolicy", guardrailARN, nil),
		q("iam:DetachUserPolicy", "arn:aws:iam::111122223333:user/alice", map[string]string{"iam:policyarn": guardrailARN}),
		q("iam:DetachRolePolicy", "arn:aws:iam::111122223333:role/ops", map[string]string{"iam:policyarn": guardrailARN}),
		q("iam:DetachGroupPolicy", "arn:aws:iam::111122223333:group/ops", map[string]string{"iam:policyarn": guardrailARN}),
		// And the stack, whose update could remove all of it.
		q("cloudformation:UpdateStack", "arn:aws:cloudformation:eu-west-1:111122223333:stack/prod/0f1e2d3c-0000-4000-8000-000000000000", nil),
		q("cloudformation:ExecuteChangeSet", "arn:aws:cloudformation:eu-west-1:111122223333:stack/prod/0f1e2d3c-0000-4000-8000-000000000000", nil),
		q("cloudformation:DeleteStack", "arn:aws:cloudformation:eu-west-1:111122223333:stack/prod/0f1e2d3c-0000-4000-8000-000000000000", nil),
	)
	// What the denies must leave alone: the operator's own work, and
	// other stacks' and the account's other resources.
	untouched := []request{
		// The runbook reads both failure queues and deletes a record once
		// handled (a ledger failure once copied out as evidence).
		q("sqs:ReceiveMessage", queue("LedgerFailureQueue"), nil),
		q("sqs:ReceiveMessage", queue("FailedInvocationsQueue"), nil),
		q("sqs:DeleteMessage", queue("FailedInvocationsQueue"), nil),
		q("sqs:DeleteMessage", queue("LedgerFailureQueue"), nil),
		q("lambda:InvokeFunction", fn("redrive"), nil),
		q("cloudwatch:PutMetricData", "*", map[string]string{"cloudwatch:namespace": "Orders"}),
		q("iam:DetachUserPolicy", "arn:aws:iam::111122223333:user/alice", map[string]string{"iam:policyarn": "arn:aws:iam::111122223333:policy/other-Policy"}),
		q("sqs:SendMessage", arn("sqs", "orders"), nil),
		q("events:PutTargets", arn("events", "rule/other-rule"), nil),
		q("lambda:UpdateEventSourceMapping", arn("lambda", "event-source-mapping:0f1e2d3c-0000-4000-8000-000000000000"), map[string]string{"lambda:functionarn": arn("lambda", "function:orders")}),
		q("cloudwatch:DeleteAlarms", arn("cloudwatch", "alarm:prod-other.alarm"), nil),
		q("kms:ScheduleKeyDeletion", "arn:aws:kms:eu-west-1:111122223333:key/0f1e2d3c-0000-4000-8000-000000000000", nil),
		// Other tags, and another stack's sources.
		q("sqs:TagQueue", arn("sqs", "orders"), map[string]string{"aws:tagkeys": "team"}),
		q("sqs:SendMessage", arn("sqs", "orders"), map[string]string{"aws:resourcetag/dlq-quarantine:source": "staging"}),
	}
	for _, policy := range []string{"OperatorPolicy", "AuditorPolicy"} {
		for _, r := range denied {
			if got := managedEffect(t, s, policy, r); got != "deny" {
				t.Errorf("%s (with %s): %s gives %q, want an explicit deny", policy, strings.Join(attachedWith(policy)[1:], ", "), r, got)
			}
		}
		for _, r := range untouched {
			if got := managedEffect(t, s, policy, r); got == "deny" {
				t.Errorf("%s: %s is denied: the guardrails reach beyond the stack", policy, r)
			}
		}
	}
}

// The denies on the functions are one stack-scoped pattern each (the
// function ARNs listed one by one pushed the auditor's policy past IAM's
// size limit), and every function of the template falls under it.
func TestFunctionDeniesAreOneStackPattern(t *testing.T) {
	s := openStack(t, nil)
	pattern := "arn:aws:lambda:eu-west-1:111122223333:function:prod-*"
	found := false
	for _, st := range namedStatements("GuardrailPolicy", props(s.resources["GuardrailPolicy"])["PolicyDocument"], true) {
		if st.st["Sid"] != "NeverChangeTheFunctions" {
			continue
		}
		found = true
		if got := strs(st.st["Resource"]); len(got) != 1 || got[0] != pattern {
			t.Errorf("NeverChangeTheFunctions names %v, want the one pattern %s", got, pattern)
		}
	}
	if !found {
		t.Fatal("GuardrailPolicy has no NeverChangeTheFunctions statement")
	}
	tpl := open(t)
	for id, f := range tpl.GetAllServerlessFunctionResources() {
		if name := *f.FunctionName; !strings.HasPrefix(name, "prod-") {
			t.Errorf("function %s is named %q, outside the pattern %s", id, name, pattern)
		}
	}
}

// The DLQ's own policy, which binds every principal, not only those the
// guardrails are attached to: nobody purges it, and nobody but the ingest
// role (its trigger polls with it) receives, hides or deletes a dead
// letter, an administrator with sqs:* included. Sends stay open: SQS's
// move of a message into its DLQ must not depend on the policy.
func TestOnlyIngestTakesDeadLetters(t *testing.T) {
	s := openStack(t, nil)
	_, names, err := template.OpenNamed(template.Path(), env)
	if err != nil {
		t.Fatal(err)
	}
	dlq := "arn:aws:sqs:eu-west-1:111122223333:" + names["DeadLetterQueue"]
	doc := props(s.resources["DeadLetterQueuePolicy"])["PolicyDocument"]
	effect := func(principal, action string) string {
		q := request{Action: action, Resource: dlq, Context: map[string]string{"aws:principalarn": principal, "aws:securetransport": "true"}}
		if effectOf(t, namedStatements("DeadLetterQueuePolicy", doc, true), q, principal) == "deny" {
			return "deny"
		}
		return ""
	}
	ingest := "arn:aws:iam::111122223333:role/prod-IngestRole"
	for _, p := range []string{"arn:aws:iam::111122223333:role/Admin", "arn:aws:iam::111122223333:user/alice", "arn:aws:iam::111122223333:role/prod-RedriveRole"} {
		for _, a := range []string{"sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:ChangeMessageVisibility", "sqs:PurgeQueue"} {
			if effect(p, a) != "deny" {
				t.Errorf("%s may %s on the DLQ", p, a)
			}
		}
		if effect(p, "sqs:GetQueueAttributes") == "deny" {
			t.Errorf("%s may not read the DLQ's attributes (the runbook and metrics do)", p)
		}
	}
	for _, a := range []string{"sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:ChangeMessageVisibility"} {
		if effect(ingest, a) == "deny" {
			t.Errorf("the ingest role may not %s on the DLQ: its trigger stops", a)
		}
	}
	if effect(ingest, "sqs:PurgeQueue") != "deny" {
		t.Error("the ingest role may purge the DLQ")
	}
	if effect("arn:aws:iam::111122223333:role/Admin", "sqs:SendMessage") == "deny" {
		t.Error("the DLQ's policy denies SendMessage: SQS's own move into the DLQ must not rest on it")
	}
}

// Both tamper rules page the external alarm topic too, when the alarms do:
// with ExternalAlarmTopicArn the only destination read, a tamper event
// that reached the stack's own topic alone would reach nobody.
func TestBothTamperRulesPageTheExternalTopic(t *testing.T) {
	const pager = "arn:aws:sns:eu-west-1:111122223333:pager"
	tpl := openWith(t, map[string]any{"ExternalAlarmTopicArn": pager})
	for _, id := range []string{"LedgerTamperRule", "GuardrailTamperRule"} {
		rule := lookup(t, tpl.GetEventsRuleWithName, id)
		var arns []string
		for _, tg := range rule.Targets {
			arns = append(arns, tg.Arn)
			if tg.DeadLetterConfig == nil || tg.RetryPolicy == nil {
				t.Errorf("%s target %s has no dead-letter queue or retry policy", id, tg.Id)
			}
		}
		if !slices.Contains(arns, pager) || !slices.Contains(arns, "arn:aws:sns:eu-west-1:111122223333:prod-alarmtopic") {
			t.Errorf("%s targets %v, want the stack's topic and %s", id, arns, pager)
		}
	}
}

// The registered sources' policies, the redrive role's grant and the
// operators' guardrail, fit IAM's size limit with SourceQueueArns as long
// as CloudFormation takes a parameter (4,096 bytes) in aws-us-gov, whose
// ARNs are the longest.
func TestRegisteredSourcePoliciesFitWithTheLongestList(t *testing.T) {
	// fill is as many ARNs of arn(i) as fit in a parameter: long ones, and
	// the shortest valid ones (more ARNs, so more of the policy's quotes
	// and commas).
	fill := func(arn func(i int) string) string {
		var arns []string
		for i := 0; ; i++ {
			if len(strings.Join(append(arns, arn(i)), ",")) > 4096 {
				return strings.Join(arns, ",")
			}
			arns = append(arns, arn(i))
		}
	}
	for _, c := range []struct{ name, queues, keys string }{
		{"long", fill(func(i int) string {
			return fmt.Sprintf("arn:aws-us-gov:sqs:us-gov-west-1:111122223333:%s-%03d", strings.Repeat("q", 72), i)
		}), fill(func(i int) string {
			return fmt.Sprintf("arn:aws-us-gov:kms:us-gov-west-1:111122223333:key/0f1e2d3c-0000-4000-8000-%012d", i)
		})},
		{"short", fill(func(i int) string { return fmt.Sprintf("arn:aws:sqs:x:111122223333:%d", i) }),
			fill(func(i int) string { return fmt.Sprintf("arn:aws:kms:x:111122223333:key/%d", i) })},
	} {
		tpl := openWith(t, map[string]any{"SourceQueueArns": c.queues, "SourceKmsKeyArns": c.keys})
		policies := tpl.GetAllIAMManagedPolicyResources()
		for _, id := range []string{"SourceGuardrailPolicy", "RedriveSourceQueuesPolicy", "SourceKeyGuardrailPolicy", "RedriveSourceKeysPolicy"} {
			pol, ok := policies[id]
			if !ok {
				t.Fatalf("no %s with a whole parameter of ARNs", id)
			}
			if n := iamSize(pol.PolicyDocument); n > managedPolicyLimit {
				t.Errorf("%s with a whole parameter of %s ARNs (4,096 bytes): %d characters, IAM allows %d", id, c.name, n, managedPolicyLimit)
			} else {
				t.Logf("%s with a whole parameter of %s ARNs (4,096 bytes): %d characters", id, c.name, n)
			}
		}
	}
	tpl := openWith(t, nil)
	for _, id := range []string{"SourceGuardrailPolicy", "SourceKeyGuardrailPolicy"} {
		if conditionHolds(tpl, tpl.Resources[id]) {
			t.Errorf("%s without registered sources: a deny on no resource", id)
		}
	}
}

// A managed policy's Description cannot change in place: CloudFormation
// replaces the policy (AWS::IAM::ManagedPolicy, Description: "Update
// requires: Replacement"), which gives it a new ARN (the stack's exports
// change, and an importing stack blocks the update) and deletes the one
// operators and auditors hold. Every managed policy's description is
// pinned here as deployed; a new policy adds its own.
func TestManagedPolicyDescriptionsNeverChange(t *testing.T) {
	const stack = "DLQ Quarantine stack prod" // the test stack's ${AWS::StackName}
	want := map[string]string{
		"OperatorPolicy":             stack + " operators (dlqctl): read the quarantine and its health; every change goes through the operator endpoint (verified caller) or the redrive function. Attach GuardrailPolicy and WatchGuardrailPolicy with it.",
		"AuditorPolicy":              stack + " auditors (dlqctl verify, online and ledger export): read the quarantine, the archive and the ledger, verify digest signatures; change nothing. Attach GuardrailPolicy and WatchGuardrailPolicy with it.",
		"GuardrailPolicy":            stack + ": what operators and auditors must never do, whatever else they hold. Attach with WatchGuardrailPolicy and OperatorPolicy or AuditorPolicy.",
		"WatchGuardrailPolicy":       stack + ": never destroy or forge dead letters, blind the ledger or silence the alarms. Attach with GuardrailPolicy.",
		"SourceGuardrailPolicy":      stack + ": never forge, purge, receive, move or reconfigure the registered source queues (SourceQueueArns). Attach with GuardrailPolicy and WatchGuardrailPolicy.",
		"SourceKeyGuardrailPolicy":   stack + ": never disable, delete, re-policy or grant on the registered source queues' keys (SourceKmsKeyArns). Attach with GuardrailPolicy and WatchGuardrailPolicy.",
		"SourceTagGuardrailPolicy":   stack + ": never forge, purge, receive, move or reconfigure the tagged source queues or stop their keys, and never tag or untag dlq-quarantine:source (TaggedSourceAccess). Attach with GuardrailPolicy and WatchGuardrailPolicy.",
		"RedriveSourceQueuesPolicy":  "The registered source queues the redrive and operator functions replay into (SourceQueueArns).",
		"RedriveSourceKeysPolicy":    "The KMS keys of the registered source queues (SourceKmsKeyArns), through SQS only.",
		"RedriveTaggedSourcesPolicy": "The queues of this account tagged dlq-quarantine:source with the stack's name, and their keys tagged alike (TaggedSourceAccess).",
	}
	policies := openWith(t, map[string]any{"SourceQueueArns": "arn:aws:sqs:eu-west-1:111122223333:orders", "SourceKmsKeyArns": "arn:aws:kms:eu-west-1:111122223333:key/1", "TaggedSourceAccess": "Enabled"}).GetAllIAMManagedPolicyResources()
	for id, pol := range policies {
		w, ok := want[id]
		switch {
		case !ok:
			t.Errorf("managed policy %s has no pinned description: add it here (its description can never change)", id)
		case aws.ToString(pol.Description) != w:
			t.Errorf("%s's description changed: %q; CloudFormation would replace the policy (a new ARN, the one people hold deleted)", id, aws.ToString(pol.Description))
		}
	}
	for id := range want {
		if _, ok := policies[id]; !ok {
			t.Errorf("pinned managed policy %s is not in the template", id)
		}
	}
}

package template_test

// Issue 26, "Alarms a person receives": every alarm reaches a person.

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/awslabs/goformation/v7/cloudformation"
	"github.com/awslabs/goformation/v7/cloudformation/cloudwatch"

	"github.com/dlqquarantine/dlqq/shared/dev/localrunner"
	"github.com/dlqquarantine/dlqq/shared/dev/template"
	"github.com/dlqquarantine/dlqq/shared/usecase/redrive"
	"github.com/dlqquarantine/dlqq/shared/usecase/sweeper"
)

const (
	alarmTopic    = "arn:aws:sns:eu-west-1:111122223333:prod-alarmtopic"
	externalTopic = "arn:aws:sns:eu-west-1:111122223333:pager"
)

// openWith is the template resolved with params over the defaults.
func openWith(t *testing.T, params map[string]any) *cloudformation.Template {
	t.Helper()
	e := env
	e.Params = params
	tpl, err := template.Open(template.Path(), e)
	if err != nil {
		t.Fatal(err)
	}
	return tpl
}

// rawTemplate is infra/template.yaml in its long form, unresolved: the
// parts goformation does not model (Rules) are read from it.
func rawTemplate(t *testing.T) map[string]any {
	t.Helper()
	var doc map[string]any
	if err := json.Unmarshal(longTemplate(t), &doc); err != nil {
		t.Fatal(err)
	}
	return doc
}

// ruleFailures evaluates the template's Rules as CloudFormation does
// before a deploy, with params over the parameters' defaults, and returns
// the AssertDescription of every assertion that fails. It knows the rule
// functions the template uses (Fn::And, Fn::Or, Fn::Not, Fn::Equals,
// Fn::Contains, Ref) and fails t on any other.
func ruleFailures(t *testing.T, doc map[string]any, params map[string]string) []string {
	t.Helper()
	values := map[string]string{"AWS::Region": env.Region, "AWS::AccountId": env.Account, "AWS::StackName": env.StackName, "AWS::Partition": "aws"}
	ps, _ := doc["Parameters"].(map[string]any)
	for name, p := range ps {
		if d, ok := p.(map[string]any)["Default"]; ok {
			values[name] = fmt.Sprint(d)
		}
	}
	for k, v := range params {
		values[k] = v
	}
	var value func(v any) string
	var eval func(v any) bool
	value = func(v any) string {
		switch x := v.(type) {
		case string:
			return x
		case float64, bool:
			return fmt.Sprint(x)
		case map[string]any:
			if name, ok := x["Ref"].(string); ok && len(x) == 1 {
				got, ok := values[name]
				if !ok {
					t.Fatalf("a rule refers to %s, which is no parameter", name)
				}
				return got
			}
		}
		t.Fatalf("a rule compares %v, which this evaluator does not know", v)
		return ""
	}
	eval = func(v any) bool {
		m, ok := v.(map[string]any)
		if !ok || len(m) != 1 {
			t.Fatalf("a rule holds %v, which is not one rule function", v)
		}
		for fn, arg := range m {
			args, _ := arg.([]any)
			switch fn {
			case "Fn::Equals":
				return len(args) == 2 && value(args[0]) == value(args[1])
			case "Fn::Not":
				return len(args) == 1 && !eval(args[0])
			case "Fn::And", "Fn::Or":
				if len(args) < 2 || len(args) > 10 {
					t.Fatalf("%s takes 2 to 10 conditions, not %d", fn, len(args))
				}
				and := fn == "Fn::And"
				for _, a := range args {
					if eval(a) != and {
						return !and
					}
				}
				return and
			case "Fn::Contains":
				list, _ := args[0].([]any)
				return slices.ContainsFunc(list, func(e any) bool { return value(e) == value(args[1]) })
			}
			t.Fatalf("rule function %s is not known to this evaluator", fn)
		}
		return false
	}
	var failed []string
	rules, _ := doc["Rules"].(map[string]any)
	for _, r := range rules {
		rule, _ := r.(map[string]any)
		if c, ok := rule["RuleCondition"]; ok && !eval(c) {
			continue
		}
		asserts, _ := rule["Assertions"].([]any)
		for _, a := range asserts {
			a, _ := a.(map[string]any)
			if !eval(a["Assert"]) {
				failed = append(failed, fmt.Sprint(a["AssertDescription"]))
			}
		}
	}
	return failed
}

// accepts reports whether CloudFormation accepts value for the template's
// parameter name: its AllowedPattern must match the whole value, and its
// AllowedValues hold it.
func accepts(t *testing.T, tpl *cloudformation.Template, name, value string) bool {
	t.Helper()
	p, ok := tpl.Parameters[name]
	if !ok {
		t.Fatalf("no parameter %s", name)
	}
	if p.AllowedPattern != nil && !regexp.MustCompile(`^(?:`+*p.AllowedPattern+`)$`).MatchString(value) {
		return false
	}
	if p.AllowedValues != nil && !slices.ContainsFunc(p.AllowedValues, func(v any) bool { return fmt.Sprint(v) == value }) {
		return false
	}
	return true
}

// A deploy that names neither an address nor a topic is refused (the
// rule's assertion fails with a description that names both parameters);
// an address, a topic or both are accepted; the parameters refuse what is
// neither an address nor a standard SNS topic's ARN (any partition). With
// a topic, every alarm and the tamper rule notify it besides the stack's
// topic, within CloudWatch's five actions per state.
func TestAlarmDestinationIsRequired(t *testing.T) {
	doc := rawTemplate(t)
	for _, c := range []struct {
		email, topic string
		ok           bool
	}{
		{"", "", false},
		{"oncall@example.com", "", true},
		{"", externalTopic, true},
		{"oncall@example.com", externalTopic, true},
	} {
		failed := ruleFailures(t, doc, map[string]string{"AlarmEmail": c.email, "ExternalAlarmTopicArn": c.topic})
		if (len(failed) == 0) != c.ok {
			t.Errorf("AlarmEmail %q, ExternalAlarmTopicArn %q: the rules fail %q; want a deploy %v", c.email, c.topic, failed, map[bool]string{true: "accepted", false: "refused"}[c.ok])
		}
		for _, why := range failed {
			if !strings.Contains(why, "AlarmEmail") || !strings.Contains(why, "ExternalAlarmTopicArn") {
				t.Errorf("the rule says %q: it must name both ways to get paged", why)
			}
		}
	}

	tpl := open(t)
	for name, values := range map[string]map[string]bool{
		"AlarmEmail": {
			"":                              true,
			"oncall@example.com":            true,
			"on.call+dlq@ops.example.co.uk": true,
			"oncall":                        false,
			"oncall@example":                false,
			"a@b.c,d@e.f":                   false,
			"on call@example.com":           false,
		},
		"ExternalAlarmTopicArn": {
			"":            true,
			externalTopic: true,
			"arn:aws-cn:sns:cn-north-1:111122223333:pager":          true,
			"arn:aws-us-gov:sns:us-gov-west-1:111122223333:pager_2": true,
			"arn:aws-iso-b:sns:us-isob-east-1:111122223333:pager":   true,
			"arn:aws:sqs:eu-west-1:111122223333:pager":              false,
			"arn:aws:sns:eu-west-1:1111:pager":                      false,
			"arn:aws:sns:eu-west-1:111122223333:pager.fifo":         false,
			"arn:aws:sns:eu-west-1:111122223333:":                   false,
			"pager":                                                 false,
		},
	} {
		for v, want := range values {
			if got := accepts(t, tpl, name, v); got != want {
				t.Errorf("%s=%q accepted %v, want %v", name, v, got, want)
			}
		}
	}

	for _, c := range []struct {
		topic string
		want  []string
	}{{"", []string{alarmTopic}}, {externalTopic, []string{alarmTopic, externalTopic}}} {
		tpl := openWith(t, map[string]any{"ExternalAlarmTopicArn": c.topic, "ExtraDLQArn": "arn:aws:sqs:eu-west-1:111122223333:legacy-dlq", "LedgerMappingEnabled": "false"})
		for id, a := range tpl.GetAllCloudWatchAlarmResources() {
			if !slices.Equal(a.AlarmActions, c.want) {
				t.Errorf("ExternalAlarmTopicArn %q: %s notifies %v, want %v", c.topic, id, a.AlarmActions, c.want)
			}
			for what, actions := range map[string][]string{"ALARM": a.AlarmActions, "OK": a.OKActions, "INSUFFICIENT_DATA": a.InsufficientDataActions} {
				if len(actions) > 5 {
					t.Errorf("%s has %d %s actions; CloudWatch allows 5", id, len(actions), what)
				}
			}
		}
		rule := lookup(t, tpl.GetEventsRuleWithName, "LedgerTamperRule")
		var arns []string
		for _, tg := range rule.Targets {
			arns = append(arns, tg.Arn)
			// Each target keeps its undelivered events and retries a day.
			if tg.DeadLetterConfig == nil || aws.ToString(tg.DeadLetterConfig.Arn) != "arn:aws:sqs:eu-west-1:111122223333:prod-failed-invocations" ||
				tg.RetryPolicy == nil || aws.ToInt(tg.RetryPolicy.MaximumEventAgeInSeconds) != 86400 {
				t.Errorf("ExternalAlarmTopicArn %q: tamper rule target %s (%s) has no dead-letter queue or a day of retries", c.topic, tg.Id, tg.Arn)
			}
		}
		if !slices.Equal(arns, c.want) {
			t.Errorf("ExternalAlarmTopicArn %q: the tamper rule notifies %v, want %v", c.topic, arns, c.want)
		}
	}

	// What no rule can check is written down.
	raw, err := os.ReadFile(filepath.Join(filepath.Dir(template.Path()), "..", "docs", "template.md"))
	if err != nil {
		t.Fatal(err)
	}
	pre := strings.Join(section(t, string(raw), "Deploy preconditions"), "\n")
	for _, want := range []string{"ExternalAlarmTopicArn", "cloudwatch.amazonaws.com", "events.amazonaws.com", "sns:Publish", "kms:GenerateDataKey", "kms:Decrypt", "PendingConfirmation"} {
		if !strings.Contains(pre, want) {
			t.Errorf("docs/template.md, Deploy preconditions, does not mention %s", want)
		}
	}
}

// reminders are the alarms that leave ALARM and enter it again every hour
// on purpose, so that a condition that lasts pages again: an OK
// notification every hour would be noise, so they send none. Each has a
// plain alarm beside it that does go OK when the condition ends. first is
// the minute by which one pages for a condition that holds from minute 0.
var reminders = map[string]struct {
	why   string
	first int
}{
	"LedgerFailuresReminderAlarm":       {"pages again every hour while a ledger failure record waits; LedgerFailuresAlarm goes OK when the queue is empty", 10},
	"LedgerUpgradeReminderAlarm":        {"pages every hour while LedgerMappingEnabled=false; the update that ends the window removes it", 10},
	"DLQNeverEmptiesReminderAlarm":      {"pages again every hour while the DLQ never empties (a stuck message is deleted when the queue's retention runs out); DLQNeverEmptiesAlarm goes OK when it empties", 60},
	"ExtraDLQNeverEmptiesReminderAlarm": {"the same for an attached DLQ", 60},
	"FifoDLQNeverEmptiesReminderAlarm":  {"the same for the stack's FIFO DLQ", 60},
}

// Every alarm says when it is over (OK notifications, to the same
// destinations as its ALARM ones), but the reminders.
func TestEveryAlarmNotifiesOK(t *testing.T) {
	for _, topic := range []string{"", externalTopic} {
		tpl := openWith(t, map[string]any{"ExternalAlarmTopicArn": topic, "ExtraDLQArn": "arn:aws:sqs:eu-west-1:111122223333:legacy-dlq", "LedgerMappingEnabled": "false"})
		alarms := tpl.GetAllCloudWatchAlarmResources()
		for id, a := range alarms {
			if r, ok := reminders[id]; ok {
				if len(a.OKActions) != 0 {
					t.Errorf("reminder %s notifies OK every hour: %v", id, a.OKActions)
				}
				// It is a reminder: with its condition holding for five
				// hours (every metric it reads at 1), it pages every hour.
				held := world{}
				for _, q := range a.Metrics {
					if ms := q.MetricStat; ms != nil {
						held[metricKey(aws.ToString(ms.Metric.Namespace), aws.ToString(ms.Metric.MetricName), ms.Metric.Dimensions)] = constant(1, 0, 300)
					}
				}
				reminderGaps(t, id, simulate(t, a, held, 300), r.first, 300)
				continue
			}
			if len(a.OKActions) == 0 || !slices.Equal(a.OKActions, a.AlarmActions) {
				t.Errorf("ExternalAlarmTopicArn %q: %s notifies OK to %v, ALARM to %v", topic, id, a.OKActions, a.AlarmActions)
			}
		}
		for id := range reminders {
			if _, ok := alarms[id]; !ok {
				t.Errorf("reminder %s is no alarm of the template", id)
			}
		}
	}
}

// sqsKey is the key of an AWS/SQS metric of queue.
func sqsKey(metric, queue string) string {
	return metricKey("AWS/SQS", metric, []cloudwatch.Alarm_Dimension{{Name: "QueueName", Value: queue}})
}

// watched returns the keys of the metrics a reads: its metric, or those
// of its metric-math queries.
func watched(a *cloudwatch.Alarm) []string {
	if len(a.Metrics) == 0 {
		return []string{metricKey(aws.ToString(a.Namespace), aws.ToString(a.MetricName), a.Dimensions)}
	}
	var out []string
	for _, q := range a.Metrics {
		if ms := q.MetricStat; ms != nil && ms.Metric != nil {
			out = append(out, metricKey(aws.ToString(ms.Metric.Namespace), aws.ToString(ms.Metric.MetricName), ms.Metric.Dimensions))
		}
	}
	return out
}

// mathAlarmOn returns the ids of the metric-math alarms of tpl that read
// every one of keys.
func mathAlarmOn(tpl *cloudformation.Template, keys ...string) []string {
	var out []string
	for id, a := range tpl.GetAllCloudWatchAlarmResources() {
		var read []string
		for _, q := range a.Metrics {
			if ms := q.MetricStat; ms != nil && ms.Metric != nil {
				read = append(read, metricKey(aws.ToString(ms.Metric.Namespace), aws.ToString(ms.Metric.MetricName), ms.Metric.Dimensions))
			}
		}
		if len(read) > 0 && !slices.ContainsFunc(keys, func(k string) bool { return !slices.Contains(read, k) }) {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out
}

// sqsAge is what SQS reports as ApproximateAgeOfOldestMessage, in
// seconds, for a queue holding one message from minute from to minute to
// (exclusive) that is received at the minutes in received: its age, but
// only until it has been received three times ("After a message is
// received three times (or more) and not processed ... the age of a
// poison-pill message isn't included in the metric until the poison-pill
// message is consumed successfully", SQS developer guide, "Available
// CloudWatch metrics for Amazon SQS"); 0 with no message counted.
func sqsAge(from, to int, received func(minute int) bool) func(int) (float64, bool) {
	return func(m int) (float64, bool) {
		n := 0
		for r := from; r <= m; r++ {
			if received(r) {
				n++
			}
		}
		if m < from || m >= to || n >= 3 {
			return 0, true
		}
		return float64(60 * (m - from)), true
	}
}

// sampling is how SQS's publication delivers per-minute metrics: not
// like clockwork.
type sampling struct {
	name string
	// gap: minute m's sample is missing when m%gap == gap-1 (0: none).
	gap int
	// double: the sample of minute m+1 comes within minute m (two samples
	// in one minute, Maximum of the two) and minute m+1 has none, when
	// m%double == double-2 (0: none).
	double int
	// only: the gaps are in this metric alone ("": in every metric).
	only string
}

func (s sampling) of(key string, src func(int) (float64, bool)) func(int) (float64, bool) {
	return func(m int) (float64, bool) {
		if s.gap > 0 && m%s.gap == s.gap-1 && (s.only == "" || s.only == key) {
			return 0, false
		}
		if s.double > 0 && m%s.double == s.double-1 {
			return 0, false
		}
		v, ok := src(m)
		if s.double > 0 && m%s.double == s.double-2 {
			if w, ok2 := src(m + 1); ok2 && (!ok || w > v) {
				v, ok = w, true
			}
		}
		return v, ok
	}
}

// SQS leaves a message that is received again and again out of
// ApproximateAgeOfOldestMessage, so a message ingest keeps failing does not
// trip the age alarm (though it would, were it counted), and one message
// is far below the depth alarms. Each DLQ (the stack's, and an attached
// one) has an alarm on visible plus in-flight messages sampled every
// minute: a message cycling between the two pages once, an hour later,
// and the alarm is OK again soon after it is ingested, and a reminder
// pages every hour meanwhile; a trickle that ingest keeps up with never
// pages, nor does an idle queue. SQS's samples are irregular: whether a
// minute in 20, 30 or 60 has no sample (in both metrics, or in one), or
// two samples come in one minute, changes none of it.
func TestDLQNeverEmptiesAlarm(t *testing.T) {
	tpl := openWith(t, map[string]any{"ExtraDLQArn": "arn:aws:sqs:eu-west-1:111122223333:legacy-dlq"})
	alarms := tpl.GetAllCloudWatchAlarmResources()
	var common []sampling
	for _, every := range []int{0, 20, 30, 60} {
		common = append(common, sampling{name: fmt.Sprintf("a minute in %d without samples", every), gap: every})
	}
	for _, every := range []int{20, 30, 60} {
		common = append(common, sampling{name: fmt.Sprintf("two samples in a minute every %d", every), double: every})
	}
	for queue, c := range map[string]struct{ condition, prefix, ageAlarm string }{
		"prod-dlq":      {"", "", "DLQOldestMessageAlarm"},
		"legacy-dlq":    {"HasExtraDLQ", "Extra", "ExtraDLQOldestMessageAlarm"},
		"prod-dlq.fifo": {"", "Fifo", "FifoDLQOldestMessageAlarm"},
	} {
		visible, inflight, age := sqsKey("ApproximateNumberOfMessagesVisible", queue), sqsKey("ApproximateNumberOfMessagesNotVisible", queue), sqsKey("ApproximateAgeOfOldestMessage", queue)
		samplings := slices.Clone(common)
		for _, only := range []string{visible, inflight} {
			samplings = append(samplings, sampling{name: "a minute in 20 without a sample of " + only, gap: 20, only: only})
		}
		plain, reminder := alarms[c.prefix+"DLQNeverEmptiesAlarm"], alarms[c.prefix+"DLQNeverEmptiesReminderAlarm"]
		if plain == nil {
			t.Fatalf("%s: no %sDLQNeverEmptiesAlarm", queue, c.prefix)
		}
		both := []*cloudwatch.Alarm{plain, reminder}
		if reminder == nil {
			t.Errorf("%s: no %sDLQNeverEmptiesReminderAlarm", queue, c.prefix)
			both = both[:1]
		}
		for _, a := range both {
			if id := aws.ToString(a.AlarmName); a.AWSCloudFormationCondition != c.condition || !slices.Equal(watched(a), []string{visible, inflight}) {
				t.Errorf("%s: Condition %q, reads %v; want %q, %v", id, a.AWSCloudFormationCondition, watched(a), c.condition, []string{visible, inflight})
			}
		}
		// Ingest fails the message every time: in flight for the
		// visibility timeout (3 minutes), visible for a minute, from
		// minute 10 until it is finally stored at minute 250.
		stuckVisible := func(m int) (float64, bool) { return float64(btoi(m >= 10 && m < 250 && m%4 == 3)), true }
		stuckInflight := func(m int) (float64, bool) { return float64(btoi(m >= 10 && m < 250 && m%4 != 3)), true }
		received := func(m int) bool { return m == 10 || (m > 10 && m%4 == 0) }
		for _, sm := range samplings {
			for _, r := range fillReadings {
				name := fmt.Sprintf("%s, %s (%+v)", queue, sm.name, r)
				stuck := world{visible: sm.of(visible, stuckVisible), inflight: sm.of(inflight, stuckInflight)}
				changes := simulateReading(t, plain, stuck, 400, r)
				if alarm := entered(changes, "ALARM"); len(alarm) != 1 || alarm[0] < 10+55 || alarm[0] > 10+62+r.late {
					t.Errorf("%s: a message stuck from minute 10 pages at %v (changes %v), want once, an hour later", name, alarm, changes)
				}
				if ok := entered(changes, "OK"); len(ok) == 0 || ok[len(ok)-1] < 250 || ok[len(ok)-1] > 256+r.late {
					t.Errorf("%s: the message stored at minute 250 leaves the alarm %v", name, changes)
				}
				if reminder != nil {
					reminderGaps(t, name+" reminder", simulateReading(t, reminder, stuck, 400, r), 10+60+60, 250)
				}
				// A dead letter every 4 minutes, stored within the minute.
				trickle := world{visible: sm.of(visible, func(m int) (float64, bool) { return float64(btoi(m%4 == 0)), true }), inflight: sm.of(inflight, constant(0, 0, 400))}
				for _, a := range both {
					if got := entered(simulateReading(t, a, trickle, 400, r), "ALARM"); len(got) != 0 {
						t.Errorf("%s: %s pages for a trickle that ingest keeps up with at %v", name, aws.ToString(a.AlarmName), got)
					}
				}
			}
		}
		// An idle queue: SQS publishes nothing, or (its mapping polling
		// it) zeros.
		for what, w := range map[string]world{"an idle queue": {}, "a polled empty queue": {visible: constant(0, 0, 400), inflight: constant(0, 0, 400)}} {
			for _, r := range fillReadings {
				for _, a := range both {
					if got := entered(simulateReading(t, a, w, 400, r), "ALARM"); len(got) != 0 {
						t.Errorf("%s (%+v): %s pages for %s at %v", queue, r, aws.ToString(a.AlarmName), what, got)
					}
				}
			}
		}
		// The age alarm: the stuck message's age is reported until its
		// third receive (minute 16), far below the threshold; counted, the
		// 240 minutes it waits would trip it.
		ageAlarm := alarms[c.ageAlarm]
		if got := entered(simulate(t, ageAlarm, world{age: sqsAge(10, 250, received)}, 400), "ALARM"); len(got) != 0 {
			t.Errorf("%s pages for the stuck message at %v: SQS leaves it out of the age metric", c.ageAlarm, got)
		}
		if got := entered(simulate(t, ageAlarm, world{age: sqsAge(10, 250, func(int) bool { return false })}, 400), "ALARM"); len(got) != 1 {
			t.Errorf("%s does not page for a message that waits 240 minutes unreceived (%v): the stuck message's silence there proves nothing", c.ageAlarm, got)
		}
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// reminderGaps checks that changes enter ALARM first by minute first and
// then once an hour (every gap 55 to 65 minutes, but the first, which
// ends at the next hour) until minute last, and never after it.
func reminderGaps(t *testing.T, id string, changes []notice, first, last int) {
	t.Helper()
	alarms := entered(changes, "ALARM")
	if len(alarms) == 0 || alarms[0] > first {
		t.Errorf("%s: first page at %v, want by minute %d (%v)", id, alarms, first, changes)
		return
	}
	for i := 1; i < len(alarms); i++ {
		if gap := alarms[i] - alarms[i-1]; (gap < 55 && i > 1) || gap > 65 {
			t.Errorf("%s: pages at %v: a gap of %d minutes, want one an hour (%v)", id, alarms, gap, changes)
		}
	}
	if end := alarms[len(alarms)-1]; end > last || last-end > 65 {
		t.Errorf("%s: last page at minute %d, want within the hour before minute %d (%v)", id, end, last, changes)
	}
}

// A record in the ledger-failures queue is a permanent hole in the ledger,
// and CloudWatch never notifies again while an alarm stays in ALARM. A
// reminder alarm pages once an hour while a record waits; the plain alarm
// pages once and says OK when the queue is emptied; the reminder sends no
// OK.
func TestLedgerFailuresRenotify(t *testing.T) {
	tpl := open(t)
	waiting := sqsKey("ApproximateNumberOfMessagesVisible", ledgerQueueName)
	ids := mathAlarmOn(tpl, waiting)
	if len(ids) != 1 {
		t.Fatalf("reminder alarms on the ledger-failures queue: %v, want one", ids)
	}
	reminder := lookup(t, tpl.GetCloudWatchAlarmWithName, ids[0])
	if _, ok := reminders[ids[0]]; !ok || len(reminder.OKActions) != 0 || len(reminder.AlarmActions) == 0 {
		t.Errorf("%s: a reminder that pages (%v) and says no OK (%v)", ids[0], reminder.AlarmActions, reminder.OKActions)
	}
	plain := lookup(t, tpl.GetCloudWatchAlarmWithName, "LedgerFailuresAlarm")
	if len(plain.OKActions) == 0 {
		t.Error("LedgerFailuresAlarm does not say when the queue is empty")
	}
	// One record arrives at minute 37 and is removed at minute 337.
	w := world{waiting: func(m int) (float64, bool) { return float64(btoi(m >= 37 && m < 337)), true }}
	changes := simulate(t, reminder, w, 480)
	reminderGaps(t, ids[0], changes, 37+10, 337)
	if n := len(entered(changes, "ALARM")); n < 5 {
		t.Errorf("%s: %d pages over the 5 hours the record waited (%v)", ids[0], n, changes)
	}
	plainChanges := simulate(t, plain, w, 480)
	if alarm, ok := entered(plainChanges, "ALARM"), entered(plainChanges, "OK"); len(alarm) != 1 || alarm[0] > 37+10 ||
		len(ok) == 0 || ok[len(ok)-1] < 337 || ok[len(ok)-1] > 337+10 {
		t.Errorf("LedgerFailuresAlarm: %v; want one page when the record arrives and an OK when it is removed", plainChanges)
	}
}

// schedules returns the allowed values of a schedule parameter with
// their intervals in minutes.
func schedules(t *testing.T, tpl *cloudformation.Template, name string) map[string]int {
	t.Helper()
	p := tpl.Parameters[name]
	if len(p.AllowedValues) == 0 {
		t.Fatalf("%s has no AllowedValues: any schedule, whatever its heartbeat", name)
	}
	out := map[string]int{}
	for _, v := range p.AllowedValues {
		every, err := localrunner.ParseRate(fmt.Sprint(v))
		if err != nil {
			t.Fatal(err)
		}
		out[fmt.Sprint(v)] = int(every.Minutes())
	}
	if _, ok := out[fmt.Sprint(p.Default)]; !ok {
		t.Fatalf("%s's default %v is not allowed", name, p.Default)
	}
	return out
}

// runs is a scheduled function that starts every interval minutes from
// minute offset and publishes one sample of key when a run completes,
// each run lasting one of durations in turn, until minute stop: its
// heartbeat as CloudWatch receives it.
func runs(key string, offset, interval, stop int, durations ...int) world {
	done := map[int]bool{}
	for i, start := 0, offset; start < stop; i, start = i+1, start+interval {
		done[start+durations[i%len(durations)]] = true
	}
	return world{key: func(m int) (float64, bool) { return 1, done[m] }}
}

// fillReadings are the readings of CloudWatch an alarm that relies on
// FILL is tested under: the model's default (FILL of a series with no
// point in the range returns none, and TreatMissingData decides), the
// other (it fills the whole range), and samples that reach CloudWatch two
// minutes late (FILL fills a period whose sample is not there yet: the
// guide's FILL entry warns of it, and advises M out of N).
var fillReadings = []readings{{}, {fillEmpty: true}, {late: 2}}

// heartbeat checks a heartbeat alarm on key for a function that runs
// every `every` minutes, each run lasting up to maxRun minutes and
// publishing one sample when it completes: it never pages while runs
// complete, whatever the schedule's offset from the alarm's periods and
// the runs' durations, and when the runs stop it pages once, more than
// `after` and at most `within` minutes after the last sample (its late
// minutes more when samples arrive late), and stays in ALARM. An empty
// period must count as breaching (TreatMissingData alone would page late,
// "How alarm state is evaluated when data is missing"), and missing data
// breaches.
func heartbeat(t *testing.T, name string, a *cloudwatch.Alarm, key string, every, maxRun, after, within int) {
	t.Helper()
	if aws.ToString(a.TreatMissingData) != "breaching" {
		t.Errorf("%s: a silent function is missing data, which the alarm treats as %q", name, aws.ToString(a.TreatMissingData))
	}
	horizon := max(600, 40*every)
	for _, r := range fillReadings {
		for offset := range every {
			// Runs of mixed durations, and runs alternately quick and
			// slow: near a period's end they alternately stay in it and
			// spill into the next, leaving every other period empty.
			for _, durations := range [][]int{{maxRun, 0, maxRun - 1, 1, 0, maxRun, maxRun, 0}, {0, maxRun}} {
				healthy := runs(key, offset, every, horizon, durations...)
				if got := entered(simulateReading(t, a, healthy, horizon, r), "ALARM"); len(got) != 0 {
					t.Errorf("%s, runs from minute %d lasting %v (%+v): the heartbeat pages at %v while every run completes", name, offset, durations, r, got)
				}
			}
			// No run starts from minute stop on; the last one, lasting
			// maxRun minutes, publishes at minute last.
			stop := horizon/2 + offset
			last := -1
			for start := offset; start < stop; start += every {
				last = start + maxRun
			}
			changes := simulateReading(t, a, runs(key, offset, every, stop, maxRun), horizon, r)
			got := entered(changes, "ALARM")
			if len(got) != 1 || got[0]-last <= after || got[0]-last > within+r.late || changes[len(changes)-1].state != "ALARM" {
				t.Errorf("%s, runs from minute %d (%+v): the last sample is at minute %d; the heartbeat pages at %v (%v), want once, %d to %d minutes later",
					name, offset, r, last, got, changes, after, within)
			}
		}
	}
}

// The sweeper publishes a heartbeat on every completed run; an alarm
// pages three to four schedule intervals after the last completed run
// (three empty periods, the period being the interval), and never while
// runs complete, whatever their durations (up to the function's 15
// minutes), for every schedule SweepSchedule allows and every offset of
// the schedule from the periods. The same for the metrics function's
// heartbeat and MetricsSchedule (runs of up to a minute, its timeout): two
// 5-minute periods without a datapoint, 10 to 15 minutes after the last.
func TestSweeperHeartbeat(t *testing.T) {
	tpl := open(t)
	table := aws.ToString(lookup(t, tpl.GetDynamoDBTableWithName, "QuarantineTable").TableName)
	beat := metricKey("DLQQuarantine", sweeper.MetricCompleted, []cloudwatch.Alarm_Dimension{{Name: "Table", Value: table}})
	fn := lookup(t, tpl.GetServerlessFunctionWithName, "SweeperFunction")
	if aws.ToInt(fn.Timeout) > 900 {
		t.Fatalf("the sweeper runs up to %d s; the heartbeat allows 15 minutes", aws.ToInt(fn.Timeout))
	}
	cfg, err := sweeper.ConfigFromEnv(func(k string) string { return fn.Environment.Variables[k] })
	if err != nil || cfg.Sweeper.Table != table {
		t.Fatalf("the sweeper publishes its heartbeat for table %q, the alarm watches %q (%v)", cfg.Sweeper.Table, table, err)
	}
	for schedule, every := range schedules(t, tpl, "SweepSchedule") {
		tpl := openWith(t, map[string]any{"SweepSchedule": schedule})
		a := lookup(t, tpl.GetCloudWatchAlarmWithName, "SweeperHeartbeatAlarm")
		if got := watched(a); !slices.Equal(got, []string{beat}) {
			t.Fatalf("%s: SweeperHeartbeatAlarm reads %v, want the heartbeat %s", schedule, got, beat)
		}
		rule := lookup(t, tpl.GetEventsRuleWithName, "SweeperSchedule")
		if aws.ToString(rule.ScheduleExpression) != schedule {
			t.Fatalf("the sweeper runs on %q", aws.ToString(rule.ScheduleExpression))
		}
		heartbeat(t, "SweepSchedule "+schedule, a, beat, every, 15, 3*every, 4*every)
	}

	depth := metricKey("DLQQuarantine", "OldestQuarantinedAgeSeconds", []cloudwatch.Alarm_Dimension{{Name: "Source", Value: "prod-source"}})
	hb := lookup(t, tpl.GetCloudWatchAlarmWithName, "MetricsHeartbeatAlarm")
	if got := watched(hb); !slices.Equal(got, []string{depth}) {
		t.Fatalf("MetricsHeartbeatAlarm reads %v, want %s", got, depth)
	}
	if fn := lookup(t, tpl.GetServerlessFunctionWithName, "MetricsFunction"); aws.ToInt(fn.Timeout) > 60 {
		t.Fatalf("the metrics function runs up to %d s; its heartbeat allows a minute", aws.ToInt(fn.Timeout))
	}
	for schedule, every := range schedules(t, tpl, "MetricsSchedule") {
		heartbeat(t, "MetricsSchedule "+schedule, hb, depth, every, 1, 10, 15)
	}
}

// The documented upgrade (LedgerMappingEnabled=false: the ledger's stream
// mapping and its digest schedule off until the baseline is taken) is a
// window in which the ledger publishes nothing and the breakers' counters,
// kept from the stream, are frozen. In it no alarm sits in ALARM for want
// of ledger data (the anchoring lag and the iterator age treat missing
// data as not breaching), the standing policies do not run (their rule is
// disabled and the redrive function is told the counters are not live),
// and one reminder pages every hour, with or without data, saying the
// upgrade must finish within the stream's 24 hours. With the mapping on,
// the same silence pages.
func TestUpgradeWindowAlarms(t *testing.T) {
	for _, on := range []bool{true, false} {
		tpl := openWith(t, map[string]any{"LedgerMappingEnabled": fmt.Sprint(on)})
		name := fmt.Sprintf("LedgerMappingEnabled=%v", on)
		if got := tpl.Conditions["LedgerMappingOff"]; got != !on {
			t.Errorf("%s: condition LedgerMappingOff is %v", name, got)
		}

		rule := lookup(t, tpl.GetEventsRuleWithName, "RedrivePolicyRule")
		if state := aws.ToString(rule.State); (on && state != "ENABLED" && state != "") || (!on && state != "DISABLED") {
			t.Errorf("%s: the standing policies' schedule is %q", name, aws.ToString(rule.State))
		}
		fn := lookup(t, tpl.GetServerlessFunctionWithName, "RedriveFunction")
		cfg, err := redrive.ConfigFromEnv(func(k string) string { return fn.Environment.Variables[k] })
		if err != nil || cfg.Service.CountersOff != !on {
			t.Errorf("%s: the redrive function's counters off: %v (COUNTERS_LIVE %q, %v)", name, cfg.Service.CountersOff, fn.Environment.Variables["COUNTERS_LIVE"], err)
		}

		// A quiet, healthy stack: the DLQs empty, the metrics function and
		// the sweeper running, and nothing from the ledger.
		table := aws.ToString(lookup(t, tpl.GetDynamoDBTableWithName, "QuarantineTable").TableName)
		quiet := world{
			metricKey("DLQQuarantine", "OldestQuarantinedAgeSeconds", []cloudwatch.Alarm_Dimension{{Name: "Source", Value: "prod-source"}}): constant(0, 0, 600),
			metricKey("DLQQuarantine", sweeper.MetricCompleted, []cloudwatch.Alarm_Dimension{{Name: "Table", Value: table}}):                func(m int) (float64, bool) { return 1, m%60 == 20 },
		}
		for _, q := range []string{"prod-dlq", ledgerQueueName, "prod-failed-invocations", "prod-source"} {
			for _, m := range []string{"ApproximateNumberOfMessagesVisible", "ApproximateNumberOfMessagesNotVisible", "ApproximateAgeOfOldestMessage", "NumberOfMessagesSent"} {
				quiet[sqsKey(m, q)] = constant(0, 0, 600)
			}
		}
		paging := map[string][]int{}
		for id, a := range tpl.GetAllCloudWatchAlarmResources() {
			if c := a.AWSCloudFormationCondition; c != "" && tpl.Conditions[c] != true {
				continue
			}
			if got := entered(simulate(t, a, quiet, 600), "ALARM"); len(got) > 0 {
				paging[id] = got
			}
		}
		if on {
			silent := []string{"LedgerAnchoringLagAlarm", "LedgerIteratorAgeAlarm"}
			for _, id := range silent {
				if len(paging[id]) == 0 {
					t.Errorf("%s: %s is quiet while the ledger publishes nothing", name, id)
				}
			}
			for id, at := range paging {
				if !slices.Contains(silent, id) {
					t.Errorf("%s: %s pages at %v in a quiet stack", name, id, at)
				}
			}
			continue
		}
		for id, at := range paging {
			if id != "LedgerUpgradeReminderAlarm" {
				t.Errorf("%s: %s pages at %v in a quiet upgrade window", name, id, at)
			}
		}
		reminder := lookup(t, tpl.GetCloudWatchAlarmWithName, "LedgerUpgradeReminderAlarm")
		if reminder.AWSCloudFormationCondition != "LedgerMappingOff" {
			t.Errorf("the upgrade reminder exists under condition %q", reminder.AWSCloudFormationCondition)
		}
		if _, ok := reminders["LedgerUpgradeReminderAlarm"]; !ok || len(reminder.OKActions) != 0 {
			t.Errorf("the upgrade reminder is no reminder: OK actions %v", reminder.OKActions)
		}
		// The baseline runs on the digest function, named; the stream
		// function refuses it.
		digest := aws.ToString(lookup(t, tpl.GetServerlessFunctionWithName, "DigestFunction").FunctionName)
		stream := aws.ToString(lookup(t, tpl.GetServerlessFunctionWithName, "LedgerFunction").FunctionName)
		desc := aws.ToString(reminder.AlarmDescription)
		for _, want := range []string{"LedgerMappingEnabled=true", "24 hours", `{"action":"baseline"}`, "digest function " + digest, "docs/ledger.md"} {
			if !strings.Contains(desc, want) {
				t.Errorf("the upgrade reminder does not say %q: %s", want, desc)
			}
		}
		if regexp.MustCompile(regexp.QuoteMeta(stream) + `\b[^-]|ledger function`).MatchString(desc + " ") {
			t.Errorf("the upgrade reminder names the ledger function or the stream function %s, which refuses the baseline: %s", stream, desc)
		}
		reminderGaps(t, "LedgerUpgradeReminderAlarm", simulate(t, reminder, quiet, 600), 10, 600)
		reminderGaps(t, "LedgerUpgradeReminderAlarm without data", simulate(t, reminder, world{}, 600), 10, 600)
	}
}

// With the ledger's mapping on, the digest run publishes the anchoring lag
// every 5 minutes (a run lasts up to its 2-minute timeout) and its canary
// makes the stream function's mapping deliver a batch as often (within the
// mapping's 60-second tumbling window more): each alarm is a heartbeat
// that pages 15 to 20 minutes after the last datapoint (three empty
// 5-minute periods of four), once, never while runs land, also runs that
// alternately stay in a period and spill into the next (which two of three
// would page for), and still on a lag or an age above its threshold. With the mapping off (the upgrade
// window) their silence pages never, with or without earlier data.
func TestLedgerSilencePages(t *testing.T) {
	for _, on := range []bool{true, false} {
		tpl := openWith(t, map[string]any{"LedgerMappingEnabled": fmt.Sprint(on)})
		name := fmt.Sprintf("LedgerMappingEnabled=%v", on)
		table := aws.ToString(lookup(t, tpl.GetDynamoDBTableWithName, "QuarantineTable").TableName)
		for id, c := range map[string]struct {
			key    string
			maxRun int
		}{
			"LedgerAnchoringLagAlarm": {metricKey("DLQQuarantine", "LedgerAnchoringLag", []cloudwatch.Alarm_Dimension{{Name: "Table", Value: table}}), 2},
			"LedgerIteratorAgeAlarm":  {metricKey("AWS/Lambda", "IteratorAge", []cloudwatch.Alarm_Dimension{{Name: "FunctionName", Value: "prod-ledger"}}), 3},
		} {
			a := lookup(t, tpl.GetCloudWatchAlarmWithName, id)
			if got := watched(a); !slices.Equal(got, []string{c.key}) {
				t.Fatalf("%s: %s reads %v, want %s", name, id, got, c.key)
			}
			if on {
				heartbeat(t, name+" "+id, a, c.key, 5, c.maxRun, 15, 20)
				over := func(m int) (float64, bool) { return aws.ToFloat64(a.Threshold) + 1, m%5 == 2 }
				if got := entered(simulate(t, a, world{c.key: over}, 120), "ALARM"); len(got) != 1 || got[0] > 20 {
					t.Errorf("%s: %s pages at %v for a value above its threshold in every period", name, id, got)
				}
				continue
			}
			for _, r := range fillReadings {
				for _, w := range []world{{}, runs(c.key, 2, 5, 60, c.maxRun)} {
					if got := entered(simulateReading(t, a, w, 600, r), "ALARM"); len(got) != 0 {
						t.Errorf("%s (%+v): %s pages at %v in the upgrade window", name, r, id, got)
					}
				}
			}
		}
	}
}

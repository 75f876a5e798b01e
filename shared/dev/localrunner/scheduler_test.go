package localrunner_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/dlqquarantine/dlqq/shared/dev/localrunner"
	"github.com/dlqquarantine/dlqq/shared/dev/template"
	"github.com/dlqquarantine/dlqq/shared/usecase/redrive"
)

func TestParseRate(t *testing.T) {
	t.Parallel()
	for expr, want := range map[string]time.Duration{"rate(1 minute)": time.Minute, "rate(5 minutes)": 5 * time.Minute, "rate(1 hour)": time.Hour, "rate(2 days)": 48 * time.Hour} {
		if got, err := localrunner.ParseRate(expr); err != nil || got != want {
			t.Errorf("%s = %v, %v", expr, got, err)
		}
	}
	for _, bad := range []string{"cron(0 * * * ? *)", "rate(0 minutes)", "rate(five minutes)", ""} {
		if _, err := localrunner.ParseRate(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// The scheduler runs exactly the template's schedules: the sweeper, the
// metrics, the redrive settle and standing policies with their inputs, and
// the ledger's digest.
func TestSchedulesFromTemplate(t *testing.T) {
	t.Parallel()
	tpl, err := template.Open(template.Path(), template.Env{StackName: "dlqq", Region: "us-east-1", Account: "000000000000"})
	if err != nil {
		t.Fatal(err)
	}
	scheds, err := localrunner.SchedulesFromTemplate(tpl)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]localrunner.Schedule{}
	for _, s := range scheds {
		got[s.Rule] = s
	}
	if s := got["SweeperSchedule"]; s.Every != time.Hour || s.Function != "dlqq-sweeper" {
		t.Errorf("sweeper schedule %+v", s)
	}
	for rule, action := range map[string]string{"RedriveSettleRule": redrive.ActionSettle, "RedrivePolicyRule": redrive.ActionPolicies} {
		s := got[rule]
		if s.Every != 5*time.Minute || s.Function != "dlqq-redrive" {
			t.Errorf("%s schedule %+v", rule, s)
		}
		req, err := redrive.ParseRequest(s.Payload(time.Now()))
		if err != nil || req.Action != action || req.Source != "dlqq-source" {
			t.Errorf("%s input %s: %+v %v", rule, s.Input, req, err)
		}
		if s.Name() != action {
			t.Errorf("%s is named %q, want %q", rule, s.Name(), action)
		}
	}
	// A target without Input gets the scheduled event, as from EventBridge.
	for _, rule := range []string{"SweeperSchedule", "MetricsScheduleRule"} {
		s := got[rule]
		s.RuleARN = "arn:aws:events:us-east-1:000000000000:rule/dlqq-" + rule
		at := time.Date(2026, 11, 29, 18, 0, 0, 0, time.UTC)
		var ev events.CloudWatchEvent
		if err := json.Unmarshal(s.Payload(at), &ev); err != nil || s.Input != nil || s.Name() != rule ||
			ev.DetailType != "Scheduled Event" || ev.Source != "aws.events" || ev.Version != "0" || len(ev.ID) != 36 ||
			ev.AccountID != "000000000000" || ev.Region != "us-east-1" || !ev.Time.Equal(at) ||
			len(ev.Resources) != 1 || ev.Resources[0] != s.RuleARN || string(ev.Detail) != "{}" {
			t.Errorf("%s payload %s (%+v): %v", rule, s.Payload(at), ev, err)
		}
	}
	if s := got["MetricsScheduleRule"]; s.Every != time.Minute || s.Function != "dlqq-metrics" {
		t.Errorf("metrics schedule %+v", s)
	}
	// The digest function's, never the stream function's (issue 26).
	if s := got["LedgerDigestSchedule"]; s.Every != 5*time.Minute || s.Function != "dlqq-digest" || s.Name() != "digest" || string(s.Input) != `{"action":"digest"}` {
		t.Errorf("ledger digest schedule %+v", s)
	}
	if len(scheds) != 5 {
		raw, _ := json.Marshal(scheds)
		t.Errorf("schedules %s", raw)
	}
}

package dlqctl_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatch"
	cwtypes "github.com/aws/aws-sdk-go-v2/service/cloudwatch/types"

	"github.com/dlqquarantine/dlqq/shared/dev/embedded"
	"github.com/dlqquarantine/dlqq/shared/dev/lambdatest"
	"github.com/dlqquarantine/dlqq/shared/usecase/metrics"
	"github.com/dlqquarantine/dlqq/shared/wire"
)

// dlqctl health reads what the real metrics service published to kumo's
// CloudWatch: the latest value of each series (not the window's maximum),
// and the stack's alarms (only those: the template's, which the embedded
// stack created), with their state as stored.
func TestHealthShowsWhatTheMetricsFunctionPublished(t *testing.T) {
	ctx := context.Background()
	v := newInventory(t)
	stack := v.st.Env.StackName
	cw := v.st.Clients.CloudWatch
	// Another stack's alarm, which health must not list.
	if _, err := cw.PutMetricAlarm(ctx, &cloudwatch.PutMetricAlarmInput{AlarmName: aws.String(embedded.RandomName("other") + ".dlq-depth"), Namespace: aws.String("DLQQuarantine"),
		MetricName: aws.String(metrics.MetricDLQDepth), Statistic: cwtypes.StatisticMaximum, Period: aws.Int32(60), EvaluationPeriods: aws.Int32(5),
		Threshold: aws.Float64(100), ComparisonOperator: cwtypes.ComparisonOperatorGreaterThanThreshold}); err != nil {
		t.Fatal(err)
	}
	// The template's alarms, by name, with their metric.
	alarms := map[string]string{}
	for id, a := range v.st.Template.GetAllCloudWatchAlarmResources() {
		if c := a.AWSCloudFormationCondition; c == "" || v.st.Template.Conditions[c] == true {
			alarms[aws.ToString(a.AlarmName)] = aws.ToString(a.MetricName)
			if v.st.Names[id] != aws.ToString(a.AlarmName) {
				t.Fatalf("alarm %s not created: %q", id, v.st.Names[id])
			}
		}
	}
	if len(alarms) < 20 || alarms[stack+".dlq-depth"] != metrics.MetricDLQDepth {
		t.Fatalf("the template's alarms: %v", alarms)
	}
	health := func(args ...string) (string, string, int) {
		t.Helper()
		return v.runAt(t, time.Now(), append([]string{"health", "--stack", stack}, args...)...)
	}

	out, errOut, code := health()
	if code != 0 || !strings.HasPrefix(out, "no datapoints in the last 15m; the metrics function publishes every minute\n") {
		t.Fatalf("health before any publication (exit %d):\n%s%s", code, out, errOut)
	}
	if !strings.Contains(out, "\nalarms "+stack+".…\nALARM ") || strings.Contains(out, "other-") || strings.Contains(out, "no alarms named") ||
		!strings.Contains(out, "note: locally (kumo) alarms are stored but never evaluated") {
		t.Fatalf("health's alarms:\n%s", out)
	}
	for name, metric := range alarms {
		if !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + ` +INSUFFICIENT_DATA +\S+ +` + metric + ` +Unchecked: Initial alarm creation$`).MatchString(out) {
			t.Fatalf("health does not list alarm %s on %s:\n%s", name, metric, out)
		}
	}
	if n := strings.Count(out, "\n"+stack+"."); n != len(alarms) {
		t.Fatalf("health lists %d alarms, the template has %d:\n%s", n, len(alarms), out)
	}

	env, err := lambdatest.Env(v.st, "MetricsFunction")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := metrics.ConfigFromEnv(func(k string) string {
		for _, kv := range env {
			if name, val, _ := strings.Cut(kv, "="); name == k {
				return val
			}
		}
		return ""
	})
	if err != nil {
		t.Fatal(err)
	}
	svc, err := wire.Metrics(ctx, cfg, wire.From(v.st.Clients), wire.Runtime{Log: slog.New(slog.NewJSONHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	body := `{"event_id":"e%d","ndc":"12345-678-90","lot":"L","quantity_delta":1,"schedule":"CII","facility":"F","occurred_at":"2026-11-29T09:00:00Z"}`
	var ids []string
	for i := range 3 {
		ids = append(ids, v.add(t, "m"+string(rune('a'+i)), strings.Replace(body, "%d", string(rune('a'+i)), 1)).DLQID)
	}
	if _, err := svc.Run(ctx); err != nil {
		t.Fatal(err)
	}
	// Another publication a second later (kumo stamps whole seconds), with
	// one record fewer open: the latest value is 2, the window's maximum 3.
	time.Sleep(1100 * time.Millisecond)
	if _, errOut, code := v.run(t, "park", ids[0], "--reason", "look"); code != 0 {
		t.Fatalf("park (exit %d): %s", code, errOut)
	}
	if _, err := svc.Run(ctx); err != nil {
		t.Fatal(err)
	}

	out, errOut, code = health()
	src := "Source=" + v.source
	for _, want := range []string{
		`(?m)^Records +` + regexp.QuoteMeta(src) + ` Status=QUARANTINED Class=exhausted +2 +Count +\S+Z$`,
		`(?m)^Records +` + regexp.QuoteMeta(src) + ` Status=PARKED Class=exhausted +1 +Count`,
		`(?m)^DLQDepth +` + regexp.QuoteMeta(src) + ` +0 +Count`,
		`(?m)^OldestQuarantinedAgeSeconds +` + regexp.QuoteMeta(src) + ` +\d+(\.\d\d)? +Seconds`,
		`(?m)^\(16 Records series at 0 not shown; -o json lists every series\)$`,
		`(?m)^` + regexp.QuoteMeta(stack) + `\.dlq-depth +INSUFFICIENT_DATA`,
	} {
		if !regexp.MustCompile(want).MatchString(out) {
			t.Fatalf("health (exit %d) does not match %s:\n%s%s", code, want, out, errOut)
		}
	}
	if code != 0 || !strings.HasPrefix(out, "DLQQuarantine metrics: the latest datapoint of each in the last 15m") {
		t.Fatalf("health (exit %d):\n%s", code, out)
	}

	out, _, code = health("-o", "json")
	var h struct {
		Metrics []struct {
			Metric     string            `json:"metric"`
			Dimensions map[string]string `json:"dimensions"`
			Value      float64           `json:"value"`
			Timestamp  time.Time         `json:"timestamp"`
		} `json:"metrics"`
		Alarms []struct {
			Name  string `json:"name"`
			State string `json:"state"`
		} `json:"alarms"`
		AlarmsEvaluated *bool  `json:"alarms_evaluated"`
		Window          string `json:"window"`
	}
	if err := json.Unmarshal([]byte(out), &h); err != nil || code != 0 {
		t.Fatalf("health -o json (exit %d): %v\n%s", code, err, out)
	}
	if len(h.Alarms) != len(alarms) || h.AlarmsEvaluated == nil || *h.AlarmsEvaluated || h.Window != "15m" {
		t.Fatalf("health -o json alarms: %s", out)
	}
	for i, a := range h.Alarms {
		if _, ok := alarms[a.Name]; !ok || a.State != "INSUFFICIENT_DATA" || (i > 0 && h.Alarms[i-1].Name >= a.Name) {
			t.Fatalf("health -o json alarm %d %+v (want the template's, sorted by name): %s", i, a, out)
		}
	}
	found := false
	for _, m := range h.Metrics {
		if m.Metric == metrics.MetricRecords && m.Dimensions["Status"] == "QUARANTINED" && m.Dimensions["Class"] == "exhausted" && m.Dimensions["Source"] == v.source {
			found = m.Value == 2 && !m.Timestamp.IsZero()
		}
	}
	if !found || len(h.Metrics) < 27 {
		t.Fatalf("health -o json metrics (%d): %s", len(h.Metrics), out)
	}

	if out, _, code = health("--source", "nobody"); code != 0 || !strings.HasPrefix(out, "no datapoints in the last 15m; the metrics function publishes every minute\n") {
		t.Fatalf("health --source nobody (exit %d):\n%s", code, out)
	}
	if _, errOut, code := health("--window", "10s"); code != 2 || !strings.Contains(errOut, "--window 10s") {
		t.Fatalf("health --window 10s (exit %d): %s", code, errOut)
	}
}

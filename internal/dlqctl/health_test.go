package dlqctl_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudformation"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatch"
	cwtypes "github.com/aws/aws-sdk-go-v2/service/cloudwatch/types"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/sts"

	"github.com/dlqquarantine/dlqq/internal/dlqctl"
	"github.com/dlqquarantine/dlqq/shared/dev/countstream"
	"github.com/dlqquarantine/dlqq/shared/dev/embedded"
	"github.com/dlqquarantine/dlqq/shared/dev/lambdatest"
	"github.com/dlqquarantine/dlqq/shared/usecase/metrics"
	"github.com/dlqquarantine/dlqq/shared/usecase/sweeper"
	"github.com/dlqquarantine/dlqq/shared/wire"
)

// dlqctl health reads what the real metrics service published to kumo's
// CloudWatch: the latest value of each series (not the window's maximum)
// of the sources the stack's redrive function configures (else, that
// function not found, of those named after the stack, saying so), a metric
// without a Source labelled account-wide, and the stack's alarms (only
// those: the template's, which the embedded stack created), with their
// state as stored and, the endpoint being a loopback address, a note that
// they are never evaluated.
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
			if _, skipped := v.st.Skipped[id]; skipped {
				continue // a metric-math alarm kumo cannot hold (embedded.Stack.Skipped)
			}
			alarms[aws.ToString(a.AlarmName)] = aws.ToString(a.MetricName)
			if len(a.Metrics) == 1 { // a Metrics Insights alarm by source: its query's metric
				if q, ok, err := embedded.ParseMetricsInsights(aws.ToString(a.Metrics[0].Expression)); err != nil || ok {
					alarms[aws.ToString(a.AlarmName)] = q.Metric
				}
			}
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
	if code != 0 || !strings.HasPrefix(out, "no datapoints in the last 15m; the metrics function publishes every minute\n"+
		"sources: those named "+stack+"-… (assumed from the stack name: the sources could not be read from function "+stack+"-redrive (ResourceNotFoundException") {
		t.Fatalf("health before any publication, no redrive function (exit %d):\n%s%s", code, out, errOut)
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
	// Its counters are the ledger's, caught up with the table's stream.
	drained := countstream.NewReader(v.st)
	svc.Counters, svc.Signatures = drained, drained
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
	// Parked as dlqctl park would have the redrive function park it.
	if r, err := v.store.Get(ctx, ids[0]); err != nil {
		t.Fatal(err)
	} else if parked, err := r.ParkManual("alice", "look", time.Now()); err != nil {
		t.Fatal(err)
	} else if err := v.store.Replace(ctx, r, parked); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Run(ctx); err != nil {
		t.Fatal(err)
	}

	// The stack's redrive function names its sources; one naming another
	// source leaves this one's metrics out. A metric without a Source
	// (the sweeper's) is every stack's: labelled so.
	fn := createConfiguredFunction(t, v.st, map[string]string{"SOURCES": v.sources})
	otherFn := createConfiguredFunction(t, v.st, map[string]string{"SOURCES": `{"elsewhere-source":{"dlq":"elsewhere-dlq"}}`})
	if _, err := cw.PutMetricData(ctx, &cloudwatch.PutMetricDataInput{Namespace: aws.String("DLQQuarantine"), MetricData: []cwtypes.MetricDatum{
		{MetricName: aws.String(sweeper.MetricArchived), Value: aws.Float64(4), Unit: cwtypes.StandardUnitCount}}}); err != nil {
		t.Fatal(err)
	}
	out, errOut, code = health("--function", otherFn)
	if code != 0 || !strings.Contains(out, "\nsources: elsewhere-source (the SOURCES of function "+otherFn+")\n") || strings.Contains(out, "Source="+v.source) {
		t.Fatalf("health --function %s (exit %d), want only elsewhere-source's metrics:\n%s%s", otherFn, code, out, errOut)
	}
	out, errOut, code = health("--function", fn)
	src := "Source=" + v.source
	for _, want := range []string{
		`(?m)^Records +` + regexp.QuoteMeta(src) + ` Status=QUARANTINED Class=exhausted +2 +Count +\S+Z$`,
		`(?m)^Records +` + regexp.QuoteMeta(src) + ` Status=PARKED Class=exhausted +1 +Count`,
		`(?m)^DLQDepth +` + regexp.QuoteMeta(src) + ` +0 +Count`,
		`(?m)^OldestQuarantinedAgeSeconds +` + regexp.QuoteMeta(src) + ` +\d+(\.\d\d)? +Seconds`,
		`(?m)^\(16 Records series at 0 not shown; -o json lists every series\)$`,
		`(?m)^ArchivedRecords +- \(account-wide: every stack\) +4 +Count`,
		`(?m)^sources: ` + regexp.QuoteMeta(v.source) + ` \(the SOURCES of function ` + fn + `\)$`,
		`(?m)^` + regexp.QuoteMeta(stack) + `\.dlq-depth +INSUFFICIENT_DATA`,
	} {
		if !regexp.MustCompile(want).MatchString(out) {
			t.Fatalf("health (exit %d) does not match %s:\n%s%s", code, want, out, errOut)
		}
	}
	if code != 0 || !strings.HasPrefix(out, "DLQQuarantine metrics: the latest datapoint of each in the last 15m") {
		t.Fatalf("health (exit %d):\n%s", code, out)
	}

	out, _, code = health("--function", fn, "-o", "json")
	var h struct {
		Metrics []struct {
			Metric      string            `json:"metric"`
			Dimensions  map[string]string `json:"dimensions"`
			Value       float64           `json:"value"`
			Timestamp   time.Time         `json:"timestamp"`
			AccountWide bool              `json:"account_wide"`
		} `json:"metrics"`
		Sources     []string `json:"sources"`
		SourcesFrom string   `json:"sources_from"`
		Alarms      []struct {
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
	found, archived := false, false
	for _, m := range h.Metrics {
		if m.Metric == metrics.MetricRecords && m.Dimensions["Status"] == "QUARANTINED" && m.Dimensions["Class"] == "exhausted" && m.Dimensions["Source"] == v.source {
			found = m.Value == 2 && !m.Timestamp.IsZero() && !m.AccountWide
		}
		if m.Metric == sweeper.MetricArchived {
			archived = m.AccountWide && len(m.Dimensions) == 0
		}
	}
	if !found || !archived || len(h.Metrics) < 28 || len(h.Sources) != 1 || h.Sources[0] != v.source || h.SourcesFrom != "the SOURCES of function "+fn {
		t.Fatalf("health -o json metrics (%d): %s", len(h.Metrics), out)
	}

	if out, _, code = health("--source", "nobody"); code != 0 || !strings.Contains(out, "\nsources: nobody (--source)\n") || strings.Contains(out, src) {
		t.Fatalf("health --source nobody (exit %d):\n%s", code, out)
	}
	if _, errOut, code := health("--window", "10s"); code != 2 || !strings.Contains(errOut, "--window 10s") {
		t.Fatalf("health --window 10s (exit %d): %s", code, errOut)
	}
}

// Against a CloudWatch endpoint that is not a loopback address, health
// says nothing of alarms not being evaluated: any endpoint is not an
// emulator. (The client reaches kumo through a transport that rewrites the
// host.)
func TestHealthNotesUnevaluatedAlarmsOnlyOnALoopbackEndpoint(t *testing.T) {
	v := newInventory(t)
	kumo, err := url.Parse(v.st.Endpoint)
	if err != nil || !strings.HasPrefix(kumo.Host, "127.") {
		t.Fatalf("the test needs kumo on a loopback address: %q %v", v.st.Endpoint, err)
	}
	cfg := v.st.AWS.Copy()
	cfg.BaseEndpoint = aws.String("http://monitoring.example.test:4566")
	cfg.HTTPClient = &http.Client{Transport: hostRewriter(kumo.Host)}
	clients := *v.st.Clients
	clients.CloudWatch = cloudwatch.NewFromConfig(cfg)
	a, out, errw := v.app("", time.Now)
	a.Connect = func(context.Context, string, string) (*dlqctl.Clients, error) {
		return &dlqctl.Clients{Clients: &clients, Lambda: lambda.NewFromConfig(v.st.AWS),
			CloudFormation: cloudformation.NewFromConfig(v.st.AWS), STS: sts.NewFromConfig(v.st.AWS), Local: true}, nil
	}
	code := a.Main(context.Background(), []string{"health", "--stack", v.st.Env.StackName, "-o", "json"})
	var h struct {
		Alarms          []json.RawMessage `json:"alarms"`
		AlarmsEvaluated *bool             `json:"alarms_evaluated"`
		Note            *string           `json:"note"`
	}
	if err := json.Unmarshal(out.Bytes(), &h); err != nil || code != 0 || len(h.Alarms) < 20 || h.AlarmsEvaluated == nil || !*h.AlarmsEvaluated || h.Note != nil {
		t.Fatalf("health -o json against %s (exit %d): %v\n%s%s", *cfg.BaseEndpoint, code, err, out, errw)
	}
	out.Reset()
	if code := a.Main(context.Background(), []string{"health", "--stack", v.st.Env.StackName}); code != 0 || strings.Contains(out.String(), "note:") || strings.Contains(out.String(), "never evaluated") {
		t.Fatalf("health against %s (exit %d):\n%s", *cfg.BaseEndpoint, code, out)
	}
}

// hostRewriter sends every request to host.
type hostRewriter string

func (h hostRewriter) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.URL.Host, r.Host = string(h), string(h)
	return http.DefaultTransport.RoundTrip(r)
}

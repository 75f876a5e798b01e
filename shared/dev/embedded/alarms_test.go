package embedded_test

import (
	"context"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatch"
	cwtypes "github.com/aws/aws-sdk-go-v2/service/cloudwatch/types"
	cfncw "github.com/awslabs/goformation/v7/cloudformation/cloudwatch"

	"github.com/dlqquarantine/dlqq/shared/dev/embedded"
	"github.com/dlqquarantine/dlqq/shared/dev/syncio"
)

// describe returns the alarms named prefix… as kumo holds them, by name.
func describe(t *testing.T, st *embedded.Stack, prefix string) map[string]cwtypes.MetricAlarm {
	t.Helper()
	out := map[string]cwtypes.MetricAlarm{}
	p := cloudwatch.NewDescribeAlarmsPaginator(st.Clients.CloudWatch, &cloudwatch.DescribeAlarmsInput{AlarmNamePrefix: aws.String(prefix)})
	for p.HasMorePages() {
		page, err := p.NextPage(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range page.MetricAlarms {
			out[aws.ToString(a.AlarmName)] = a
		}
	}
	return out
}

// expression is the expression of a's one query, "" for any other alarm.
func expression(a *cfncw.Alarm) string {
	if len(a.Metrics) != 1 {
		return ""
	}
	return aws.ToString(a.Metrics[0].Expression)
}

func dims(ds []cwtypes.Dimension) string {
	var parts []string
	for _, d := range ds {
		parts = append(parts, aws.ToString(d.Name)+"="+aws.ToString(d.Value))
	}
	return strings.Join(parts, " ")
}

// Start creates every alarm of infra/template.yaml whose condition holds,
// as the template says it (its parameters resolved), and a restart updates
// them in place. A metric-math alarm, which kumo cannot hold, is skipped
// with the reason in Skipped and in the stack's log, and the stack starts.
func TestStackCreatesTheTemplatesAlarms(t *testing.T) {
	t.Parallel()
	log := syncio.NewBuffer()
	st := embedded.ForTest(t, embedded.Options{NoS3: true, Log: log, Params: map[string]any{"DepthAlarmThreshold": 7}})
	stack := st.Env.StackName
	check := func(st *embedded.Stack, log *syncio.Buffer) map[string]cwtypes.MetricAlarm {
		t.Helper()
		got := describe(t, st, stack+".")
		want := map[string]bool{}
		skipped := 0
		for id, a := range st.Template.GetAllCloudWatchAlarmResources() {
			if c := a.AWSCloudFormationCondition; c != "" && st.Template.Conditions[c] != true {
				continue
			}
			name := aws.ToString(a.AlarmName)
			mi, isMI, err := embedded.ParseMetricsInsights(expression(a))
			if err != nil {
				t.Fatal(err)
			}
			if len(a.Metrics) > 0 && !st.External && !isMI {
				skipped++
				line := "embedded stack: " + id + " (" + name + ") not created: " + st.Skipped[id]
				if !strings.Contains(st.Skipped[id], "metric-math") || !strings.Contains(log.String(), line) {
					t.Errorf("metric-math alarm %s: skipped for %q; the log says\n%s", id, st.Skipped[id], log.String())
				}
				continue
			}
			want[name] = true
			g, ok := got[name]
			if !ok {
				t.Errorf("alarm %s (%s) not created", id, name)
				continue
			}
			if st.Names[id] != name {
				t.Errorf("Names[%s] = %q, want %q", id, st.Names[id], name)
			}
			var wantDims []string
			for _, d := range a.Dimensions {
				wantDims = append(wantDims, d.Name+"="+d.Value)
			}
			ns, metric, stat, period := aws.ToString(a.Namespace), aws.ToString(a.MetricName), aws.ToString(a.Statistic), aws.ToInt(a.Period)
			if isMI && !st.External {
				// A Metrics Insights alarm by source: stored on kumo as a
				// metric alarm of its query's metric, without dimensions.
				ns, metric, stat, period = mi.Namespace, mi.Metric, mi.Statistic, aws.ToInt(a.Metrics[0].Period)
			}
			if aws.ToString(g.Namespace) != ns || aws.ToString(g.MetricName) != metric ||
				aws.ToFloat64(g.Threshold) != aws.ToFloat64(a.Threshold) || string(g.Statistic) != stat ||
				aws.ToInt32(g.Period) != int32(period) || aws.ToInt32(g.EvaluationPeriods) != int32(a.EvaluationPeriods) ||
				string(g.ComparisonOperator) != a.ComparisonOperator || dims(g.Dimensions) != strings.Join(wantDims, " ") ||
				aws.ToString(g.AlarmDescription) != aws.ToString(a.AlarmDescription) || !aws.ToBool(g.ActionsEnabled) {
				t.Errorf("alarm %s is\n%+v\nthe template says\n%+v", name, g, a)
			}
		}
		if names := slices.Sorted(maps.Keys(got)); !slices.Equal(names, slices.Sorted(maps.Keys(want))) {
			t.Errorf("alarms %s…: %v, want %v", stack, names, slices.Sorted(maps.Keys(want)))
		}
		if len(st.Skipped) != skipped {
			t.Errorf("skipped %v; only the %d metric-math alarms may be", st.Skipped, skipped)
		}
		return got
	}

	got := check(st, log)
	if len(got) < 20 {
		t.Fatalf("only %d alarms", len(got))
	}
	depth := got[stack+".dlq-depth"]
	if aws.ToFloat64(depth.Threshold) != 7 || aws.ToString(depth.MetricName) != "DLQDepth" || dims(depth.Dimensions) != "" ||
		depth.StateValue != cwtypes.StateValueInsufficientData {
		t.Fatalf("dlq-depth alarm %+v", depth)
	}
	// The heartbeats are metric math (FILL: an empty period is a sample
	// count of 0), which kumo cannot hold: skipped, and tested by
	// simulation in shared/dev/template.
	for _, id := range []string{"MetricsHeartbeatAlarm", "SweeperHeartbeatAlarm"} {
		if _, ok := st.Skipped[id]; !ok {
			t.Fatalf("%s is not skipped: %v", id, st.Skipped)
		}
	}
	for _, name := range []string{stack + ".extra-dlq-visible-messages", stack + ".extra-dlq-oldest-message"} {
		if _, ok := got[name]; ok {
			t.Fatalf("%s created without an extra DLQ", name)
		}
	}

	// The same stack started again (as a persistent one is) with other
	// parameters: the alarms are updated, and the extra DLQ's appear.
	log = syncio.NewBuffer()
	again := embedded.ForTest(t, embedded.Options{NoS3: true, StackName: stack, Log: log,
		Params: map[string]any{"DepthAlarmThreshold": 9, "ExtraDLQArn": "arn:aws:sqs:us-east-1:000000000000:legacy-dlq"}})
	got = check(again, log)
	if d := got[stack+".dlq-depth"]; aws.ToFloat64(d.Threshold) != 9 {
		t.Fatalf("dlq-depth after restart: %+v", d)
	}
	if x := got[stack+".extra-dlq-visible-messages"]; dims(x.Dimensions) != "QueueName=legacy-dlq" || aws.ToFloat64(x.Threshold) != 9 {
		t.Fatalf("extra-dlq-visible-messages after restart: %+v", x)
	}
}

// On kumo an alarm without a name gets the template package's generated
// one, a metric-math or composite alarm is skipped with the reason, and an
// alarm whose condition is false is not created.
func TestStackSkipsAlarmsKumoCannotHold(t *testing.T) {
	t.Parallel()
	log := syncio.NewBuffer()
	st := embedded.ForTest(t, embedded.Options{NoS3: true, Log: log, Template: "testdata/alarms.yaml"})
	stack := st.Env.StackName
	unnamed := st.Names["UnnamedAlarm"]
	if !strings.HasPrefix(unnamed, stack+"-unnamedalarm-") {
		t.Fatalf("UnnamedAlarm named %q", unnamed)
	}
	got := describe(t, st, stack)
	if names := slices.Sorted(maps.Keys(got)); !slices.Equal(names, []string{unnamed}) {
		t.Fatalf("alarms %s…: %v", stack, names)
	}
	if u := got[unnamed]; aws.ToString(u.MetricName) != "Things" || aws.ToFloat64(u.Threshold) != 4 || u.Statistic != cwtypes.StatisticSum {
		t.Fatalf("unnamed alarm %+v", u)
	}
	if r := st.Skipped["MathAlarm"]; !strings.Contains(r, "metric-math") {
		t.Fatalf("MathAlarm skipped for %q", r)
	}
	if r := st.Skipped["BothAlarm"]; !strings.Contains(r, "PutCompositeAlarm") {
		t.Fatalf("BothAlarm skipped for %q", r)
	}
	if len(st.Skipped) != 2 {
		t.Fatalf("skipped %v", st.Skipped)
	}
	for _, line := range []string{
		"embedded stack: MathAlarm (" + stack + ".math) not created: kumo cannot store a metric-math alarm",
		"embedded stack: BothAlarm (" + stack + ".both) not created: kumo has no PutCompositeAlarm",
	} {
		if !strings.Contains(log.String(), line) {
			t.Errorf("the stack's log does not say %q:\n%s", line, log.String())
		}
	}
	// Its OK actions, like its alarm actions, are left off: no topic exists.
	if u := got[unnamed]; len(u.OKActions) != 0 || len(u.AlarmActions) != 0 {
		t.Errorf("unnamed alarm's actions %v, OK actions %v", u.AlarmActions, u.OKActions)
	}
	if _, ok := st.Names["ProdOnlyAlarm"]; ok {
		t.Fatal("ProdOnlyAlarm created although its condition is false")
	}
}

// Against AWS_ENDPOINT_URL nothing is skipped: an alarm the endpoint
// refuses fails Start with an error naming it. (kumo stands in for the
// external endpoint: it refuses the metric-math alarm.)
func TestExternalStackCreatesEveryAlarmOrNamesTheOneRefused(t *testing.T) {
	st := embedded.ForTest(t, embedded.Options{NoS3: true, Template: "testdata/alarms.yaml"})
	t.Setenv("AWS_ENDPOINT_URL", st.Endpoint)
	_, err := embedded.Start(context.Background(), embedded.Options{NoS3: true, Template: "testdata/alarms.yaml", Dir: t.TempDir(), StackName: st.Env.StackName + "x"})
	if err == nil || !strings.Contains(err.Error(), "create alarm MathAlarm ("+st.Env.StackName+"x.math)") {
		t.Fatalf("Start against an endpoint refusing a metric-math alarm: %v", err)
	}
	name := st.Env.StackName + "y"
	_, err = embedded.Start(context.Background(), embedded.Options{NoS3: true, Template: "testdata/composite.yaml", Dir: t.TempDir(), StackName: name})
	if err == nil || !strings.Contains(err.Error(), "create composite alarm AnyAlarm ("+name+".any)") {
		t.Fatalf("Start against an endpoint without PutCompositeAlarm: %v", err)
	}
	// The metric alarm before it was created, with the ARN the composite's
	// rule names.
	if a := describe(t, st, name+"."); len(a) != 1 || aws.ToString(a[name+".things"].AlarmArn) != "arn:aws:cloudwatch:us-east-1:000000000000:alarm:"+name+".things" {
		t.Fatalf("alarms %s.…: %+v", name, a)
	}
}

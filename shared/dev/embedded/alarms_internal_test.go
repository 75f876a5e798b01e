package embedded

import (
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	cwtypes "github.com/aws/aws-sdk-go-v2/service/cloudwatch/types"
	"github.com/awslabs/goformation/v7/cloudformation/cloudwatch"
	"github.com/awslabs/goformation/v7/cloudformation/tags"
)

// Every setting of an alarm reaches PutMetricAlarm, those kumo drops
// (datapoints to alarm, treat missing data, extended statistic, unit,
// metric math) included, so LocalStack and AWS get them; the actions stay
// off (no topic exists).
func TestMetricAlarmInputCarriesEverySetting(t *testing.T) {
	a := &cloudwatch.Alarm{
		AlarmName: aws.String("s.x"), AlarmDescription: aws.String("d"), ActionsEnabled: aws.Bool(false),
		Namespace: aws.String("N"), MetricName: aws.String("M"), Dimensions: []cloudwatch.Alarm_Dimension{{Name: "Source", Value: "s-source"}},
		ExtendedStatistic: aws.String("p99"), Period: aws.Int(300), EvaluationPeriods: 5, DatapointsToAlarm: aws.Int(3),
		Threshold: aws.Float64(2.5), ComparisonOperator: "LessThanThreshold", TreatMissingData: aws.String("breaching"),
		EvaluateLowSampleCountPercentile: aws.String("ignore"), Unit: aws.String("Seconds"), Tags: []tags.Tag{{Key: "k", Value: "v"}},
		AlarmActions: []string{"arn:aws:sns:us-east-1:000000000000:s-alarmtopic"}, OKActions: []string{"x"},
	}
	in, err := metricAlarmInput(a)
	if err != nil {
		t.Fatal(err)
	}
	if aws.ToString(in.AlarmName) != "s.x" || aws.ToString(in.AlarmDescription) != "d" || aws.ToBool(in.ActionsEnabled) || in.ActionsEnabled == nil ||
		aws.ToString(in.Namespace) != "N" || aws.ToString(in.MetricName) != "M" || len(in.Dimensions) != 1 ||
		aws.ToString(in.Dimensions[0].Name) != "Source" || aws.ToString(in.Dimensions[0].Value) != "s-source" ||
		in.Statistic != "" || aws.ToString(in.ExtendedStatistic) != "p99" || aws.ToInt32(in.Period) != 300 || aws.ToInt32(in.EvaluationPeriods) != 5 ||
		aws.ToInt32(in.DatapointsToAlarm) != 3 || aws.ToFloat64(in.Threshold) != 2.5 || in.ComparisonOperator != cwtypes.ComparisonOperatorLessThanThreshold ||
		aws.ToString(in.TreatMissingData) != "breaching" || aws.ToString(in.EvaluateLowSampleCountPercentile) != "ignore" ||
		in.Unit != cwtypes.StandardUnitSeconds || len(in.Tags) != 1 || aws.ToString(in.Tags[0].Key) != "k" ||
		in.AlarmActions != nil || in.OKActions != nil || in.InsufficientDataActions != nil {
		t.Fatalf("PutMetricAlarm %+v", in)
	}

	math := &cloudwatch.Alarm{AlarmName: aws.String("s.m"), EvaluationPeriods: 1, Threshold: aws.Float64(50), ComparisonOperator: "GreaterThanThreshold",
		Metrics: []cloudwatch.Alarm_MetricDataQuery{
			{Id: "share", Expression: aws.String("100*b/t"), ReturnData: aws.Bool(true)},
			{Id: "b", ReturnData: aws.Bool(false), MetricStat: &cloudwatch.Alarm_MetricStat{Period: 60, Stat: "Sum", Unit: aws.String("Count"),
				Metric: &cloudwatch.Alarm_Metric{Namespace: aws.String("N"), MetricName: aws.String("Bad"), Dimensions: []cloudwatch.Alarm_Dimension{{Name: "A", Value: "1"}}}}},
		}}
	in, err = metricAlarmInput(math)
	if err != nil {
		t.Fatal(err)
	}
	if len(in.Metrics) != 2 || aws.ToString(in.Metrics[0].Id) != "share" || aws.ToString(in.Metrics[0].Expression) != "100*b/t" || !aws.ToBool(in.Metrics[0].ReturnData) ||
		in.Metrics[1].MetricStat == nil || aws.ToString(in.Metrics[1].MetricStat.Stat) != "Sum" || aws.ToInt32(in.Metrics[1].MetricStat.Period) != 60 ||
		in.Metrics[1].MetricStat.Unit != cwtypes.StandardUnitCount || aws.ToString(in.Metrics[1].MetricStat.Metric.MetricName) != "Bad" ||
		aws.ToString(in.Metrics[1].MetricStat.Metric.Dimensions[0].Value) != "1" || in.MetricName != nil || in.Namespace != nil {
		t.Fatalf("metric-math PutMetricAlarm %+v", in)
	}

	for name, bad := range map[string]*cloudwatch.Alarm{
		"unresolved reference unresolved:Nope.QueueName": {AlarmName: aws.String("s.u"), Dimensions: []cloudwatch.Alarm_Dimension{{Name: "QueueName", Value: "unresolved:Nope.QueueName"}}},
		"no AlarmName": {MetricName: aws.String("M")},
	} {
		if _, err := metricAlarmInput(bad); err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("metricAlarmInput(%s): %v", name, err)
		}
	}
}

func TestCompositeAlarmInput(t *testing.T) {
	in, err := compositeAlarmInput(&cloudwatch.CompositeAlarm{AlarmName: aws.String("s.c"), AlarmRule: "ALARM(s.x)", AlarmDescription: aws.String("d"),
		ActionsEnabled: aws.Bool(true), AlarmActions: []string{"arn"}})
	if err != nil || aws.ToString(in.AlarmName) != "s.c" || aws.ToString(in.AlarmRule) != "ALARM(s.x)" || aws.ToString(in.AlarmDescription) != "d" ||
		!aws.ToBool(in.ActionsEnabled) || in.AlarmActions != nil {
		t.Fatalf("PutCompositeAlarm %+v, %v", in, err)
	}
	if _, err := compositeAlarmInput(&cloudwatch.CompositeAlarm{AlarmName: aws.String("s.c")}); err == nil || !strings.Contains(err.Error(), "AlarmRule") {
		t.Fatalf("no rule: %v", err)
	}
}

// A composite alarm is created after the composite alarms its rule names.
func TestCompositeOrder(t *testing.T) {
	all := map[string]*cloudwatch.CompositeAlarm{
		"Top": {AlarmName: aws.String("s.top"), AlarmRule: "ALARM(s.mid) OR ALARM(s.x)"},
		"Mid": {AlarmName: aws.String("s.mid"), AlarmRule: "ALARM(arn:aws:cloudwatch:r:a:alarm:s.low)"},
		"Low": {AlarmName: aws.String("s.low"), AlarmRule: "ALARM(s.x)"},
	}
	got, err := compositeOrder(all, []string{"Low", "Mid", "Top"}) // sorted, as createAlarms passes them
	if err != nil || !slices.Equal(got, []string{"Low", "Mid", "Top"}) {
		t.Fatalf("order %v, %v", got, err)
	}
	got, err = compositeOrder(all, []string{"Top", "Mid", "Low"})
	if err != nil || !slices.Equal(got, []string{"Low", "Mid", "Top"}) {
		t.Fatalf("order %v, %v", got, err)
	}
	all["Low"].AlarmRule = "ALARM(s.top)"
	if _, err := compositeOrder(all, []string{"Low", "Mid", "Top"}); err == nil || !strings.Contains(err.Error(), "name each other") {
		t.Fatalf("cycle: %v", err)
	}
}

package embedded

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	cwsdk "github.com/aws/aws-sdk-go-v2/service/cloudwatch"
	cwtypes "github.com/aws/aws-sdk-go-v2/service/cloudwatch/types"
	"github.com/awslabs/goformation/v7/cloudformation/cloudwatch"
	"github.com/awslabs/goformation/v7/cloudformation/tags"
)

// Why kumo gets some alarms of the template not at all (Stack.Skipped).
const (
	skipMetricMath = "kumo cannot store a metric-math alarm (its PutMetricAlarm requires MetricName and Namespace and drops Metrics)"
	skipComposite  = "kumo has no PutCompositeAlarm"
)

// createAlarms creates the template's CloudWatch alarms whose condition
// holds: metric alarms first, then composite alarms (which name them).
// PutMetricAlarm and PutCompositeAlarm are upserts, so a persistent
// stack's alarms get the template's settings, as a stack update would give
// them. Against kumo a metric-math or composite alarm is skipped, with the
// reason in s.Skipped and a line in the stack's log (Options.Log), never
// a failed start; against AWS_ENDPOINT_URL it is created (the template's
// metric-math alarms are tested by simulation in shared/dev/template).
//
// The actions (AlarmActions, OKActions, InsufficientDataActions) are left
// off: the embedded stack creates no SNS topic to notify, kumo never
// evaluates an alarm, and an endpoint that checks actions would refuse a
// topic that does not exist.
func (s *Stack) createAlarms(ctx context.Context) error {
	alarms := s.Template.GetAllCloudWatchAlarmResources()
	for _, id := range sortedKeys(alarms) {
		a := alarms[id]
		name := aws.ToString(a.AlarmName)
		if ok, err := s.conditionHolds(a.AWSCloudFormationCondition); err != nil {
			return fmt.Errorf("alarm %s (%s): %w", id, name, err)
		} else if !ok {
			continue
		}
		in, err := metricAlarmInput(a)
		if err != nil {
			return fmt.Errorf("alarm %s (%s): %w", id, name, err)
		}
		if len(a.Metrics) > 0 && !s.External {
			// A Metrics Insights alarm grouped by a dimension (one per
			// source) is stored as a metric alarm of its query's metric
			// and statistic without dimensions, so that it is listed
			// (dlqctl health) under its name; kumo evaluates neither.
			// Any other metric-math alarm is skipped.
			q, ok, err := singleMetricsInsights(a)
			if err != nil {
				return fmt.Errorf("alarm %s (%s): %w", id, name, err)
			}
			if !ok {
				s.skip(id, name, skipMetricMath)
				continue
			}
			in.Metrics, in.Namespace, in.MetricName = nil, aws.String(q.Namespace), aws.String(q.Metric)
			in.Statistic, in.Period = cwtypes.Statistic(q.Statistic), int32Ptr(a.Metrics[0].Period)
		}
		if _, err := s.Clients.CloudWatch.PutMetricAlarm(ctx, in); err != nil {
			return fmt.Errorf("create alarm %s (%s): %w", id, name, err)
		}
		s.Names[id] = name
	}
	composites := s.Template.GetAllCloudWatchCompositeAlarmResources()
	var ids []string
	for _, id := range sortedKeys(composites) {
		c := composites[id]
		if ok, err := s.conditionHolds(c.AWSCloudFormationCondition); err != nil {
			return fmt.Errorf("composite alarm %s (%s): %w", id, aws.ToString(c.AlarmName), err)
		} else if !ok {
			continue
		}
		if !s.External {
			s.skip(id, aws.ToString(c.AlarmName), skipComposite)
			continue
		}
		ids = append(ids, id)
	}
	order, err := compositeOrder(composites, ids)
	if err != nil {
		return err
	}
	for _, id := range order {
		c := composites[id]
		name := aws.ToString(c.AlarmName)
		in, err := compositeAlarmInput(c)
		if err != nil {
			return fmt.Errorf("composite alarm %s (%s): %w", id, name, err)
		}
		if _, err := s.Clients.CloudWatch.PutCompositeAlarm(ctx, in); err != nil {
			return fmt.Errorf("create composite alarm %s (%s): %w", id, name, err)
		}
		s.Names[id] = name
	}
	return nil
}

// skip records that the resource id (named name) was not created, and
// why, in s.Skipped and the stack's log.
func (s *Stack) skip(id, name, why string) {
	s.Skipped[id] = why
	if s.log != nil {
		fmt.Fprintf(s.log, "embedded stack: %s (%s) not created: %s\n", id, name, why)
	}
}

// conditionHolds evaluates a resource's Condition ("" holds); goformation
// resolved the template's conditions to booleans.
func (s *Stack) conditionHolds(name string) (bool, error) {
	if name == "" {
		return true, nil
	}
	v, ok := s.Template.Conditions[name].(bool)
	if !ok {
		return false, fmt.Errorf("condition %s did not resolve to true or false (%v)", name, s.Template.Conditions[name])
	}
	return v, nil
}

// metricAlarmInput is a's PutMetricAlarm, without its actions (alarm, OK
// and insufficient-data).
func metricAlarmInput(a *cloudwatch.Alarm) (*cwsdk.PutMetricAlarmInput, error) {
	if err := resolved(a); err != nil {
		return nil, err
	}
	if aws.ToString(a.AlarmName) == "" {
		return nil, fmt.Errorf("no AlarmName")
	}
	in := &cwsdk.PutMetricAlarmInput{
		AlarmName:                        a.AlarmName,
		AlarmDescription:                 a.AlarmDescription,
		ActionsEnabled:                   a.ActionsEnabled,
		Namespace:                        a.Namespace,
		MetricName:                       a.MetricName,
		Dimensions:                       dimensions(a.Dimensions),
		Statistic:                        cwtypes.Statistic(aws.ToString(a.Statistic)),
		ExtendedStatistic:                a.ExtendedStatistic,
		Period:                           int32Ptr(a.Period),
		EvaluationPeriods:                aws.Int32(int32(a.EvaluationPeriods)),
		DatapointsToAlarm:                int32Ptr(a.DatapointsToAlarm),
		Threshold:                        a.Threshold,
		ThresholdMetricId:                a.ThresholdMetricId,
		ComparisonOperator:               cwtypes.ComparisonOperator(a.ComparisonOperator),
		TreatMissingData:                 a.TreatMissingData,
		EvaluateLowSampleCountPercentile: a.EvaluateLowSampleCountPercentile,
		Unit:                             cwtypes.StandardUnit(aws.ToString(a.Unit)),
		Tags:                             cwTags(a.Tags),
	}
	for _, q := range a.Metrics {
		mq := cwtypes.MetricDataQuery{Id: aws.String(q.Id), AccountId: q.AccountId, Expression: q.Expression, Label: q.Label,
			Period: int32Ptr(q.Period), ReturnData: q.ReturnData}
		if ms := q.MetricStat; ms != nil {
			mq.MetricStat = &cwtypes.MetricStat{Period: aws.Int32(int32(ms.Period)), Stat: aws.String(ms.Stat), Unit: cwtypes.StandardUnit(aws.ToString(ms.Unit))}
			if ms.Metric != nil {
				mq.MetricStat.Metric = &cwtypes.Metric{Namespace: ms.Metric.Namespace, MetricName: ms.Metric.MetricName, Dimensions: dimensions(ms.Metric.Dimensions)}
			}
		}
		in.Metrics = append(in.Metrics, mq)
	}
	return in, nil
}

// MetricsInsightsQuery is a CloudWatch Metrics Insights query of the one
// form the template's alarms and dashboard use: SELECT F(Metric) FROM
// SCHEMA(Namespace, Dimension) GROUP BY Dimension, F one of MAX, MIN, SUM,
// AVG and COUNT (Statistic: Maximum, Minimum, Sum, Average, SampleCount).
// SCHEMA(Namespace, Dimension) matches the metrics whose dimensions are
// exactly Dimension; each value of it is one time series (a contributor
// of an alarm).
type MetricsInsightsQuery struct {
	Statistic, Metric, Namespace, Dimension string
}

var metricsInsightsRE = regexp.MustCompile(`^SELECT (MAX|MIN|SUM|AVG|COUNT)\((\w+)\) FROM SCHEMA\((\w+), ?(\w+)\) GROUP BY (\w+)$`)

// ParseMetricsInsights parses expr as a MetricsInsightsQuery: false for an
// expression that is no Metrics Insights query (metric math), an error for
// one of another form.
func ParseMetricsInsights(expr string) (MetricsInsightsQuery, bool, error) {
	if !strings.HasPrefix(expr, "SELECT ") {
		return MetricsInsightsQuery{}, false, nil
	}
	m := metricsInsightsRE.FindStringSubmatch(expr)
	if m == nil || m[4] != m[5] {
		return MetricsInsightsQuery{}, false, fmt.Errorf("query %q is not a Metrics Insights query of the form SELECT F(Metric) FROM SCHEMA(Namespace, Dimension) GROUP BY Dimension", expr)
	}
	stat := map[string]string{"MAX": "Maximum", "MIN": "Minimum", "SUM": "Sum", "AVG": "Average", "COUNT": "SampleCount"}[m[1]]
	return MetricsInsightsQuery{Statistic: stat, Metric: m[2], Namespace: m[3], Dimension: m[4]}, true, nil
}

// singleMetricsInsights is the alarm's Metrics Insights query when its
// one query is one.
func singleMetricsInsights(a *cloudwatch.Alarm) (MetricsInsightsQuery, bool, error) {
	if len(a.Metrics) != 1 {
		return MetricsInsightsQuery{}, false, nil
	}
	return ParseMetricsInsights(aws.ToString(a.Metrics[0].Expression))
}

// compositeAlarmInput is c's PutCompositeAlarm, without its actions.
func compositeAlarmInput(c *cloudwatch.CompositeAlarm) (*cwsdk.PutCompositeAlarmInput, error) {
	if err := resolved(c); err != nil {
		return nil, err
	}
	if aws.ToString(c.AlarmName) == "" || c.AlarmRule == "" {
		return nil, fmt.Errorf("AlarmName and AlarmRule are required")
	}
	return &cwsdk.PutCompositeAlarmInput{
		AlarmName: c.AlarmName, AlarmRule: aws.String(c.AlarmRule), AlarmDescription: c.AlarmDescription,
		ActionsEnabled: c.ActionsEnabled, Tags: cwTags(c.Tags),
	}, nil
}

// compositeOrder orders the composite alarms ids so that one whose rule
// names another comes after it.
func compositeOrder(all map[string]*cloudwatch.CompositeAlarm, ids []string) ([]string, error) {
	var out []string
	pending := slices.Clone(ids)
	for len(pending) > 0 {
		var next []string
		for _, id := range pending {
			waits := false
			for _, other := range pending {
				if other != id && strings.Contains(all[id].AlarmRule, aws.ToString(all[other].AlarmName)) {
					waits = true
				}
			}
			if waits {
				next = append(next, id)
			} else {
				out = append(out, id)
			}
		}
		if len(next) == len(pending) {
			return nil, fmt.Errorf("composite alarms %s name each other in their rules", strings.Join(pending, ", "))
		}
		pending = next
	}
	return out, nil
}

// resolved says which reference in v did not resolve.
func resolved(v any) error {
	raw, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if i := strings.Index(string(raw), `"unresolved:`); i >= 0 {
		end := strings.IndexByte(string(raw[i+1:]), '"')
		return fmt.Errorf("unresolved reference %s", raw[i+1:i+1+max(end, 0)])
	}
	return nil
}

func dimensions(ds []cloudwatch.Alarm_Dimension) []cwtypes.Dimension {
	var out []cwtypes.Dimension
	for _, d := range ds {
		out = append(out, cwtypes.Dimension{Name: aws.String(d.Name), Value: aws.String(d.Value)})
	}
	return out
}

func cwTags(ts []tags.Tag) []cwtypes.Tag {
	var out []cwtypes.Tag
	for _, t := range ts {
		out = append(out, cwtypes.Tag{Key: aws.String(t.Key), Value: aws.String(t.Value)})
	}
	return out
}

func int32Ptr(v *int) *int32 {
	if v == nil {
		return nil
	}
	return aws.Int32(int32(*v))
}

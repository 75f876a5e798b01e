package template_test

import (
	"slices"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	cloudformationcw "github.com/awslabs/goformation/v7/cloudformation/cloudwatch"

	"github.com/dlqquarantine/dlqq/shared/usecase/metrics"
)

// IntegrityHoldAlarm and NewPoisonAlarm notify for each new hold and each
// new poison, on every MetricsSchedule the template allows, also for one
// the ledger counts late: the metrics function publishes, at each run, how
// many it counts beyond its marks (shared/usecase/metrics: newMarks), so a
// hold is one datapoint above 0 at the first run that reads it counted and
// 0 at the runs after, and the alarm (one period of a minute, missing data
// not breaching) returns to OK before the next. Simulated with the alarm
// model (cwsim_test.go) on the template's own alarms: holds set at minutes
// 10 and 40, and one at 70 that the ledger counts 17 minutes late, each
// notify once; a source without holds never fires.
func TestEachNewHoldAndPoisonNotifies(t *testing.T) {
	tpl := open(t)
	for id, metric := range map[string]string{"IntegrityHoldAlarm": metrics.MetricNewIntegrityHolds, "NewPoisonAlarm": metrics.MetricNewPoison} {
		a := lookup(t, tpl.GetCloudWatchAlarmWithName, id)
		q, ok := parseMI(t, aws.ToString(a.Metrics[0].Expression))
		if !ok || q.metric != metric || q.dim != metrics.DimSource {
			t.Fatalf("%s: %q is not a query of %s by %s", id, aws.ToString(a.Metrics[0].Expression), metric, metrics.DimSource)
		}
		for _, every := range []int{1, 2, 5} { // MetricsSchedule: rate(1, 2 or 5 minutes)
			counted := []int{10, 40, 70 + 17} // when the ledger has counted each
			w := world{}
			key := func(src string) string {
				return metricKey(q.ns, q.metric, []cloudformationcw.Alarm_Dimension{{Name: q.dim, Value: src}})
			}
			w[key("orders")] = func(m int) (float64, bool) {
				if m%every != 0 {
					return 0, false // no run this minute
				}
				n := 0 // counted since the run before, published now
				for _, c := range counted {
					if c <= m && c > m-every {
						n++
					}
				}
				return float64(n), true
			}
			w[key("payments.fifo")] = func(m int) (float64, bool) { return 0, m%every == 0 }
			res := simulateContributors(t, a, q, aws.ToInt(a.Metrics[0].Period), w, 120, readings{})
			fired := entered(res.changes, "ALARM")
			if len(fired) != len(counted) {
				t.Errorf("%s, a run every %d minutes: notified at %v for %d events counted at %v (changes %v)", id, every, fired, len(counted), counted, res.changes)
				continue
			}
			for i, m := range fired {
				if m < counted[i] || m > counted[i]+every+1 {
					t.Errorf("%s, a run every %d minutes: event %d counted at minute %d notified at %d", id, every, i, counted[i], m)
				}
			}
			if got := res.inAlarm(fired[0]); !slices.Equal(got, []string{"orders"}) {
				t.Errorf("%s names %v, want orders", id, got)
			}
		}
	}
}

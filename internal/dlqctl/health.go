package dlqctl

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatch"
	cwtypes "github.com/aws/aws-sdk-go-v2/service/cloudwatch/types"
	"github.com/spf13/cobra"

	"github.com/dlqquarantine/dlqq/shared/runtime/emf"
	"github.com/dlqquarantine/dlqq/shared/usecase/metrics"
)

// HealthOptions are the flags of dlqctl health.
type HealthOptions struct {
	// Window is how far back a metric's latest datapoint is looked for.
	Window time.Duration
	// Stack names the stack: its alarms are those named "<stack>.…", and
	// without Source its metrics those of the sources its redrive function
	// configures (else, that unavailable, those named "<stack>-…").
	Stack string
	// Source restricts the metrics to one source queue.
	Source string
	// Function is the redrive function whose SOURCES name the stack's
	// sources; empty: "<stack>-redrive", the template's name for it.
	Function  string
	Namespace string
}

// HealthMetric is one metric's latest datapoint in the window.
type HealthMetric struct {
	Metric     string            `json:"metric"`
	Dimensions map[string]string `json:"dimensions"`
	Value      float64           `json:"value"`
	Unit       string            `json:"unit,omitempty"`
	Timestamp  time.Time         `json:"timestamp"`
	// AccountWide is true for a metric without a Source dimension (the
	// sweeper's): nothing says which stack published it, so it is every
	// stack's of the account and region.
	AccountWide bool `json:"account_wide,omitempty"`
	// dims keeps the dimensions in the order published, for the table.
	dims []cwtypes.Dimension
}

// HealthAlarm is one of the stack's alarms, as CloudWatch returns it.
type HealthAlarm struct {
	Name        string    `json:"name"`
	State       string    `json:"state"`
	Reason      string    `json:"reason,omitempty"`
	Updated     time.Time `json:"updated"`
	Metric      string    `json:"metric,omitempty"`
	Description string    `json:"description,omitempty"`
}

// Health is what dlqctl health prints.
type Health struct {
	Namespace string    `json:"namespace"`
	Window    string    `json:"window"`
	From      time.Time `json:"from"`
	To        time.Time `json:"to"`
	// Sources are the stack's sources whose metrics are listed, and
	// SourcesFrom where they come from; SourcePrefix, when the sources
	// could not be read, is the name prefix taken instead.
	Sources      []string       `json:"sources,omitempty"`
	SourcePrefix string         `json:"source_prefix,omitempty"`
	SourcesFrom  string         `json:"sources_from"`
	Metrics      []HealthMetric `json:"metrics"`
	AlarmPrefix  string         `json:"alarm_prefix"`
	Alarms       []HealthAlarm  `json:"alarms"`
	// AlarmsEvaluated is false against a CloudWatch endpoint on a
	// loopback address (a local emulator): kumo stores alarms but never
	// evaluates them.
	AlarmsEvaluated bool   `json:"alarms_evaluated"`
	Note            string `json:"note,omitempty"`
}

// notEvaluated is what health says of alarms against a loopback endpoint.
const notEvaluated = "locally (kumo) alarms are stored but never evaluated: each state is as created or last set, not a judgement of the metrics"

func (a *App) healthCmd() *cobra.Command {
	var o HealthOptions
	c := command("health", "Show the latest DLQ health metrics and the stack's alarm states (CloudWatch; no AWS CLI needed)", nil)
	c.RunE = func(cmd *cobra.Command, _ []string) error {
		if cmd.Flags().Changed("function") || os.Getenv("DLQQ_REDRIVE_FUNCTION") != "" {
			o.Function = a.Function
		}
		o.Stack = cmp.Or(a.Stack, "dlqq") // the global --stack
		return a.Health(cmd.Context(), o)
	}
	f := c.Flags()
	f.DurationVar(&o.Window, "window", 15*time.Minute, "how far back to look for each metric's latest datapoint")
	f.StringVar(&o.Source, "source", "", "only this source queue's metrics (default: the stack's sources)")
	f.StringVar(&o.Namespace, "namespace", emf.Namespace, "CloudWatch namespace the functions publish to")
	return c
}

// Health runs dlqctl health: every metric of the namespace that belongs
// to the stack (ListMetrics), each one's latest datapoint in the window
// (GetMetricStatistics), and the stack's alarms (DescribeAlarms).
func (a *App) Health(ctx context.Context, o HealthOptions) error {
	if err := a.checkOutput(); err != nil {
		return err
	}
	if o.Window < time.Minute {
		return &UsageError{fmt.Errorf("--window %s: at least 1m (the metrics function publishes every minute)", o.Window)}
	}
	if strings.TrimSpace(o.Stack) == "" {
		return &UsageError{fmt.Errorf("--stack is empty: name the stack (DLQQ_STACK)")}
	}
	if o.Function == "" && a.Stack != "" {
		var unreadable *stackUnreadable
		switch _, err := a.connect(ctx); {
		case errors.As(err, &unreadable):
			// As before --stack read the stack: its name names the
			// alarms and the redrive function.
			a.stackErr = nil
			fmt.Fprintf(a.Err, "dlqctl: warning: %v; health takes %s as the stack's name (alarms %s.…, function %s-redrive)\n", err, a.stackName(), a.stackName(), a.stackName())
		case err != nil:
			return err
		default:
			o.Function = a.Function // the stack's RedriveFunctionName
		}
	}
	if a.Stack != "" && o.Stack == a.Stack {
		o.Stack = a.stackName() // --stack may be the stack's ARN: its alarms are named after its name
	}
	if err := a.checkSource(ctx, cmp.Or(o.Function, o.Stack+"-redrive"), o.Source, false, a.hasMetrics(ctx, o.Namespace, o.Source)); err != nil {
		return err
	}
	c, err := a.connect(ctx)
	if err != nil {
		return err
	}
	to := a.Now().UTC().Truncate(time.Second)
	local := loopbackEndpoint(aws.ToString(c.CloudWatch.Options().BaseEndpoint))
	h := Health{Namespace: o.Namespace, Window: shortDuration(o.Window), From: to.Add(-o.Window), To: to,
		AlarmPrefix: o.Stack + ".", AlarmsEvaluated: !local, Metrics: []HealthMetric{}, Alarms: []HealthAlarm{}}
	if local {
		h.Note = notEvaluated
	}
	a.healthSources(ctx, o, &h)
	list, err := stackMetrics(ctx, c.CloudWatch, o.Namespace, h.Sources, h.SourcePrefix)
	if err != nil {
		return err
	}
	if h.Metrics, err = latestAll(ctx, c.CloudWatch, o.Namespace, list, h.From, h.To); err != nil {
		return err
	}
	if h.Alarms, err = stackAlarms(ctx, c.CloudWatch, h.AlarmPrefix); err != nil {
		return err
	}
	if a.Output == "json" {
		return a.writeJSON(h)
	}
	return a.healthText(h)
}

// hasMetrics is checkSource's present for health: whether any metric of
// the namespace names source.
func (a *App) hasMetrics(ctx context.Context, ns, source string) func() (bool, error) {
	return func() (bool, error) {
		c, err := a.connect(ctx)
		if err != nil {
			return false, err
		}
		list, err := stackMetrics(ctx, c.CloudWatch, ns, []string{source}, "")
		for _, m := range list {
			if _, ok := dimension(m.Dimensions, metrics.DimSource); ok {
				return true, err
			}
		}
		return false, err
	}
}

// healthSources sets h's sources: o.Source; else those the SOURCES of the
// stack's redrive function configure; else, those unavailable, the name
// prefix "<stack>-" (the template's names), saying why.
func (a *App) healthSources(ctx context.Context, o HealthOptions, h *Health) {
	if o.Source != "" {
		h.Sources, h.SourcesFrom = []string{o.Source}, "--source"
		return
	}
	fn := cmp.Or(o.Function, o.Stack+"-redrive")
	cfg, note, err := a.functionSources(ctx, fn)
	if err == nil && len(cfg) == 0 {
		err = fmt.Errorf("the SOURCES of function %s name no source", fn)
	}
	if err == nil {
		h.Sources, h.SourcesFrom = slices.Sorted(maps.Keys(cfg)), "the SOURCES of function "+fn
		if note != "" {
			h.SourcesFrom += " (" + note + ": --source Q for one of its sources)"
		}
		return
	}
	h.SourcePrefix = o.Stack + "-"
	h.SourcesFrom = "assumed from the stack name: " + err.Error()
}

// loopbackEndpoint reports whether endpoint (a URL; empty for AWS's own)
// is on this machine: 127.0.0.0/8, ::1 or localhost.
func loopbackEndpoint(endpoint string) bool {
	u, err := url.Parse(endpoint)
	if err != nil || endpoint == "" {
		return false
	}
	host := u.Hostname()
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// stackMetrics lists the namespace's metrics that belong to the stack:
// those whose Source is one of names (or, names empty, starts with
// prefix), and those without a Source dimension (the sweeper's: nothing
// says which stack published them).
func stackMetrics(ctx context.Context, cw *cloudwatch.Client, ns string, names []string, prefix string) ([]cwtypes.Metric, error) {
	var out []cwtypes.Metric
	p := cloudwatch.NewListMetricsPaginator(cw, &cloudwatch.ListMetricsInput{Namespace: aws.String(ns)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("list CloudWatch metrics: %w", err)
		}
		for _, m := range page.Metrics {
			source, ok := dimension(m.Dimensions, metrics.DimSource)
			switch {
			case !ok:
			case len(names) > 0 && !slices.Contains(names, source):
				continue
			case len(names) == 0 && !strings.HasPrefix(source, prefix):
				continue
			}
			out = append(out, m)
		}
	}
	return out, nil
}

func dimension(dims []cwtypes.Dimension, name string) (string, bool) {
	for _, d := range dims {
		if aws.ToString(d.Name) == name {
			return aws.ToString(d.Value), true
		}
	}
	return "", false
}

// latestAll finds each metric's latest datapoint in [from, to], a few
// metrics at a time; metrics without one are left out. The result is
// sorted by metric, then dimensions.
func latestAll(ctx context.Context, cw *cloudwatch.Client, ns string, list []cwtypes.Metric, from, to time.Time) ([]HealthMetric, error) {
	out := make([]*HealthMetric, len(list))
	errs := make([]error, len(list))
	sem := make(chan struct{}, 8)
	var wg sync.WaitGroup
	for i, m := range list {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			out[i], errs[i] = latest(ctx, cw, ns, m, from, to)
		}()
	}
	wg.Wait()
	res := []HealthMetric{}
	for i, m := range out {
		if errs[i] != nil {
			return nil, fmt.Errorf("read metric %s: %w", aws.ToString(list[i].MetricName), errs[i])
		}
		if m != nil {
			res = append(res, *m)
		}
	}
	slices.SortFunc(res, func(x, y HealthMetric) int {
		return cmp.Or(cmp.Compare(x.Metric, y.Metric), cmp.Compare(dimsText(x.dims), dimsText(y.dims)))
	})
	return res, nil
}

// latest returns m's newest datapoint in [from, to] (nil if none), its
// value the maximum of that datapoint. CloudWatch answers a datapoint per
// period; kumo answers one for the whole window, stamped with its first
// point. A datapoint of several samples is narrowed by halving the start
// until it holds the newest second's samples only: on AWS that ends at
// the newest period, on kumo at the newest point.
func latest(ctx context.Context, cw *cloudwatch.Client, ns string, m cwtypes.Metric, from, to time.Time) (*HealthMetric, error) {
	period := int32(max(60, (int(to.Sub(from).Seconds())/1440+59)/60*60)) // at most 1440 datapoints a call
	query := func(start time.Time) (*cwtypes.Datapoint, error) {
		out, err := cw.GetMetricStatistics(ctx, &cloudwatch.GetMetricStatisticsInput{
			Namespace: aws.String(ns), MetricName: m.MetricName, Dimensions: m.Dimensions,
			StartTime: aws.Time(start), EndTime: aws.Time(to), Period: aws.Int32(period),
			Statistics: []cwtypes.Statistic{cwtypes.StatisticMaximum, cwtypes.StatisticSampleCount},
		})
		if err != nil {
			return nil, err
		}
		var newest *cwtypes.Datapoint
		for i := range out.Datapoints {
			d := &out.Datapoints[i]
			if d.Timestamp != nil && d.Maximum != nil && (newest == nil || d.Timestamp.After(*newest.Timestamp)) {
				newest = d
			}
		}
		return newest, nil
	}
	best, err := query(from)
	if err != nil || best == nil {
		return nil, err
	}
	if aws.ToFloat64(best.SampleCount) > 1 {
		// [lo, to] holds the newest point, [hi, to] none: to is inclusive.
		lo, hi := best.Timestamp.UTC().Truncate(time.Second), to.Add(time.Second)
		for hi.Sub(lo) > time.Second {
			mid := lo.Add(hi.Sub(lo) / 2).Truncate(time.Second)
			if !mid.After(lo) {
				break
			}
			d, err := query(mid)
			if err != nil {
				return nil, err
			}
			if d != nil {
				lo, best = mid, d
			} else {
				hi = mid
			}
		}
	}
	dims := map[string]string{}
	for _, d := range m.Dimensions {
		dims[aws.ToString(d.Name)] = aws.ToString(d.Value)
	}
	_, hasSource := dimension(m.Dimensions, metrics.DimSource)
	return &HealthMetric{Metric: aws.ToString(m.MetricName), Dimensions: dims, Value: aws.ToFloat64(best.Maximum),
		Unit: string(best.Unit), Timestamp: best.Timestamp.UTC(), AccountWide: !hasSource, dims: m.Dimensions}, nil
}

// stackAlarms reads the alarms whose names start with prefix.
func stackAlarms(ctx context.Context, cw *cloudwatch.Client, prefix string) ([]HealthAlarm, error) {
	out := []HealthAlarm{}
	p := cloudwatch.NewDescribeAlarmsPaginator(cw, &cloudwatch.DescribeAlarmsInput{AlarmNamePrefix: aws.String(prefix)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("describe CloudWatch alarms: %w", err)
		}
		for _, al := range page.MetricAlarms {
			out = append(out, HealthAlarm{Name: aws.ToString(al.AlarmName), State: string(al.StateValue), Reason: aws.ToString(al.StateReason),
				Updated: aws.ToTime(al.StateUpdatedTimestamp).UTC(), Metric: aws.ToString(al.MetricName), Description: aws.ToString(al.AlarmDescription)})
		}
	}
	slices.SortFunc(out, func(x, y HealthAlarm) int { return cmp.Compare(x.Name, y.Name) })
	return out, nil
}

// healthText prints h for a person: the metrics (the Records series at 0
// left to -o json) and whose they are, then the alarms.
func (a *App) healthText(h Health) error {
	if len(h.Metrics) == 0 {
		fmt.Fprintf(a.Out, "no datapoints in the last %s; the metrics function publishes every minute\n", h.Window)
	} else {
		fmt.Fprintf(a.Out, "%s metrics: the latest datapoint of each in the last %s (to %s)\n", h.Namespace, h.Window, h.To.Format(time.RFC3339))
	}
	if len(h.Sources) > 0 {
		fmt.Fprintf(a.Out, "sources: %s (%s)\n", strings.Join(h.Sources, ", "), h.SourcesFrom)
	} else {
		fmt.Fprintf(a.Out, "sources: those named %s… (%s)\n", h.SourcePrefix, h.SourcesFrom)
	}
	if len(h.Metrics) > 0 {
		fmt.Fprintln(a.Out)
		tw := newTable(a.Out)
		fmt.Fprintln(tw, "METRIC\tDIMENSIONS\tVALUE\tUNIT\tAT")
		zero := 0
		for _, m := range h.Metrics {
			if m.Metric == metrics.MetricRecords && m.Value == 0 {
				zero++
				continue
			}
			dims := cmp.Or(dimsText(m.dims), "-")
			if m.AccountWide {
				dims += " " + accountWide
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", m.Metric, dims, formatValue(m.Value), m.Unit, m.Timestamp.Format(time.RFC3339))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		if zero > 0 {
			fmt.Fprintf(a.Out, "(%d %s series at 0 not shown; -o json lists every series)\n", zero, metrics.MetricRecords)
		}
	}
	fmt.Fprintln(a.Out)
	if len(h.Alarms) == 0 {
		fmt.Fprintf(a.Out, "no alarms named %s…\n", h.AlarmPrefix)
	} else {
		fmt.Fprintf(a.Out, "alarms %s…\n", h.AlarmPrefix)
		tw := newTable(a.Out)
		fmt.Fprintln(tw, "ALARM\tSTATE\tSINCE\tMETRIC\tREASON")
		for _, al := range h.Alarms {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", al.Name, al.State, al.Updated.Format(time.RFC3339), cmp.Or(al.Metric, "-"), al.Reason)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if h.Note != "" {
		fmt.Fprintf(a.Out, "note: %s\n", h.Note)
	}
	return nil
}

// accountWide labels a metric without a Source dimension in the table.
const accountWide = "(account-wide: every stack)"

// dimsText is "Name=value …" in the order published.
func dimsText(dims []cwtypes.Dimension) string {
	parts := make([]string, len(dims))
	for i, d := range dims {
		parts[i] = aws.ToString(d.Name) + "=" + aws.ToString(d.Value)
	}
	return strings.Join(parts, " ")
}

// formatValue prints whole numbers as such and others to two decimals.
func formatValue(v float64) string {
	if v == float64(int64(v)) {
		return strconv.FormatInt(int64(v), 10)
	}
	return strconv.FormatFloat(v, 'f', 2, 64)
}

// shortDuration is d without its zero units: 15m, 1h, 1h30m.
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

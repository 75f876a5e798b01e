package template_test

// A small model of how CloudWatch evaluates a metric or metric-math
// alarm, so that the template's alarms are tested by what they do over a
// timeline (kumo stores alarms but never evaluates them). It follows the
// CloudWatch user guide: "Using Amazon CloudWatch alarms" (evaluation
// periods, datapoints to alarm, how missing data is treated, its tables
// checked in TestAlarmModel, actions on state changes only) and "Using
// metric math" (missing values count as 0 in arithmetic and comparisons;
// MINUTE and HOUR return a non-sparse series over the query's range; IF's
// rules for missing points; FILL with a number or REPEAT), an alarm's
// expressions evaluated over its evaluation range alone. Where the guide
// leaves CloudWatch open, readings name the model's choice and its
// alternative. What it leaves out: percentiles, and the delay before a
// period is evaluated unless a test asks for it (readings.late).

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/awslabs/goformation/v7/cloudformation/cloudwatch"

	"github.com/dlqquarantine/dlqq/shared/dev/embedded"
)

// metricKey names one metric: "Namespace/Name{Dim=Value,…}", dimensions
// in the order the alarm gives them.
func metricKey(ns, name string, dims []cloudwatch.Alarm_Dimension) string {
	var parts []string
	for _, d := range dims {
		parts = append(parts, d.Name+"="+d.Value)
	}
	return ns + "/" + name + "{" + strings.Join(parts, ",") + "}"
}

// world is what is published, per metric key: the value a metric has at
// a minute (false: nothing published that minute). Minute 0 is the start
// of an hour.
type world map[string]func(minute int) (float64, bool)

// aggregate is stat over the samples of key in [start, start+period)
// minutes.
func (w world) aggregate(key, stat string, start, period int) (float64, bool) {
	return w.aggregateBefore(key, stat, start, period, start+period)
}

// aggregateBefore is stat over the samples of key in [start,
// start+period) minutes that were published before minute before.
func (w world) aggregateBefore(key, stat string, start, period, before int) (float64, bool) {
	src, ok := w[key]
	if !ok {
		return 0, false
	}
	var vals []float64
	for m := start; m < min(start+period, before); m++ {
		if v, ok := src(m); ok {
			vals = append(vals, v)
		}
	}
	if len(vals) == 0 {
		return 0, false
	}
	switch stat {
	case "Maximum":
		return slices.Max(vals), true
	case "Minimum":
		return slices.Min(vals), true
	case "SampleCount":
		return float64(len(vals)), true
	case "Sum", "Average":
		sum := 0.0
		for _, v := range vals {
			sum += v
		}
		if stat == "Average" {
			return sum / float64(len(vals)), true
		}
		return sum, true
	}
	panic("statistic " + stat)
}

// series maps a period's start minute to its value; a value is a scalar
// or a series.
type series map[int]float64

type value struct {
	scalar  float64
	ts      series // nil: a scalar
	keyword string // REPEAT or LINEAR, FILL's keywords
}

// readings are the model's choices where the user guide leaves CloudWatch
// open; the zero value is the model's default reading.
type readings struct {
	// fillEmpty: FILL of a series that has no point at all in the query's
	// range fills every period of the range. The guide says of MINUTE,
	// HOUR, ... and TIME_SERIES that they return a non-sparse series over
	// the range, and of FILL only that it "fills the missing values of a
	// time series": by default the model reads a series without a point as
	// nothing to fill (no series, so the alarm's TreatMissingData decides).
	// Tests of alarms that rely on FILL run under both readings.
	fillEmpty bool
	// late: a sample reaches CloudWatch this many minutes after the
	// minute it was taken in, so an evaluation does not see the samples
	// of its last late minutes (the guide's FILL entry warns of metrics
	// "published with a slight delay" in alarms). 0: no delay.
	late int
}

// mathEnv evaluates the expressions of an alarm over the periods of one
// query range.
type mathEnv struct {
	t       *testing.T
	queries map[string]cloudwatch.Alarm_MetricDataQuery
	w       world
	starts  []int // every period start in the query's range
	cache   map[string]value
	read    readings
	toks    map[string][]string // expressions tokenized, by their text
	// fetch, when set, is a metric query's value at a period start (the
	// samples an evaluation sees); else the world's aggregate.
	fetch func(q *cloudwatch.Alarm_MetricStat, start int) (float64, bool)
}

func (e *mathEnv) id(name string) value {
	if v, ok := e.cache[name]; ok {
		return v
	}
	q, ok := e.queries[name]
	if !ok {
		e.t.Fatalf("metric math refers to %s, which no query of the alarm defines", name)
	}
	var v value
	if q.Expression != nil {
		v = e.eval(aws.ToString(q.Expression))
	} else {
		ms := q.MetricStat
		fetch := e.fetch
		if fetch == nil {
			fetch = func(ms *cloudwatch.Alarm_MetricStat, st int) (float64, bool) {
				return e.w.aggregate(metricKey(aws.ToString(ms.Metric.Namespace), aws.ToString(ms.Metric.MetricName), ms.Metric.Dimensions), ms.Stat, st, ms.Period/60)
			}
		}
		s := make(series, len(e.starts))
		for _, st := range e.starts {
			if x, ok := fetch(ms, st); ok {
				s[st] = x
			}
		}
		v = value{ts: s}
	}
	e.cache[name] = v
	return v
}

func (e *mathEnv) eval(expr string) value {
	toks, ok := e.toks[expr]
	if !ok {
		toks = tokenize(e.t, expr)
		if e.toks != nil {
			e.toks[expr] = toks
		}
	}
	p := &parser{t: e.t, env: e, toks: toks}
	v := p.or()
	if p.i != len(p.toks) {
		e.t.Fatalf("metric math %q: unexpected %q", expr, p.toks[p.i])
	}
	return v
}

func tokenize(t *testing.T, s string) []string {
	var toks []string
	for i := 0; i < len(s); {
		c := rune(s[i])
		switch {
		case unicode.IsSpace(c):
			i++
		case unicode.IsLetter(c) || c == '_':
			j := i
			for j < len(s) && (unicode.IsLetter(rune(s[j])) || unicode.IsDigit(rune(s[j])) || s[j] == '_') {
				j++
			}
			toks = append(toks, s[i:j])
			i = j
		case unicode.IsDigit(c) || c == '.':
			j := i
			for j < len(s) && (unicode.IsDigit(rune(s[j])) || s[j] == '.') {
				j++
			}
			toks = append(toks, s[i:j])
			i = j
		default:
			if i+1 < len(s) && slices.Contains([]string{"<=", ">=", "==", "!=", "&&", "||"}, s[i:i+2]) {
				toks = append(toks, s[i:i+2])
				i += 2
			} else if strings.ContainsRune("+-*/<>(),", c) {
				toks = append(toks, string(c))
				i++
			} else {
				t.Fatalf("metric math %q: character %q", s, c)
			}
		}
	}
	return toks
}

type parser struct {
	t    *testing.T
	env  *mathEnv
	toks []string
	i    int
}

func (p *parser) peek() string {
	if p.i < len(p.toks) {
		return p.toks[p.i]
	}
	return ""
}

func (p *parser) next() string { p.i++; return p.toks[p.i-1] }

func (p *parser) expect(tok string) {
	if p.peek() != tok {
		p.t.Fatalf("metric math: want %q at %q", tok, p.peek())
	}
	p.i++
}

func (p *parser) or() value {
	v := p.and()
	for p.peek() == "OR" || p.peek() == "||" {
		p.next()
		v = p.env.binary("OR", v, p.and())
	}
	return v
}

func (p *parser) and() value {
	v := p.cmp()
	for p.peek() == "AND" || p.peek() == "&&" {
		p.next()
		v = p.env.binary("AND", v, p.cmp())
	}
	return v
}

func (p *parser) cmp() value {
	v := p.add()
	if op := p.peek(); slices.Contains([]string{"<", ">", "<=", ">=", "==", "!="}, op) {
		p.next()
		v = p.env.binary(op, v, p.add())
	}
	return v
}

func (p *parser) add() value {
	v := p.mul()
	for op := p.peek(); op == "+" || op == "-"; op = p.peek() {
		p.next()
		v = p.env.binary(op, v, p.mul())
	}
	return v
}

func (p *parser) mul() value {
	v := p.unary()
	for op := p.peek(); op == "*" || op == "/"; op = p.peek() {
		p.next()
		v = p.env.binary(op, v, p.unary())
	}
	return v
}

func (p *parser) unary() value {
	if p.peek() == "-" {
		p.next()
		return p.env.binary("-", value{}, p.unary())
	}
	return p.primary()
}

func (p *parser) primary() value {
	tok := p.next()
	switch {
	case tok == "(":
		v := p.or()
		p.expect(")")
		return v
	case unicode.IsDigit(rune(tok[0])) || tok[0] == '.':
		f, err := strconv.ParseFloat(tok, 64)
		if err != nil {
			p.t.Fatalf("metric math: number %q", tok)
		}
		return value{scalar: f}
	case tok == "REPEAT" || tok == "LINEAR":
		return value{keyword: tok}
	case p.peek() == "(":
		p.next()
		var args []value
		for p.peek() != ")" {
			args = append(args, p.or())
			if p.peek() == "," {
				p.next()
			}
		}
		p.expect(")")
		return p.env.call(tok, args)
	}
	return p.env.id(tok)
}

// at is v at start: a series' point (false when it has none) or a scalar.
func (v value) at(start int) (float64, bool) {
	if v.ts == nil {
		return v.scalar, true
	}
	x, ok := v.ts[start]
	return x, ok
}

func (e *mathEnv) binary(op string, a, b value) value {
	f := func(x, y float64) float64 {
		truth := func(c bool) float64 {
			if c {
				return 1
			}
			return 0
		}
		switch op {
		case "+":
			return x + y
		case "-":
			return x - y
		case "*":
			return x * y
		case "/":
			return x / y // a point divided by zero is dropped, below
		case "<":
			return truth(x < y)
		case ">":
			return truth(x > y)
		case "<=":
			return truth(x <= y)
		case ">=":
			return truth(x >= y)
		case "==":
			return truth(x == y)
		case "!=":
			return truth(x != y)
		case "AND":
			return truth(x != 0 && y != 0)
		case "OR":
			return truth(x != 0 || y != 0)
		}
		panic(op)
	}
	if a.ts == nil && b.ts == nil {
		return value{scalar: f(a.scalar, b.scalar)}
	}
	out := make(series, len(e.starts))
	for _, st := range e.starts {
		x, okA := a.at(st)
		y, okB := b.at(st)
		if !okA && !okB {
			continue
		}
		// A point one series lacks counts as 0.
		if r := f(x, y); !math.IsInf(r, 0) && !math.IsNaN(r) {
			out[st] = r
		}
	}
	return value{ts: out}
}

func (e *mathEnv) call(fn string, args []value) value {
	switch fn {
	case "MINUTE", "HOUR":
		// A non-sparse series over the range, whatever points the
		// argument has.
		if len(args) != 1 || args[0].ts == nil {
			e.t.Fatalf("%s takes one time series", fn)
		}
		out := make(series, len(e.starts))
		for _, st := range e.starts {
			out[st] = float64(st % 60)
			if fn == "HOUR" {
				out[st] = float64(st / 60 % 24)
			}
		}
		return value{ts: out}
	case "IF":
		if len(args) < 2 || len(args) > 3 {
			e.t.Fatalf("IF takes 2 or 3 arguments")
		}
		cond, then := args[0], args[1]
		var otherwise *value
		if len(args) == 3 {
			otherwise = &args[2]
		}
		if cond.ts == nil {
			if cond.scalar != 0 {
				return then
			}
			if otherwise == nil {
				return value{ts: series{}}
			}
			return *otherwise
		}
		out := make(series, len(e.starts))
		for st, c := range cond.ts {
			if c != 0 {
				x, ok := then.at(st)
				if !ok {
					x = 0 // true, and the series has no point: 0
				}
				out[st] = x
			} else if otherwise != nil {
				if x, ok := otherwise.at(st); ok {
					out[st] = x // false, and no point: dropped
				}
			}
		}
		return value{ts: out}
	case "FILL":
		// "Using metric math", FILL: "Fills the missing values of a time
		// series", with a number or REPEAT (its examples: FILL(m1,10),
		// FILL(m1, REPEAT)). The model reads REPEAT as the last value
		// before each missing one, so a gap at the start of the range has
		// none and stays missing; and an alarm's query range as its
		// evaluation range (the guide's note on AVG, MAX and the like:
		// an alarm "attempts to retrieve a higher number of data points
		// than ... Evaluation Periods"), so nothing from before it is
		// repeated.
		if len(args) != 2 || args[0].ts == nil {
			e.t.Fatalf("FILL takes a time series and a number or REPEAT")
		}
		in, with := args[0].ts, args[1]
		if with.ts != nil || with.keyword == "LINEAR" {
			e.t.Fatalf("FILL with a series or LINEAR is not modeled")
		}
		out := make(series, len(e.starts))
		if len(in) == 0 && (with.keyword != "" || !e.read.fillEmpty) {
			return value{ts: out} // no point to fill from or around
		}
		last, seen := 0.0, false
		for _, st := range e.starts {
			if x, ok := in[st]; ok {
				out[st], last, seen = x, x, true
			} else if with.keyword == "" {
				out[st] = with.scalar
			} else if seen {
				out[st] = last
			}
		}
		return value{ts: out}
	}
	e.t.Fatalf("metric math function %s is not modeled", fn)
	return value{}
}

// notice is a notification an alarm sent: its new state at a minute.
type notice struct {
	minute int
	state  string
}

func (n notice) String() string { return fmt.Sprintf("%s@%d", n.state, n.minute) }

// simulate evaluates a at the end of each of its periods over minutes
// [0, minutes) of w and returns its state changes (INSUFFICIENT_DATA at
// the start); each is a notification when the alarm has actions for the
// new state.
func simulate(t *testing.T, a *cloudwatch.Alarm, w world, minutes int) []notice {
	t.Helper()
	return simulateReading(t, a, w, minutes, readings{})
}

// miQuery is a parsed Metrics Insights query (embedded.ParseMetricsInsights):
// SELECT stat(metric) FROM SCHEMA(ns, dim) GROUP BY dim.
type miQuery struct {
	stat, metric, ns, dim string
}

// parseMI parses expr as a Metrics Insights query; false when it is none
// (a metric-math expression), failing t when it is one of another form.
func parseMI(t *testing.T, expr string) (miQuery, bool) {
	t.Helper()
	q, ok, err := embedded.ParseMetricsInsights(expr)
	if err != nil {
		t.Fatal(err)
	}
	return miQuery{stat: q.Statistic, metric: q.Metric, ns: q.Namespace, dim: q.Dimension}, ok
}

// contributors are the values of q's dimension that w publishes q's
// metric with, with that dimension alone (SCHEMA(ns, Dim) matches only
// metrics whose dimensions are exactly Dim), sorted.
func (q miQuery) contributors(w world) []string {
	prefix := metricKey(q.ns, q.metric, []cloudwatch.Alarm_Dimension{{Name: q.dim, Value: ""}})
	prefix = strings.TrimSuffix(prefix, "}")
	var out []string
	for key := range w {
		if v, ok := strings.CutPrefix(key, prefix); ok && strings.HasSuffix(v, "}") && !strings.Contains(v, ",") {
			out = append(out, strings.TrimSuffix(v, "}"))
		}
	}
	slices.Sort(out)
	return out
}

// multiSeries is how a multi-time-series alarm (a Metrics Insights query
// with GROUP BY) went: its own state changes and each contributor's.
type multiSeries struct {
	changes []notice
	by      map[string][]notice
}

// inAlarm returns the contributors in ALARM at minute.
func (m multiSeries) inAlarm(minute int) []string {
	var out []string
	for c, changes := range m.by {
		if stateAt(changes, minute) == "ALARM" {
			out = append(out, c)
		}
	}
	slices.Sort(out)
	return out
}

// stateAt is the state changes leave at minute.
func stateAt(changes []notice, minute int) string {
	state := "INSUFFICIENT_DATA"
	for _, c := range changes {
		if c.minute <= minute {
			state = c.state
		}
	}
	return state
}

// simulateContributors evaluates a Metrics Insights alarm with GROUP BY as
// CloudWatch's multi-time-series alarms do ("Create an alarm based on a
// Multi Time Series Metrics Insights query"; "Limits that apply to alarms
// based on Metrics Insights queries"): each time series the query returns
// is a contributor evaluated on its own with the alarm's threshold,
// periods and missing-data treatment; the alarm is in ALARM while any
// contributor is, and names them; OK when none is. A query that returns no
// series is one series without data. Left out: the 100 contributors in
// ALARM and 500 series the query returns at most (the docs say where the
// template stays below both).
func simulateContributors(t *testing.T, a *cloudwatch.Alarm, q miQuery, period int, w world, minutes int, r readings) multiSeries {
	t.Helper()
	out := multiSeries{by: map[string][]notice{}}
	names := q.contributors(w)
	each := names
	if len(each) == 0 {
		each = []string{""} // no series: missing data throughout
	}
	for _, c := range each {
		single := *a
		single.Metrics = nil
		single.Namespace, single.MetricName, single.Statistic, single.Period = aws.String(q.ns), aws.String(q.metric), aws.String(q.stat), aws.Int(period)
		single.Dimensions = []cloudwatch.Alarm_Dimension{{Name: q.dim, Value: c}}
		changes := simulateReading(t, &single, w, minutes, r)
		if c != "" {
			out.by[c] = changes
		} else {
			out.changes = changes
			return out
		}
	}
	var at []int
	for _, changes := range out.by {
		for _, n := range changes {
			at = append(at, n.minute)
		}
	}
	slices.Sort(at)
	state := "INSUFFICIENT_DATA"
	for _, m := range slices.Compact(at) {
		next := "INSUFFICIENT_DATA"
		for _, changes := range out.by {
			switch stateAt(changes, m) {
			case "ALARM":
				next = "ALARM"
			case "OK":
				if next != "ALARM" {
					next = "OK"
				}
			}
		}
		if next != state {
			state = next
			out.changes = append(out.changes, notice{minute: m, state: state})
		}
	}
	return out
}

// simulateReading is simulate under the readings r.
func simulateReading(t *testing.T, a *cloudwatch.Alarm, w world, minutes int, r readings) []notice {
	t.Helper()
	if len(a.Metrics) == 1 {
		if q, ok := parseMI(t, aws.ToString(a.Metrics[0].Expression)); ok {
			return simulateContributors(t, a, q, aws.ToInt(a.Metrics[0].Period), w, minutes, r).changes
		}
	}
	queries := map[string]cloudwatch.Alarm_MetricDataQuery{}
	ret := ""
	period := aws.ToInt(a.Period)
	if len(a.Metrics) == 0 {
		queries["m"] = cloudwatch.Alarm_MetricDataQuery{Id: "m", MetricStat: &cloudwatch.Alarm_MetricStat{
			Metric: &cloudwatch.Alarm_Metric{Namespace: a.Namespace, MetricName: a.MetricName, Dimensions: a.Dimensions},
			Period: period, Stat: aws.ToString(a.Statistic)}}
		ret = "m"
	}
	for _, q := range a.Metrics {
		queries[q.Id] = q
		if q.MetricStat != nil {
			if period != 0 && period != q.MetricStat.Period {
				t.Fatalf("%s: its metrics have different periods (%d, %d): CloudWatch refuses it", aws.ToString(a.AlarmName), period, q.MetricStat.Period)
			}
			period = q.MetricStat.Period
		}
		if q.ReturnData == nil || *q.ReturnData {
			if ret != "" {
				t.Fatalf("%s returns more than one time series (%s, %s)", aws.ToString(a.AlarmName), ret, q.Id)
			}
			ret = q.Id
		}
	}
	if period%60 != 0 || period == 0 {
		t.Fatalf("%s: period %d s", aws.ToString(a.AlarmName), period)
	}
	p := period / 60
	n := a.EvaluationPeriods
	m := aws.ToInt(a.DatapointsToAlarm)
	if m == 0 {
		m = n
	}
	if n*period > 86400 {
		t.Fatalf("%s: %d periods of %d s exceed the day CloudWatch allows", aws.ToString(a.AlarmName), n, period)
	}
	var starts []int
	for st := 0; st+p <= minutes; st += p {
		starts = append(starts, st)
	}
	toks := map[string][]string{}
	// A period's statistic from every sample of it, once; an evaluation
	// whose last minutes are not seen yet (r.late) computes its newest
	// periods again from what it sees.
	type point struct {
		v  float64
		ok bool
	}
	full := map[*cloudwatch.Alarm_MetricStat]map[int]point{}
	keys := map[*cloudwatch.Alarm_MetricStat]string{}
	fetch := func(before int) func(*cloudwatch.Alarm_MetricStat, int) (float64, bool) {
		return func(ms *cloudwatch.Alarm_MetricStat, st int) (float64, bool) {
			key, ok := keys[ms]
			if !ok {
				key = metricKey(aws.ToString(ms.Metric.Namespace), aws.ToString(ms.Metric.MetricName), ms.Metric.Dimensions)
				keys[ms] = key
			}
			if st+p > before {
				return w.aggregateBefore(key, ms.Stat, st, p, before)
			}
			if full[ms] == nil {
				full[ms] = map[int]point{}
			}
			pt, ok := full[ms][st]
			if !ok {
				pt.v, pt.ok = w.aggregate(key, ms.Stat, st, p)
				full[ms][st] = pt
			}
			return pt.v, pt.ok
		}
	}
	breaches := func(x float64) bool {
		th := aws.ToFloat64(a.Threshold)
		switch a.ComparisonOperator {
		case "GreaterThanThreshold":
			return x > th
		case "GreaterThanOrEqualToThreshold":
			return x >= th
		case "LessThanThreshold":
			return x < th
		case "LessThanOrEqualToThreshold":
			return x <= th
		}
		t.Fatalf("comparison %s", a.ComparisonOperator)
		return false
	}
	// The template treats missing data as breaching or notBreaching; the
	// model knows those two.
	missing := aws.ToString(a.TreatMissingData)
	if missing != "breaching" && missing != "notBreaching" {
		t.Fatalf("%s treats missing data as %q, which the model does not know", aws.ToString(a.AlarmName), missing)
	}
	state := "INSUFFICIENT_DATA"
	var out []notice
	for k := range starts {
		// The evaluation range is the range the alarm queries: its
		// expressions are evaluated over it alone (FILL sees nothing
		// before it).
		lo := max(0, k-n-1)
		env := &mathEnv{t: t, queries: queries, w: w, starts: starts[lo : k+1], cache: map[string]value{}, read: r, toks: toks, fetch: fetch(starts[k] + p - r.late)}
		result := env.id(ret)
		if result.ts == nil {
			t.Fatalf("%s: its expression is a scalar", aws.ToString(a.AlarmName))
		}
		// The evaluation range: a few periods more than evaluated (the
		// guide's tables: 5 retrieved for 3 evaluated). The user guide,
		// "How alarm state is evaluated when data is missing": with at
		// least EvaluationPeriods real points in the range, the newest of
		// them are evaluated and TreatMissingData is not used; with fewer,
		// every real point in the range is evaluated, "no matter when
		// they were reported", and missing points fill the rest, "as few
		// times as possible". So a real point still in the range keeps
		// filled ones out, however old it is.
		var existing, slots []int
		for i := k; i >= lo; i-- {
			slots = append(slots, starts[i])
			if _, ok := result.ts[starts[i]]; ok {
				existing = append(existing, starts[i])
			}
		}
		bad := 0
		for _, st := range existing[:min(n, len(existing))] {
			if breaches(result.ts[st]) {
				bad++
			}
		}
		if filled := min(n, len(slots)) - len(existing); filled > 0 && missing == "breaching" {
			bad += filled
		}
		next := "OK"
		if bad >= m {
			next = "ALARM"
		}
		if next != state {
			state = next
			out = append(out, notice{minute: starts[k] + p, state: state})
		}
	}
	return out
}

// entered returns the minutes at which changes entered state.
func entered(changes []notice, state string) []int {
	var out []int
	for _, c := range changes {
		if c.state == state {
			out = append(out, c.minute)
		}
	}
	return out
}

// constant is a metric published every minute from `from` to `to`
// (exclusive) with value v.
func constant(v float64, from, to int) func(int) (float64, bool) {
	return func(m int) (float64, bool) { return v, m >= from && m < to }
}

// The model against the examples of the CloudWatch user guide.
func TestAlarmModel(t *testing.T) {
	// points is a metric with one value a minute; NaN: none.
	points := func(vs ...float64) func(int) (float64, bool) {
		return func(m int) (float64, bool) {
			if m >= len(vs) || math.IsNaN(vs[m]) {
				return 0, false
			}
			return vs[m], true
		}
	}
	none := math.NaN()
	stat := func(id, name string) cloudwatch.Alarm_MetricDataQuery {
		return cloudwatch.Alarm_MetricDataQuery{Id: id, MetricStat: &cloudwatch.Alarm_MetricStat{Metric: &cloudwatch.Alarm_Metric{Namespace: aws.String("T"), MetricName: aws.String(name)}, Period: 60, Stat: "Maximum"}}
	}
	key := func(name string) string { return metricKey("T", name, nil) }
	eval := func(w world, minutes int, expr string, r readings) []float64 {
		env := &mathEnv{t: t, w: w, cache: map[string]value{}, read: r, queries: map[string]cloudwatch.Alarm_MetricDataQuery{
			"metric1": stat("metric1", "one"), "metric2": stat("metric2", "two"), "metric3": stat("metric3", "three")}}
		for m := range minutes {
			env.starts = append(env.starts, m)
		}
		v := env.eval(expr)
		var out []float64
		for _, st := range env.starts {
			x, ok := v.at(st)
			if !ok {
				x = none
			}
			out = append(out, x)
		}
		return out
	}
	same := func(a, b []float64) bool {
		return slices.EqualFunc(a, b, func(x, y float64) bool { return x == y || (math.IsNaN(x) && math.IsNaN(y)) })
	}
	// "Comparison and logical operators"
	cmp := world{key("one"): points(30, 20, 0, 0), key("two"): points(20, none, 20, none)}
	for expr, want := range map[string][]float64{
		"(metric1 < metric2)":                  {0, 0, 1, 0},
		"(metric1 >= 30)":                      {1, 0, 0, 0},
		"(metric1 > 15 AND metric2 > 15)":      {1, 0, 0, 0},
		"metric1 + metric2":                    {50, 20, 20, 0},
		"IF(MINUTE(metric1) < 2, 0, metric1)":  {0, 0, 0, 0},
		"IF(MINUTE(metric2) >= 2, 1, metric2)": {20, none, 1, 1},
	} {
		if got := eval(cmp, 4, expr, readings{}); !same(got, want) {
			t.Errorf("%s = %v, want %v", expr, got, want)
		}
	}
	// "Using IF expressions"
	ifs := world{key("one"): points(1, 1, 0, 0, none), key("two"): points(30, none, 0, 0, 30), key("three"): points(0, 0, 20, none, 20)}
	for expr, want := range map[string][]float64{
		"IF(metric1, metric2, metric3)": {30, 0, 20, none, none},
		"IF(metric1, 5, metric3)":       {5, 5, 20, none, none},
		"IF(metric1, metric2, 5)":       {30, 0, 5, 5, none},
	} {
		if got := eval(ifs, 5, expr, readings{}); !same(got, want) {
			t.Errorf("%s = %v, want %v", expr, got, want)
		}
	}
	// FILL ("Using metric math", its entry in the functions table): a
	// number fills every missing value, REPEAT the most recent value
	// before it (none before the first point). Of a series with no point
	// in the range the guide says nothing: the default reading returns no
	// series, the other fills it.
	fills := world{key("one"): points(none, 5, none, none, 7, none), key("two"): points(none, none, none, none, none, none)}
	for _, c := range []struct {
		expr            string
		want, fillEmpty []float64
	}{
		{"FILL(metric1, 0)", []float64{0, 5, 0, 0, 7, 0}, nil},
		{"FILL(metric1, 86400)", []float64{86400, 5, 86400, 86400, 7, 86400}, nil},
		{"FILL(metric1, REPEAT)", []float64{none, 5, 5, 5, 7, 7}, nil},
		{"FILL(metric1, 0) < 1", []float64{1, 0, 1, 1, 0, 1}, nil},
		{"FILL(metric2, 0)", []float64{none, none, none, none, none, none}, []float64{0, 0, 0, 0, 0, 0}},
		{"FILL(metric2, REPEAT)", []float64{none, none, none, none, none, none}, nil},
		{"FILL(metric1, REPEAT) + FILL(metric2, REPEAT)", []float64{none, 5, 5, 5, 7, 7}, nil},
	} {
		if got := eval(fills, 6, c.expr, readings{}); !same(got, c.want) {
			t.Errorf("%s = %v, want %v", c.expr, got, c.want)
		}
		want := c.fillEmpty
		if want == nil {
			want = c.want
		}
		if got := eval(fills, 6, c.expr, readings{fillEmpty: true}); !same(got, want) {
			t.Errorf("%s, a series without points filled: %v, want %v", c.expr, got, want)
		}
	}
	// An alarm's expressions see its evaluation range only (3 periods for
	// 1 evaluated): REPEAT carries a point while it is in the range, and
	// nothing once it has left it.
	repeat := &cloudwatch.Alarm{AlarmName: aws.String("repeat"), Metrics: []cloudwatch.Alarm_MetricDataQuery{
		{Id: "e", Expression: aws.String("FILL(metric1, REPEAT)")}, {Id: "metric1", ReturnData: aws.Bool(false), MetricStat: stat("metric1", "one").MetricStat},
	}, EvaluationPeriods: 1, Threshold: aws.Float64(5), ComparisonOperator: "GreaterThanThreshold", TreatMissingData: aws.String("notBreaching")}
	if got := simulate(t, repeat, world{key("one"): points(9)}, 6); !slices.Equal(got, []notice{{1, "ALARM"}, {4, "OK"}}) {
		t.Errorf("FILL(metric1, REPEAT) of one point at minute 0, 1-minute periods: %v, want ALARM@1 OK@4", got)
	}
	// "How alarm state is evaluated when data is missing": its two
	// tables, 5-minute periods, the 5 points CloudWatch retrieves oldest
	// first, 3 of 3 and 2 of 3 periods to alarm. The model knows the
	// BREACHING and NOT BREACHING columns (the template uses no other);
	// the MISSING and IGNORE columns are kept to show the rows whole.
	const insufficient, retain = "INSUFFICIENT_DATA", "retain"
	for _, c := range []struct {
		m                                        int
		points                                   []float64
		missing, ignore, breaching, notBreaching string
	}{
		{3, []float64{0, none, 9, none, 9}, "OK", "OK", "OK", "OK"},
		{3, []float64{0, none, none, none, none}, "OK", "OK", "OK", "OK"},
		{3, []float64{none, none, none, none, none}, insufficient, retain, "ALARM", "OK"},
		{3, []float64{0, 9, 9, none, 9}, "ALARM", "ALARM", "ALARM", "ALARM"},
		{3, []float64{none, none, none, none, 9}, insufficient, retain, "ALARM", "OK"},
		{3, []float64{9, none, none, none, none}, "ALARM", retain, "ALARM", "OK"},
		{2, []float64{0, none, 9, none, 9}, "ALARM", "ALARM", "ALARM", "ALARM"},
		{2, []float64{0, 0, 9, 0, 9}, "ALARM", "ALARM", "ALARM", "ALARM"},
		{2, []float64{0, none, 9, none, none}, "OK", "OK", "ALARM", "OK"},
		{2, []float64{none, none, none, none, 0}, "OK", "OK", "ALARM", "OK"},
		{2, []float64{none, none, none, none, 9}, insufficient, retain, "ALARM", "OK"},
	} {
		for missing, want := range map[string]string{"breaching": c.breaching, "notBreaching": c.notBreaching} {
			var per []float64 // one value a minute, 5 minutes a period
			for _, p := range c.points {
				for range 5 {
					per = append(per, p)
				}
			}
			a := &cloudwatch.Alarm{AlarmName: aws.String("model"), Namespace: aws.String("T"), MetricName: aws.String("one"), Statistic: aws.String("Maximum"),
				Period: aws.Int(300), EvaluationPeriods: 3, DatapointsToAlarm: aws.Int(c.m), Threshold: aws.Float64(5),
				ComparisonOperator: "GreaterThanThreshold", TreatMissingData: aws.String(missing)}
			changes := simulate(t, a, world{key("one"): points(per...)}, len(per))
			if got := changes[len(changes)-1].state; got != want {
				t.Errorf("%d of 3, %v, missing data %s: %s (%v), the user guide says %s", c.m, c.points, missing, got, changes, want)
			}
		}
	}
}

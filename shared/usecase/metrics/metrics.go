// Package metrics publishes DLQ health to CloudWatch: DLQ depth, records by
// status and class, the oldest quarantined record's age, arrival rate,
// redrive success rate, poison and the dominant failure signature's share.
// Its AWS calls per run are the same for a thousand records as for a
// hundred thousand: it reads counters kept in the record writes'
// transactions, and the oldest record through one indexed query.
package metrics

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatch"
	cwtypes "github.com/aws/aws-sdk-go-v2/service/cloudwatch/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
	"github.com/dlqquarantine/dlqq/shared/runtime/cwmetrics"
	"github.com/dlqquarantine/dlqq/shared/runtime/emf"
	"github.com/dlqquarantine/dlqq/shared/runtime/fanout"
)

// Metric names (namespace Config.Namespace).
const (
	MetricDLQDepth    = "DLQDepth"
	MetricDLQInFlight = "DLQInFlight"
	MetricRecords     = "Records"
	MetricOldestAge   = "OldestQuarantinedAgeSeconds"
	MetricArrivals    = "ArrivalsPerMinute"
	MetricSuccessRate = "RedriveSuccessRate"
	MetricPoison      = "PoisonRecords"
	// MetricNewPoison counts the records parked as poison that no run
	// published before (the marks: newMarks); the alarm watches it.
	MetricNewPoison     = "NewPoisonRecords"
	MetricDominantShare = "DominantSignatureShare"
	// MetricIntegrityHolds counts the records set aside because they
	// failed verification (alarmed above 0): never replayed, re-sealed
	// or archived until an operator investigates (dlqctl ls --held).
	MetricIntegrityHolds = "IntegrityHolds"
	// MetricNewIntegrityHolds counts the holds that no run published
	// before (the marks: newMarks): the alarm watches it, so that each
	// new hold notifies again (IntegrityHolds stays above 0 while any
	// record is held), however late the ledger counts it.
	MetricNewIntegrityHolds = "NewIntegrityHolds"
	DimSource               = "Source"
	DimStatus               = "Status"
	DimClass                = "Class"
	defaultSuccessWindow    = 2 // hours: this one and the last
	// poisonWindow is how many hours of poison counts a run reads at
	// least: this one and the two before, and as many before the hour
	// the marks were stored (poisonHours). A record parked as poison in
	// hour H is published as new unless the ledger counts it after the
	// first run of hour H+3 that stores marks, two to three hours after it
	// was parked (LedgerIteratorAgeAlarm pages at ten minutes behind), or
	// unless it was parked more than 46 hours before the first run that
	// stores marks after a metrics outage.
	poisonWindow = 3
	// maxPoisonHours bounds how far back a run reads after runs that
	// stored no marks: the poison counts live 48 hours (dynamostore's
	// bucketTTL), and none older is there to read.
	maxPoisonHours = 47
)

// QueueAPI is the part of the SQS client the metrics function uses.
type QueueAPI interface {
	GetQueueUrl(ctx context.Context, in *sqs.GetQueueUrlInput, opts ...func(*sqs.Options)) (*sqs.GetQueueUrlOutput, error)
	GetQueueAttributes(ctx context.Context, in *sqs.GetQueueAttributesInput, opts ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error)
}

// Counters reads counter shards.
type Counters interface {
	ReadCounters(ctx context.Context, keys []quarantine.CounterKey) (map[quarantine.CounterKey]int64, error)
}

// EventualCounters reads counter shards with eventually consistent reads
// (dynamostore.Store: half the read units). A Counters that has it is
// read so for the gauges (planCounters), which the next run reads again.
type EventualCounters interface {
	ReadCountersEventually(ctx context.Context, keys []quarantine.CounterKey) (map[quarantine.CounterKey]int64, error)
}

// Signatures lists a source's open records by failure signature.
type Signatures interface {
	OpenSignatures(ctx context.Context, source string) (map[string]int64, error)
}

// MetricsAPI is the part of the CloudWatch client it uses.
type MetricsAPI interface {
	PutMetricData(ctx context.Context, in *cloudwatch.PutMetricDataInput, opts ...func(*cloudwatch.Options)) (*cloudwatch.PutMetricDataOutput, error)
}

// MarkStore keeps each source's marks (quarantine.MetricMarks):
// dynamostore.Store, the item #mtr#<source>, which only the metrics role
// writes.
type MarkStore interface {
	ReadMetricMarks(ctx context.Context, source string) (quarantine.MetricMarks, error)
	// WriteMetricMarks stores m if the stored revision is still prevRev
	// (quarantine.ErrMarksMoved otherwise).
	WriteMetricMarks(ctx context.Context, source, prevRev string, m quarantine.MetricMarks) error
}

// Service publishes the metrics of every configured source.
type Service struct {
	SQS        QueueAPI
	Counters   Counters
	Marks      MarkStore
	Signatures Signatures
	Lister     quarantine.Lister
	Store      quarantine.Store
	CloudWatch MetricsAPI
	Sources    map[string]*quarantine.Source
	// Unconfigured also measures the sources that have records and no
	// configuration, when the Lister names them (quarantine.SourceLister).
	Unconfigured bool
	Namespace    string
	Now          func() time.Time
	Log          *slog.Logger

	mu   sync.Mutex
	urls map[string]string // DLQ name → URL, kept across warm invocations
	// depths are this run's DLQ depths by DLQ name: a DLQ that several
	// sources share is read once per run.
	depths map[string][2]int64
}

// Report is what one run measured for one source.
type Report struct {
	Source             string           `json:"source"`
	DLQDepth           int64            `json:"dlq_depth"`
	DLQInFlight        int64            `json:"dlq_in_flight"`
	Records            map[string]int64 `json:"records"` // "STATUS/class" → count
	OldestAgeSeconds   float64          `json:"oldest_quarantined_age_seconds"`
	ArrivalsPerMinute  int64            `json:"arrivals_per_minute"`
	RedriveSuccessRate *float64         `json:"redrive_success_rate,omitempty"`
	Poison             int64            `json:"poison"`
	NewPoison          int64            `json:"new_poison"`
	DominantSignature  string           `json:"dominant_signature"`
	DominantSharePct   float64          `json:"dominant_share_percent"`
	OpenRecords        int64            `json:"open_records"`
	IntegrityHolds     int64            `json:"integrity_holds"`
	NewIntegrityHolds  int64            `json:"new_integrity_holds"`
	// Unconfigured marks a source that has records and no configuration
	// (no DLQ to measure).
	Unconfigured bool `json:"unconfigured,omitempty"`

	// poisoned are the poison counts of the hours read, by hour.
	poisoned map[time.Time]int64
	// prev are the marks read, next those to store once the report is
	// published (nil when they do not move).
	prev quarantine.MetricMarks
	next *quarantine.MetricMarks
	// marksErr: the marks read were malformed, or ahead of a counter
	// (the run fails once it has published).
	marksErr error
	// partial: the DLQ's depth, the dominant signature or the oldest
	// record could not be read; only what the counters say is published
	// (publish), and the run fails.
	partial error
}

var (
	allStatuses = []quarantine.Status{quarantine.StatusQuarantined, quarantine.StatusRedriving, quarantine.StatusRedriven,
		quarantine.StatusResolved, quarantine.StatusParked, quarantine.StatusArchived}
	allClasses = []quarantine.Class{quarantine.ClassValidation, quarantine.ClassExhausted, quarantine.ClassPoison}
)

// SourceConcurrency is how many sources a metrics run measures at once:
// each takes about nine calls one after another (TestCallsGrowWithSourcesNotRecords),
// so a run of many sources is bounded by its function's timeout over this.
const SourceConcurrency = 8

// DeadlineMargin is how long before its invocation's deadline a run
// starts no more sources: the ones started finish and are published, the
// rest are reported not measured (and come first in a later minute).
const DeadlineMargin = 10 * time.Second

// Run measures and publishes every source, reported in name order; a source that
// fails is skipped, the others still published, and the joined errors
// returned at the end. A DLQ that
// several sources share is read once, and its depth (DLQDepth,
// DLQInFlight) is published under the DLQ's name as its Source, not under
// each source: it cannot be told apart by source, and an alarm on it
// names the queue that backs up.
func (s *Service) Run(ctx context.Context) ([]Report, error) {
	var out []Report
	var failed []error
	sources, err := s.sources(ctx)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.depths = map[string][2]int64{}
	s.mu.Unlock()
	shared := sharedDLQs(s.Sources)
	// A shared DLQ's depth is read and published first, once, before its
	// sources (DLQDepthAlarm watches it: a run cut short by its deadline
	// must not leave it without data). A read that fails is tried again
	// by each of its sources, and published at the end.
	byDLQ := map[string]*quarantine.Source{}
	for _, name := range slices.Sorted(maps.Keys(s.Sources)) {
		if src := s.Sources[name]; shared[src.DLQName] && byDLQ[src.DLQName] == nil {
			byDLQ[src.DLQName] = src
		}
	}
	published := map[string]bool{}
	for _, dlq := range slices.Sorted(maps.Keys(shared)) {
		if s.dlqDepth(ctx, byDLQ[dlq], &Report{}) == nil && s.publishDepth(ctx, dlq) == nil {
			published[dlq] = true
		}
	}
	// The sources are measured SourceConcurrency at a time, reported in
	// name order. A run starts no source once its invocation has less
	// than DeadlineMargin left (those are reported not measured), and
	// starts each minute at another source, so that a deployment with
	// more sources than one run measures never leaves the same ones out.
	names := slices.Sorted(maps.Keys(sources))
	type measured struct {
		rep    *Report
		failed []error
	}
	results := make([]measured, len(names))
	start := 0
	if len(names) > 0 {
		start = int(s.Now().Unix()/60) % len(names)
	}
	runCtx := ctx
	if d, ok := ctx.Deadline(); ok {
		var cancel context.CancelFunc
		runCtx, cancel = context.WithDeadline(ctx, d.Add(-DeadlineMargin))
		defer cancel()
	}
	notRun := fanout.Run(runCtx, len(names), SourceConcurrency, func(_ context.Context, k int) error {
		i := (start + k) % len(names)
		name := names[i]
		_, configured := s.Sources[name]
		rep, err := s.source(ctx, sources[name], !configured)
		if err == nil {
			err = s.publish(ctx, rep, configured && !shared[sources[name].DLQName])
		}
		if err != nil {
			// One source that cannot be measured (its counters or marks
			// unreadable, its publish refused) never silences the other
			// sources: each is measured, and the run fails at the end,
			// naming every source it missed (the metrics function's
			// errors alarm).
			s.Log.ErrorContext(ctx, "dlq health not published", "source", name, "error_kind", quarantine.ErrorKind(err))
			results[i].failed = append(results[i].failed, fmt.Errorf("source %s: %w", name, err))
			return nil
		}
		if merr := s.moveMarks(ctx, rep); merr != nil {
			// Published, the marks not moved: the next run publishes the
			// same as new again, and the run fails so that a store
			// refusing them for good is seen (a page pinned on the same
			// holds would notify no new one).
			s.Log.ErrorContext(ctx, "metrics marks not stored: the same holds and poison are published as new again", "source", name, "error_kind", quarantine.ErrorKind(merr))
			results[i].failed = append(results[i].failed, fmt.Errorf("source %s: %w", name, merr))
		}
		if rep.partial != nil {
			s.Log.ErrorContext(ctx, "dlq health published in part: what the counters say only", "source", name, "error_kind", quarantine.ErrorKind(rep.partial))
			results[i].failed = append(results[i].failed, fmt.Errorf("source %s: %w", name, rep.partial))
		}
		if rep.marksErr != nil { // published (malformed: every hold and poison as new)
			results[i].failed = append(results[i].failed, fmt.Errorf("source %s: %w", name, rep.marksErr))
		}
		s.Log.InfoContext(ctx, "dlq health published", "source", rep.Source, "dlq_depth", rep.DLQDepth,
			"open_records", rep.OpenRecords, "poison", rep.Poison, "integrity_holds", rep.IntegrityHolds, "dominant_signature", rep.DominantSignature,
			"dominant_share_percent", rep.DominantSharePct, "oldest_quarantined_age_seconds", rep.OldestAgeSeconds)
		results[i].rep = rep
		return nil
	})
	started := make([]error, len(names)) // by name order
	for k, err := range notRun {
		started[(start+k)%len(names)] = err
	}
	for i, r := range results {
		if err := started[i]; err != nil { // not started: the invocation's time ran out
			s.Log.ErrorContext(ctx, "dlq health not measured: the run's time ran out", "source", names[i])
			failed = append(failed, fmt.Errorf("source %s: not measured: %w", names[i], err))
			continue
		}
		failed = append(failed, r.failed...)
		if r.rep != nil {
			out = append(out, *r.rep)
		}
	}
	for _, dlq := range slices.Sorted(maps.Keys(shared)) {
		if published[dlq] {
			continue
		}
		if err := s.publishDepth(ctx, dlq); err != nil {
			failed = append(failed, err)
		}
	}
	return out, errors.Join(failed...)
}

// sources are the configured sources and, when the Lister names them
// (quarantine.SourceLister), every other source that has records: a DLQ
// message whose source is not configured is quarantined under its
// queue's name, and measured here without a DLQ (Report.Unconfigured).
func (s *Service) sources(ctx context.Context) (map[string]*quarantine.Source, error) {
	sl, ok := s.Lister.(quarantine.SourceLister)
	if !ok || !s.Unconfigured {
		return s.Sources, nil
	}
	names, err := sl.ListSources(ctx)
	if err != nil {
		return nil, err
	}
	out := maps.Clone(s.Sources)
	if out == nil {
		out = map[string]*quarantine.Source{}
	}
	for _, name := range names {
		if _, ok := out[name]; !ok {
			out[name] = &quarantine.Source{Name: name}
		}
	}
	return out, nil
}

// sharedDLQs are the DLQs more than one source names.
func sharedDLQs(srcs map[string]*quarantine.Source) map[string]bool {
	n := map[string]int{}
	for _, src := range srcs {
		n[src.DLQName]++
	}
	out := map[string]bool{}
	for dlq, k := range n {
		if k > 1 && dlq != "" {
			out[dlq] = true
		}
	}
	return out
}

// source measures one source: the DLQ's depth, the counters, the open
// records' dominant signature and the oldest open record.
func (s *Service) source(ctx context.Context, src *quarantine.Source, unconfigured bool) (*Report, error) {
	now := s.Now().UTC()
	rep := &Report{Source: src.Name, Records: map[string]int64{}, Unconfigured: unconfigured}
	if err := s.readMarks(ctx, rep); err != nil {
		return nil, err
	}
	if err := s.counts(ctx, src, now, rep); err != nil {
		return nil, err
	}
	s.newMarks(ctx, now, rep)
	// What the counters say is published even when the rest cannot be
	// read (a DLQ deleted, a throttled query), so that a source that
	// fails every run still pages its new holds and poison.
	var rest error
	if !rep.Unconfigured {
		rest = s.dlqDepth(ctx, src, rep)
	}
	if rest == nil {
		rest = s.dominant(ctx, src, rep)
	}
	if rest == nil {
		rest = s.oldest(ctx, src, now, rep)
	}
	rep.partial = rest
	return rep, nil
}

// dlqDepth reads the DLQ's visible and in-flight message counts, once per
// run for a DLQ that several sources share.
func (s *Service) dlqDepth(ctx context.Context, src *quarantine.Source, rep *Report) error {
	s.mu.Lock()
	d, ok := s.depths[src.DLQName]
	s.mu.Unlock()
	if ok {
		rep.DLQDepth, rep.DLQInFlight = d[0], d[1]
		return nil
	}
	url, err := s.queueURL(ctx, src)
	if err != nil {
		return err
	}
	attrs, err := s.SQS.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(url), AttributeNames: []sqstypes.QueueAttributeName{
		sqstypes.QueueAttributeNameApproximateNumberOfMessages, sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible}})
	if err != nil {
		return fmt.Errorf("dlq depth: %w", err)
	}
	fmt.Sscan(attrs.Attributes["ApproximateNumberOfMessages"], &rep.DLQDepth)
	fmt.Sscan(attrs.Attributes["ApproximateNumberOfMessagesNotVisible"], &rep.DLQInFlight)
	s.mu.Lock()
	if s.depths != nil {
		s.depths[src.DLQName] = [2]int64{rep.DLQDepth, rep.DLQInFlight}
	}
	s.mu.Unlock()
	return nil
}

// counterPlan is every counter shard one run reads, in the order read,
// and which shards each reported sum is made of. gauges are the counts of
// what is there (records by state and class), read eventually consistent
// at half the read units: a change a read misses, the next run reads.
// keys are read strongly consistent: the time buckets of the arrivals and
// of the success window, each read by one or two runs only (a change a
// read missed would not be published by a later run), and the counts the
// marks move by (holds, poison by hour), which must never read below a
// mark a fresher read set (ErrMarksAhead).
type counterPlan struct {
	keys, gauges []quarantine.CounterKey
	sum          map[string][]quarantine.CounterKey
	// poisonHours are the hours whose poison counts are read.
	poisonHours []time.Time
}

func (p *counterPlan) add(name string, key quarantine.CounterKey) {
	p.keys, p.sum[name] = append(p.keys, key), append(p.sum[name], key)
}

func (p *counterPlan) gauge(name string, key quarantine.CounterKey) {
	p.gauges, p.sum[name] = append(p.gauges, key), append(p.sum[name], key)
}

func poisonedIn(h time.Time) string { return "poisoned@" + h.Format(time.RFC3339) }

// poisonHours are the hours whose poison counts a run at now reads, the
// newest first: this one and the poisonWindow-1 before it, and back to
// poisonWindow-1 hours before the hour the marks were stored (marked; a
// run after runs that stored none reads back to them), at most
// maxPoisonHours.
func poisonHours(now, marked time.Time) []time.Time {
	last := now.Truncate(time.Hour)
	first := last.Add(-(poisonWindow - 1) * time.Hour)
	if m := marked.Truncate(time.Hour).Add(-(poisonWindow - 1) * time.Hour); !marked.IsZero() && m.Before(first) {
		first = m
	}
	if oldest := last.Add(-(maxPoisonHours - 1) * time.Hour); first.Before(oldest) {
		first = oldest
	}
	var out []time.Time
	for h := last; !h.Before(first); h = h.Add(-time.Hour) {
		out = append(out, h)
	}
	return out
}

// planCounters lists the counters of src a run at now reads: the state
// counters, last minute's arrivals, the holds, the poison of the hours
// poisonHours names (marked: when the marks were stored), and the success
// window's resolved and came-back counts.
func planCounters(src string, now, marked time.Time) *counterPlan {
	p := &counterPlan{sum: map[string][]quarantine.CounterKey{}, poisonHours: poisonHours(now, marked)}
	for _, st := range allStatuses {
		for _, c := range allClasses {
			for shard := range quarantine.CounterShards {
				p.gauge(string(st)+"/"+string(c), quarantine.StateCounterKey(src, st, c, shard))
			}
		}
	}
	lastMinute := now.Truncate(time.Minute).Add(-time.Minute)
	var successHours []time.Time
	for i := range defaultSuccessWindow {
		successHours = append(successHours, now.Truncate(time.Hour).Add(-time.Duration(i)*time.Hour))
	}
	for shard := range quarantine.CounterShards {
		p.add("arrivals", quarantine.BucketCounterKey(src, quarantine.CounterArrivals, lastMinute, shard))
		p.add(quarantine.CounterHeld, quarantine.HeldCounterKey(src, shard))
		for _, h := range p.poisonHours {
			p.add(poisonedIn(h), quarantine.BucketCounterKey(src, quarantine.CounterPoisoned, h, shard))
		}
		for _, h := range successHours {
			for _, kind := range []string{quarantine.CounterResolved, quarantine.CounterCameBack} {
				p.add(kind, quarantine.BucketCounterKey(src, kind, h, shard))
			}
		}
	}
	return p
}

// counts reads every counter this run needs in two batch reads and fills
// the report's counts and success rate.
func (s *Service) counts(ctx context.Context, src *quarantine.Source, now time.Time, rep *Report) error {
	plan := planCounters(src.Name, now, rep.prev.At)
	vals, err := s.Counters.ReadCounters(ctx, plan.keys)
	if err != nil {
		return err
	}
	read := s.Counters.ReadCounters
	if e, ok := s.Counters.(EventualCounters); ok {
		read = e.ReadCountersEventually
	}
	gauges, err := read(ctx, plan.gauges)
	if err != nil {
		return err
	}
	maps.Copy(vals, gauges)
	total := func(name string) int64 {
		var n int64
		for _, k := range plan.sum[name] {
			n += vals[k]
		}
		return n
	}
	for _, st := range allStatuses {
		for _, c := range allClasses {
			rep.Records[string(st)+"/"+string(c)] = total(string(st) + "/" + string(c))
		}
	}
	rep.ArrivalsPerMinute = total("arrivals")
	rep.Poison = total(string(quarantine.StatusParked) + "/" + string(quarantine.ClassPoison))
	rep.IntegrityHolds = total(quarantine.CounterHeld)
	rep.poisoned = map[time.Time]int64{}
	for _, h := range plan.poisonHours {
		rep.poisoned[h] = total(poisonedIn(h))
	}
	if resolved, back := total(quarantine.CounterResolved), total(quarantine.CounterCameBack); resolved+back > 0 {
		rate := 100 * float64(resolved) / float64(resolved+back)
		rep.RedriveSuccessRate = &rate
	}
	return nil
}

// readMarks reads the source's marks. Malformed ones count as none (every
// hold and poison read is new), and the run fails once it has published.
func (s *Service) readMarks(ctx context.Context, rep *Report) error {
	if s.Marks == nil {
		return errors.New("metrics: no mark store")
	}
	m, err := s.Marks.ReadMetricMarks(ctx, rep.Source)
	switch {
	case errors.Is(err, quarantine.ErrMarksMalformed):
		s.Log.ErrorContext(ctx, "metrics marks malformed: every hold and poison read is published as new", "source", rep.Source, "error", quarantine.Clip(err.Error(), 512))
		rep.marksErr, m = err, quarantine.MetricMarks{Rev: m.Rev}
	case err != nil:
		return err
	}
	rep.prev = m
	return nil
}

// newMarks sets what is new beyond the marks read: the holds and the
// poison no run published before (with no marks stored yet, every hold the
// counter holds and all the poison of the hours read), and the marks to
// store once the report is published: when something was new, when the
// marks were malformed or ahead, and at least once an hour (so that the
// next run's poisonHours reach back no further than they must).
func (s *Service) newMarks(ctx context.Context, now time.Time, rep *Report) {
	m := rep.prev
	next := quarantine.MetricMarks{Held: rep.IntegrityHolds, Poisoned: map[time.Time]int64{}, At: now}
	var ahead []string
	switch d := rep.IntegrityHolds - m.Held; {
	case d > 0:
		rep.NewIntegrityHolds = d
	case d < 0:
		rep.NewIntegrityHolds, ahead = 1, append(ahead, fmt.Sprintf("holds %d below %d", rep.IntegrityHolds, m.Held))
	}
	for _, h := range slices.SortedFunc(maps.Keys(rep.poisoned), time.Time.Compare) {
		n := rep.poisoned[h]
		switch d := n - m.Poisoned[h]; {
		case d > 0:
			rep.NewPoison += d
		case d < 0:
			rep.NewPoison++
			ahead = append(ahead, fmt.Sprintf("poison of %s %d below %d", h.Format(time.RFC3339), n, m.Poisoned[h]))
		}
		next.Poisoned[h] = n
	}
	if len(ahead) > 0 {
		err := fmt.Errorf("%w: %s", quarantine.ErrMarksAhead, strings.Join(ahead, "; "))
		s.Log.ErrorContext(ctx, "metrics marks ahead of a counter: counters written behind the ledger, or marks moved ahead (dlqctl verify); the marks come down", "source", rep.Source, "error", err.Error())
		rep.marksErr = errors.Join(rep.marksErr, err)
	}
	if rep.NewIntegrityHolds > 0 || rep.NewPoison > 0 || rep.marksErr != nil || m.Rev == "" || !m.At.Truncate(time.Hour).Equal(now.Truncate(time.Hour)) {
		rep.next = &next
	}
}

// moveMarks stores the marks of a published report. Not stored (another
// run moved them: logged; the write failed or was refused at the very
// revision read: returned), the next run publishes the same holds and
// poison as new again.
func (s *Service) moveMarks(ctx context.Context, rep *Report) error {
	if rep.next == nil {
		return nil
	}
	err := s.Marks.WriteMetricMarks(ctx, rep.Source, rep.prev.Rev, *rep.next)
	if !errors.Is(err, quarantine.ErrMarksMoved) {
		return err
	}
	// Refused at the revision read: moved by another run only if the
	// stored revision is another now (a condition that fails on the very
	// revision read would refuse every run's marks).
	cur, rerr := s.Marks.ReadMetricMarks(ctx, rep.Source)
	if (rerr == nil || errors.Is(rerr, quarantine.ErrMarksMalformed)) && cur.Rev != rep.prev.Rev {
		s.Log.WarnContext(ctx, "metrics marks moved by another run", "source", rep.Source)
		return nil
	}
	return fmt.Errorf("metrics marks refused at the revision read: %w", errors.Join(err, rerr))
}

// dominant finds the signature most open records share, and its share.
func (s *Service) dominant(ctx context.Context, src *quarantine.Source, rep *Report) error {
	open, err := s.Signatures.OpenSignatures(ctx, src.Name)
	if err != nil {
		return err
	}
	for _, sig := range slices.Sorted(maps.Keys(open)) {
		rep.OpenRecords += open[sig]
		if open[sig] > open[rep.DominantSignature] || rep.DominantSignature == "" {
			rep.DominantSignature = sig
		}
	}
	if rep.OpenRecords > 0 {
		rep.DominantSharePct = 100 * float64(open[rep.DominantSignature]) / float64(rep.OpenRecords)
	}
	return nil
}

// oldest measures the age of the oldest QUARANTINED record: the first of
// the source's listing (on the source index, one query of one item per
// shard of the source, whatever the other sources hold).
func (s *Service) oldest(ctx context.Context, src *quarantine.Source, now time.Time, rep *Report) error {
	id, err := quarantine.FirstID(ctx, s.Lister, quarantine.ListQuery{Status: quarantine.StatusQuarantined, Source: src.Name, Limit: 1})
	if err != nil {
		return err
	}
	if id != "" {
		r, err := s.Store.Get(ctx, id)
		if err != nil {
			return err
		}
		rep.OldestAgeSeconds = now.Sub(r.FirstSeen.Time).Seconds()
	}
	return nil
}

func (s *Service) queueURL(ctx context.Context, src *quarantine.Source) (string, error) {
	s.mu.Lock()
	u, ok := s.urls[src.DLQName]
	s.mu.Unlock()
	if ok {
		return u, nil
	}
	// Looked up without the lock: the sources measured at once never wait
	// behind one another's call.
	out, err := s.SQS.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(src.DLQName)})
	if err != nil {
		return "", fmt.Errorf("dlq %s: %w", src.DLQName, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.urls == nil {
		s.urls = map[string]string{}
	}
	s.urls[src.DLQName] = aws.ToString(out.QueueUrl)
	return s.urls[src.DLQName], nil
}

// publishDepth publishes a shared DLQ's depth, read this run, under its
// own name as the Source.
func (s *Service) publishDepth(ctx context.Context, dlq string) error {
	s.mu.Lock()
	d, read := s.depths[dlq]
	s.mu.Unlock()
	if !read {
		// No source of it could read it this run (that source's run
		// failed): a depth of 0 would hide DLQDepthAlarm's condition.
		return nil
	}
	src := cwmetrics.Dim(DimSource, dlq)
	data := []cwtypes.MetricDatum{
		cwmetrics.Datum(MetricDLQDepth, float64(d[0]), cwtypes.StandardUnitCount, src),
		cwmetrics.Datum(MetricDLQInFlight, float64(d[1]), cwtypes.StandardUnitCount, src),
	}
	if err := cwmetrics.Put(ctx, s.CloudWatch, s.namespace(), data); err != nil {
		return fmt.Errorf("publish metrics: %w", err)
	}
	return nil
}

func (s *Service) namespace() string {
	if s.Namespace == "" {
		return emf.Namespace
	}
	return s.Namespace
}

// publish publishes rep under its source, with the DLQ's depth when the
// source has its DLQ alone (depth); of a partial report (rep.partial),
// what the counters say only.
func (s *Service) publish(ctx context.Context, rep *Report, depth bool) error {
	ns := s.namespace()
	src := cwmetrics.Dim(DimSource, rep.Source)
	datum := func(name string, v float64, unit cwtypes.StandardUnit, dims ...cwtypes.Dimension) cwtypes.MetricDatum {
		return cwmetrics.Datum(name, v, unit, append([]cwtypes.Dimension{src}, dims...)...)
	}
	var data []cwtypes.MetricDatum
	if rep.partial == nil { // what the DLQ and the listings say: read
		if depth {
			data = append(data,
				datum(MetricDLQDepth, float64(rep.DLQDepth), cwtypes.StandardUnitCount),
				datum(MetricDLQInFlight, float64(rep.DLQInFlight), cwtypes.StandardUnitCount))
		}
		data = append(data,
			datum(MetricOldestAge, rep.OldestAgeSeconds, cwtypes.StandardUnitSeconds),
			datum(MetricDominantShare, rep.DominantSharePct, cwtypes.StandardUnitPercent))
	}
	data = append(data,
		datum(MetricArrivals, float64(rep.ArrivalsPerMinute), cwtypes.StandardUnitCount),
		datum(MetricPoison, float64(rep.Poison), cwtypes.StandardUnitCount),
		datum(MetricNewPoison, float64(rep.NewPoison), cwtypes.StandardUnitCount),
		datum(MetricIntegrityHolds, float64(rep.IntegrityHolds), cwtypes.StandardUnitCount),
		datum(MetricNewIntegrityHolds, float64(rep.NewIntegrityHolds), cwtypes.StandardUnitCount))
	if rep.RedriveSuccessRate != nil {
		data = append(data, datum(MetricSuccessRate, *rep.RedriveSuccessRate, cwtypes.StandardUnitPercent))
	}
	for _, st := range allStatuses {
		for _, c := range allClasses {
			data = append(data, datum(MetricRecords, float64(rep.Records[string(st)+"/"+string(c)]), cwtypes.StandardUnitCount,
				cwmetrics.Dim(DimStatus, string(st)), cwmetrics.Dim(DimClass, string(c))))
		}
	}
	if err := cwmetrics.Put(ctx, s.CloudWatch, ns, data); err != nil {
		return fmt.Errorf("publish metrics: %w", err)
	}
	return nil
}

package demo

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"log/slog"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/dlqquarantine/dlqq/shared/adapter/dynamostore"
	"github.com/dlqquarantine/dlqq/shared/adapter/s3store"
	"github.com/dlqquarantine/dlqq/shared/dev/embedded"
	"github.com/dlqquarantine/dlqq/shared/dev/faults"
	"github.com/dlqquarantine/dlqq/shared/dev/localrunner"
	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
	"github.com/dlqquarantine/dlqq/shared/runtime/awsclients"
	"github.com/dlqquarantine/dlqq/shared/usecase/redrive"
	"github.com/dlqquarantine/dlqq/shared/usecase/sweeper"
)

// SoakOptions size the soak.
type SoakOptions struct {
	Seed uint64
	// Messages sent to the source queue (default 10,000).
	Messages int
	// IngestConcurrency is how many ingest invocations run at once (default 4).
	IngestConcurrency int
	// FaultRate is the share of DynamoDB and S3 requests, and of
	// SendMessageBatch entries, that fail (default 0.05).
	FaultRate float64
	// LostRate is the share of DynamoDB writes, S3 PutObjects and
	// SendMessageBatch calls that are applied and then answered with a 500
	// or a timeout in a live process, which the SDK retries (default 0.03;
	// negative: none).
	LostRate float64
	// CrashShare is the share of redrive and sweeper invocations that crash
	// at a random request (default 0.5).
	CrashShare float64
	// PerInvocation bounds the records one redrive invocation replays
	// (default 500; a sweeper invocation archives a twentieth of it), so
	// the work spreads over many processes that may crash, as Lambda's
	// timeout spreads a large replay.
	PerInvocation int
	// MaxBackoff caps the backoff of the SDK retryer and of redrive's
	// retries of failed batch entries (0: the defaults, as deployed).
	MaxBackoff time.Duration
	// FailFirst makes the first request of each faulted kind fail, so a
	// short run meets every kind of fault.
	FailFirst bool
	// Timeout bounds the whole run (default 45 minutes).
	Timeout time.Duration
	// Log receives the functions' JSON logs (discarded when nil).
	Log io.Writer
}

func (o SoakOptions) withDefaults() SoakOptions {
	if o.Messages <= 0 {
		o.Messages = 10000
	}
	if o.IngestConcurrency <= 0 {
		o.IngestConcurrency = 4
	}
	if o.FaultRate == 0 {
		o.FaultRate = 0.05
	}
	if o.LostRate == 0 {
		o.LostRate = 0.03
	}
	if o.CrashShare == 0 {
		o.CrashShare = 0.5
	}
	if o.PerInvocation <= 0 {
		o.PerInvocation = 500
	}
	if o.Timeout == 0 {
		o.Timeout = 45 * time.Minute
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	return o
}

// SoakStackParams are the demo's parameters with a short redrive lease, so
// the claims of crashed redrive runs expire within the soak.
var SoakStackParams = func() map[string]any {
	p := maps.Clone(StackParams)
	p["RedriveLeaseSeconds"] = 3
	return p
}()

// SoakReport is what the soak found. Each list names what broke an
// invariant; all must be empty.
type SoakReport struct {
	Sent, DeadLettered, Quarantined int
	Ingest                          localrunner.Stats
	Final                           map[quarantine.Status]int

	// Lost are dead-lettered messages without a record; Duplicates are
	// records that no dead-lettered message accounts for.
	Lost, Duplicates []string
	// SealFailures are records whose seal or verbatim body fails.
	SealFailures []string
	// WrongState are records that ended where their event should not.
	WrongState []string
	// DuplicateSends counts replays sent more than once for one round;
	// Unexplained are those whose record's sealed history does not explain
	// it (an expired-lease takeover of that round, or a send of that round
	// recorded as possibly sent), and Overconsumed events consumed more
	// often than their explained duplicates allow.
	DuplicateSends int
	Unexplained    []string
	Overconsumed   []string
	// ArchiveObjects is how many objects the archive bucket holds;
	// MultiVersion are keys with more than one version, BadStubs archived
	// records whose object does not verify.
	ArchiveObjects int
	MultiVersion   []string
	BadStubs       []string
	// CounterDrift are metrics counters that differ from a recount.
	CounterDrift []string

	// Faults injected, by kind, and AWS requests made by the functions.
	Faults map[string]int64
	Calls  map[string]int64
	// Invocations and crashes of redrive (runs and settles) and sweeper.
	Invocations, Crashes map[string]int
	CrashPoints          []string
	// Errors are invocations that failed without a crash (retries spent).
	Errors         map[string]int
	MetricsRetries int
	// Phases are the wall times of the soak's phases.
	Phases  []string
	Elapsed time.Duration
}

// OK reports whether every invariant held.
func (r *SoakReport) OK() bool {
	return len(r.Lost)+len(r.Duplicates)+len(r.SealFailures)+len(r.WrongState)+len(r.Unexplained)+len(r.Overconsumed)+
		len(r.MultiVersion)+len(r.BadStubs)+len(r.CounterDrift) == 0 && r.Quarantined == r.DeadLettered
}

// soak is one soak run.
type soak struct {
	st    *embedded.Stack
	o     SoakOptions
	fns   *localrunner.Functions
	inj   *faults.Injector
	cfg   aws.Config
	base  aws.HTTPClient
	rngs  map[string]*rand.Rand
	rep   *SoakReport
	mu    sync.Mutex
	spans map[string]int64
	log   *slog.Logger
}

// Soak sends o.Messages through the whole pipeline on st while injecting
// faults into every function's AWS clients and crashing redrive and sweeper
// processes, then checks that nothing was lost, duplicated or altered.
func Soak(ctx context.Context, st *embedded.Stack, o SoakOptions) (*SoakReport, error) {
	start := time.Now()
	o = o.withDefaults()
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	logw := &syncWriter{w: o.Log}
	s := &soak{
		st: st, o: o, inj: faults.New(o.FaultRate, o.Seed), cfg: st.AWS.Copy(), base: st.AWS.HTTPClient,
		rngs: map[string]*rand.Rand{}, spans: map[string]int64{}, log: slog.New(slog.NewJSONHandler(logw, nil)),
		rep: &SoakReport{Final: map[quarantine.Status]int{}, Invocations: map[string]int{}, Crashes: map[string]int{}, Errors: map[string]int{}},
	}
	if s.base == nil {
		s.base = awshttp.NewBuildableClient()
	}
	s.inj.FailFirst = o.FailFirst
	s.inj.LostRate = max(o.LostRate, 0)
	s.cfg.APIOptions = append(slices.Clone(s.cfg.APIOptions), s.inj.APIOption)
	if o.MaxBackoff > 0 {
		s.cfg.Retryer = func() aws.Retryer {
			return retry.NewStandard(func(so *retry.StandardOptions) { so.MaxBackoff = o.MaxBackoff })
		}
	}
	s.cfg.HTTPClient = nil
	var err error
	if s.fns, err = localrunner.NewFunctions(st, s.clients(s.inj.HTTPClient(s.base)), s.log, logw); err != nil {
		return nil, err
	}
	s.fns.Mapping.Concurrency = o.IngestConcurrency
	poller := &localrunner.Poller{SQS: st.Clients.SQS, Mapping: s.fns.Mapping, Handler: s.fns.Ingest.Handle, Log: s.log}
	pollCtx, stopPolling := context.WithCancel(ctx)
	var pollers sync.WaitGroup
	pollers.Add(1)
	go func() { defer pollers.Done(); _ = poller.Run(pollCtx) }()
	defer func() { stopPolling(); pollers.Wait() }()

	// Phase 1: two facilities' systems are down; malformed events are
	// rejected and recalled lots dead-lettered. Ingest quarantines all of
	// it under DynamoDB and S3 faults.
	gen := generate(o.Seed, o.Messages, 2)
	rep := s.rep
	rep.Sent = len(gen)
	c, err := deadLetter(ctx, st, gen)
	if err != nil {
		return nil, err
	}
	rep.DeadLettered = c.deadLettered
	first := &Report{ByClass: map[quarantine.Class]int{}, BySignature: map[string]int{}}
	if err := verify(ctx, st, s.fns.IngestConfig, gen, first); err != nil {
		return nil, err
	}
	rep.Quarantined = len(first.Records)
	for _, l := range []struct {
		dst *[]string
		src []string
	}{{&rep.Lost, first.Lost}, {&rep.Duplicates, first.Unexpected}, {&rep.SealFailures, first.SealFailures}} {
		for _, x := range l.src {
			*l.dst = append(*l.dst, "after ingest: "+x)
		}
	}
	phase := func(name string) {
		rep.Phases = append(rep.Phases, fmt.Sprintf("%s %s", name, time.Since(start).Round(time.Millisecond)))
	}
	phase("quarantined by")
	// Until a whole run has shown its size, crash points spread over an
	// estimate of it: a few requests per record.
	s.spans["redrive"], s.spans["settle"] = int64(4*o.PerInvocation), int64(2*o.PerInvocation)
	s.spans["sweeper"] = int64(8 * s.sweepPerRun())

	// Phase 2: the outage clears; redrive replays the cleared reasons until
	// nothing is left to replay, its processes crashing at random requests.
	c.outage.Store(false)
	if err := s.redriveUntilDone(ctx, c); err != nil {
		return nil, err
	}
	stopPolling()
	pollers.Wait()
	rep.Ingest = poller.Stats()
	phase("redriven by")

	// Phase 3: the sweeper archives the parked records, crashing too.
	if err := s.sweepUntilDone(ctx); err != nil {
		return nil, err
	}
	phase("archived by")
	// Phase 4: metrics, under the same faults, until one run gets through.
	for {
		if _, err := s.fns.Metrics.Run(ctx); err == nil {
			break
		} else if ctx.Err() != nil {
			return nil, fmt.Errorf("metrics: %w", err)
		}
		rep.MetricsRetries++
	}
	rep.Faults, rep.Calls = s.inj.Counts(), s.inj.Calls()
	if err := s.check(ctx, gen, c); err != nil {
		return nil, err
	}
	rep.Elapsed = time.Since(start)
	return rep, nil
}

func (s *soak) clients(h aws.HTTPClient) *awsclients.Clients {
	return awsclients.New(s.cfg, awsclients.Options{Local: true, HTTPClient: h})
}

// invoke runs one process of a function on its own faulty network. For
// CrashShare of invocations the process dies at a random request, chosen
// over the span of requests its last whole invocation made; the request
// that kills it reaches AWS or not at random.
func (s *soak) invoke(ctx context.Context, name string, run func(context.Context, *awsclients.Clients) error) (crashed bool, err error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var at int64
	s.mu.Lock()
	span := max(s.spans[name], 20)
	// One generator per function: its k-th process crashes or not
	// whatever the interleaving of the others.
	rng := s.rngs[name]
	if rng == nil {
		h := fnv.New64a()
		h.Write([]byte(name))
		rng = rand.New(rand.NewPCG(s.o.Seed, h.Sum64()))
		s.rngs[name] = rng
	}
	if rng.Float64() < s.o.CrashShare {
		at = 1 + rng.Int64N(span)
	}
	applied := rng.IntN(2) == 0
	s.mu.Unlock()
	proc := faults.NewCrash(s.inj.HTTPClient(s.base), at, applied, cancel)
	err = run(ctx, s.clients(proc))
	s.rep.Invocations[name]++
	if ok, point := proc.Crashed(); ok {
		s.rep.Crashes[name]++
		s.rep.CrashPoints = append(s.rep.CrashPoints, fmt.Sprintf("%s at request %d: %s", name, at, point))
		return true, nil
	}
	s.mu.Lock()
	s.spans[name] = proc.Requests()
	s.mu.Unlock()
	if err != nil {
		s.rep.Errors[name]++
		s.log.Warn("soak invocation failed", "function", name, "error", quarantine.ErrorKind(err))
	}
	return false, err
}

var soakCleared = []string{"consumer|retries exhausted|v#", "allocation|lot under recall|v#"}

// redriveUntilDone alternates redrive runs, the consumer, ingest of what
// comes back, and settle runs, until a whole run finds nothing to replay and
// no record is in flight. Claims left by crashed runs are retaken once their
// lease expires.
func (s *soak) redriveUntilDone(ctx context.Context, c *consumer) error {
	for {
		if ctx.Err() != nil {
			return fmt.Errorf("redrive did not finish: %w", ctx.Err())
		}
		var rr *redrive.Report
		crashed, err := s.invoke(ctx, "redrive", func(ctx context.Context, cl *awsclients.Clients) error {
			svc, err := s.fns.NewRedrive(cl, s.redriveConfig)
			if err != nil {
				return err
			}
			rr, err = svc.Run(ctx, redrive.Request{Source: s.fns.Source, RequestedBy: "soak", ClearedReasons: soakCleared,
				MaxMessages: s.o.PerInvocation, Approve: true})
			return err
		})
		if err := c.run(ctx); err != nil {
			return err
		}
		if err := waitEmpty(ctx, s.st.Clients.SQS, s.st.QueueURLs["DeadLetterQueue"]); err != nil {
			return err
		}
		time.Sleep(s.fns.Settle + 100*time.Millisecond)
		settleCrashed, settleErr := s.invoke(ctx, "settle", func(ctx context.Context, cl *awsclients.Clients) error {
			svc, err := s.fns.NewRedrive(cl, s.redriveConfig)
			if err != nil {
				return err
			}
			_, err = svc.Run(ctx, redrive.Request{Action: redrive.ActionSettle, Source: s.fns.Source, RequestedBy: "schedule:settle"})
			return err
		})
		if crashed || err != nil || settleCrashed || settleErr != nil ||
			rr.Redriven.Count+rr.Parked.Count+rr.Failed.Count+rr.Held.Count+rr.Remaining > 0 {
			continue
		}
		busy, err := s.inFlight(ctx)
		if err != nil {
			return err
		}
		if !busy {
			return nil
		}
		time.Sleep(s.fns.Lease) // crashed runs' claims hold until their lease expires
	}
}

// redriveConfig applies the soak's backoff cap to redrive's own retries of
// failed batch entries too.
func (s *soak) redriveConfig(c *redrive.Config) {
	if s.o.MaxBackoff > 0 {
		c.MaxBackoff = s.o.MaxBackoff
	}
}

func (s *soak) sweepPerRun() int { return max(s.o.PerInvocation/20, 1) }

// inFlight reports whether any record is REDRIVING or REDRIVEN.
func (s *soak) inFlight(ctx context.Context) (bool, error) {
	l := dynamostore.NewLister(s.st.Clients.DynamoDB, s.fns.IngestConfig.TableName)
	for _, st := range []quarantine.Status{quarantine.StatusRedriving, quarantine.StatusRedriven} {
		page, err := l.List(ctx, quarantine.ListQuery{Status: st, Source: s.fns.Source, Limit: 1})
		if err != nil {
			return false, err
		}
		if len(page.IDs) > 0 {
			return true, nil
		}
	}
	return false, nil
}

// sweepUntilDone runs sweeper processes until a whole run archives nothing,
// fails nothing and no record is left PARKED.
func (s *soak) sweepUntilDone(ctx context.Context) error {
	l := dynamostore.NewLister(s.st.Clients.DynamoDB, s.fns.IngestConfig.TableName)
	for {
		if ctx.Err() != nil {
			return fmt.Errorf("sweeper did not finish: %w", ctx.Err())
		}
		var sr *sweeper.Report
		crashed, err := s.invoke(ctx, "sweeper", func(ctx context.Context, cl *awsclients.Clients) error {
			sw, err := s.fns.NewSweeper(cl, func(c *sweeper.Config) { c.MaxPerRun = s.sweepPerRun() })
			if err != nil {
				return err
			}
			sr, err = sw.Run(ctx)
			return err
		})
		if crashed || err != nil || len(sr.Archived) > 0 || sr.Failed > 0 || sr.Remaining > 0 {
			continue
		}
		page, err := l.List(ctx, quarantine.ListQuery{Status: quarantine.StatusParked, Source: s.fns.Source, Limit: 1})
		if err != nil {
			return err
		}
		if len(page.IDs) == 0 {
			return nil
		}
	}
}

// check reads everything back (on clean clients) and fills the report's
// invariant lists.
func (s *soak) check(ctx context.Context, gen []Generated, c *consumer) error {
	rep, fns := s.rep, s.fns
	records, err := scanRecords(ctx, s.st, fns.IngestConfig.TableName, fns.Source)
	if err != nil {
		return err
	}
	payloads := s3store.New(s.st.Clients.S3, fns.IngestConfig.PayloadBucket, "")
	src := quarantine.Source{Name: fns.Source, ARN: fns.IngestConfig.Sources[fns.Source].ARN, IdempotencyPointer: fns.IngestConfig.Sources[fns.Source].IdempotencyPointer}
	expected := map[string]Generated{}
	for _, g := range gen {
		if g.Kind == Good {
			if n := c.consumedCount(g.ID); n != 1 {
				rep.Overconsumed = append(rep.Overconsumed, fmt.Sprintf("%s (never dead-lettered) consumed %d times", g.ID, n))
			}
			continue
		}
		key, _ := quarantine.DeriveKey(&src, quarantine.DefaultKeyAttribute, nil, src.Check([]byte(g.Body)).Doc, src.ARN, []byte(g.Body))
		expected[quarantine.RecordID(src.Name, key)] = g
	}
	// Duplicate sends, and whether the record's history explains each.
	dupsOf := map[string]int{}
	for _, k := range slices.SortedFunc(maps.Keys(c.sends), func(a, b replay) int { return strings.Compare(a.id+"|"+a.round, b.id+"|"+b.round) }) {
		n := len(c.sends[k])
		if n < 2 {
			continue
		}
		rep.DuplicateSends += n - 1
		if r := records[k.id]; r == nil || !slices.ContainsFunc(r.Attempts, func(a quarantine.Attempt) bool { return explainsDuplicate(a, k.round) }) {
			rep.Unexplained = append(rep.Unexplained, fmt.Sprintf("%s round %s sent %d times; its history has neither a lease takeover nor a possible send of that round", k.id, k.round, n))
			continue
		}
		dupsOf[k.id] += n - 1
	}
	recount := map[string]int64{}
	for id, g := range expected {
		r, ok := records[id]
		if !ok {
			rep.Lost = append(rep.Lost, id)
			continue
		}
		rep.Final[r.Status]++
		wrong := func(format string, a ...any) {
			rep.WrongState = append(rep.WrongState, id+": "+fmt.Sprintf(format, a...))
		}
		switch g.Kind {
		case Outage:
			if r.Status != quarantine.StatusResolved || r.RedriveCount < 1 || r.RedriveCount > r.RedriveCap {
				wrong("%s after %d redrives, want RESOLVED within the cap %d", r.Status, r.RedriveCount, r.RedriveCap)
			}
			if n := c.consumedCount(g.ID); n < 1 || n > 1+dupsOf[id] {
				rep.Overconsumed = append(rep.Overconsumed, fmt.Sprintf("%s consumed %d times; %d explained duplicate sends", g.ID, n, dupsOf[id]))
			}
		case Recalled:
			if r.Status != quarantine.StatusArchived || r.RedriveCount != fns.RedriveCap {
				wrong("%s after %d redrives, want ARCHIVED at the cap %d", r.Status, r.RedriveCount, fns.RedriveCap)
			}
		case Malformed:
			if r.Status != quarantine.StatusQuarantined || r.RedriveCount != 0 || r.FailureClass != quarantine.ClassValidation {
				wrong("%s class %s after %d redrives: malformed events are never replayed", r.Status, r.FailureClass, r.RedriveCount)
			}
		}
	}
	for _, id := range slices.Sorted(maps.Keys(records)) {
		r := records[id]
		g, ok := expected[id]
		if !ok {
			rep.Duplicates = append(rep.Duplicates, id)
		}
		recount[string(r.Status)+"/"+string(r.FailureClass)]++
		if err := quarantine.Verify(r); err != nil {
			rep.SealFailures = append(rep.SealFailures, id+": "+err.Error())
			continue
		}
		if r.Status == quarantine.StatusArchived {
			if err := s.checkArchived(ctx, r, g.Body); err != nil {
				rep.BadStubs = append(rep.BadStubs, id+": "+err.Error())
			}
			continue
		}
		if body, err := quarantine.LoadBody(ctx, payloads, r); ok && (err != nil || string(body) != g.Body) {
			rep.SealFailures = append(rep.SealFailures, id+": body not verbatim")
		}
	}
	// The metrics counters against the recount.
	store := dynamostore.New(s.st.Clients.DynamoDB, fns.IngestConfig.TableName)
	for _, stt := range []quarantine.Status{quarantine.StatusQuarantined, quarantine.StatusRedriving, quarantine.StatusRedriven,
		quarantine.StatusResolved, quarantine.StatusParked, quarantine.StatusArchived} {
		for _, cl := range []quarantine.Class{quarantine.ClassValidation, quarantine.ClassExhausted, quarantine.ClassPoison} {
			var keys []quarantine.CounterKey
			for shard := range quarantine.CounterShards {
				keys = append(keys, quarantine.StateCounterKey(fns.Source, stt, cl, shard))
			}
			got, err := store.ReadCounters(ctx, keys)
			if err != nil {
				return err
			}
			var n int64
			for _, v := range got {
				n += v
			}
			if want := recount[string(stt)+"/"+string(cl)]; n != want {
				rep.CounterDrift = append(rep.CounterDrift, fmt.Sprintf("%s/%s: counter %d, recount %d", stt, cl, n, want))
			}
		}
	}
	// Every archive object: one version per key.
	versions := map[string]int{}
	p := s3.NewListObjectVersionsPaginator(s.st.Clients.S3, &s3.ListObjectVersionsInput{Bucket: aws.String(fns.ArchiveBucket)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return fmt.Errorf("list archive versions: %w", err)
		}
		for _, v := range page.Versions {
			versions[aws.ToString(v.Key)]++
		}
	}
	rep.ArchiveObjects = len(versions)
	for _, k := range slices.Sorted(maps.Keys(versions)) {
		if versions[k] > 1 {
			rep.MultiVersion = append(rep.MultiVersion, fmt.Sprintf("%s: %d versions", k, versions[k]))
		}
	}
	return nil
}

// explainsDuplicate reports whether a history entry explains a second send
// of round: a takeover of the round's expired lease ("lease expired; round
// 2 reclaimed, …"), or a send of the round whose outcome was ambiguous
// ("send outcome unknown (round 2): possibly sent", "sent (round 2); an
// earlier try may also have been enqueued, possibly sent twice").
func explainsDuplicate(a quarantine.Attempt, round string) bool {
	return strings.HasPrefix(a.Reason, "lease expired; round "+round+" reclaimed") ||
		(strings.Contains(a.Reason, "possibly sent") && strings.Contains(a.Reason, "(round "+round+")"))
}

// checkArchived verifies an ARCHIVED stub against its object and that the
// object holds the original body verbatim.
func (s *soak) checkArchived(ctx context.Context, stub *quarantine.Record, body string) error {
	problems, err := s3store.VerifyStub(ctx, s.st.Clients.S3, stub)
	if err != nil {
		return err
	}
	if len(problems) > 0 {
		return fmt.Errorf("%v", problems)
	}
	env, err := s3store.ReadArchive(ctx, s.st.Clients.S3, stub.Archive)
	if err != nil {
		return err
	}
	got, err := env.Body()
	if err != nil {
		return err
	}
	if string(got) != body {
		return errors.New("archived body is not the original")
	}
	return nil
}

// Print writes the soak's table.
func (r *SoakReport) Print(w io.Writer) {
	fmt.Fprintf(w, "\nDLQ Quarantine soak\n===================\n")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "messages sent\t%d\n", r.Sent)
	fmt.Fprintf(tw, "dead-lettered\t%d\n", r.DeadLettered)
	fmt.Fprintf(tw, "records quarantined\t%d\n", r.Quarantined)
	fmt.Fprintf(tw, "ingest\t%d invocations, %d received, %d stored, %d batch item failures\n", r.Ingest.Invocations, r.Ingest.Received, r.Ingest.Deleted, r.Ingest.Failed)
	for _, st := range slices.Sorted(maps.Keys(r.Final)) {
		fmt.Fprintf(tw, "final %s\t%d\n", st, r.Final[st])
	}
	tw.Flush()
	fmt.Fprintf(w, "\nfaults injected:\n")
	kinds := slices.Collect(maps.Keys(r.Faults))
	for _, k := range faults.LostKinds { // listed even when none happened
		if _, ok := r.Faults[k]; !ok {
			kinds = append(kinds, k)
		}
	}
	slices.Sort(kinds)
	for _, k := range kinds {
		fmt.Fprintf(tw, "  %s\t%d\n", k, r.Faults[k])
	}
	for _, k := range slices.Sorted(maps.Keys(r.Invocations)) {
		fmt.Fprintf(tw, "  %s processes\t%d, %d crashed, %d failed without crashing\n", k, r.Invocations[k], r.Crashes[k], r.Errors[k])
	}
	fmt.Fprintf(tw, "  metrics runs retried\t%d\n", r.MetricsRetries)
	tw.Flush()
	fmt.Fprintf(w, "AWS requests by the functions:")
	for _, k := range slices.Sorted(maps.Keys(r.Calls)) {
		fmt.Fprintf(w, " %s %d", k, r.Calls[k])
	}
	fmt.Fprintf(w, "\ncrash points (first 8):\n")
	for _, p := range r.CrashPoints[:min(8, len(r.CrashPoints))] {
		fmt.Fprintf(w, "  %s\n", p)
	}
	fmt.Fprintf(w, "\nchecks:\n")
	row := func(ok bool, what string, n int) {
		mark := "ok  "
		if !ok {
			mark = "FAIL"
		}
		fmt.Fprintf(tw, "  [%s]\t%s\t%d\n", mark, what, n)
	}
	row(len(r.Lost) == 0, "lost (dead-lettered, no record)", len(r.Lost))
	row(len(r.Duplicates) == 0 && r.Quarantined == r.DeadLettered, "duplicate records", len(r.Duplicates))
	row(len(r.SealFailures) == 0, "seals or bodies that fail to verify", len(r.SealFailures))
	row(len(r.Unexplained) == 0, "duplicate sends", r.DuplicateSends)
	row(len(r.Unexplained) == 0, "  of which not explained by a lease takeover or a possible send", len(r.Unexplained))
	row(len(r.Overconsumed) == 0, "events consumed more often than explained", len(r.Overconsumed))
	row(len(r.WrongState) == 0, "records in the wrong final state", len(r.WrongState))
	row(len(r.MultiVersion) == 0, fmt.Sprintf("archive objects with more than one version (of %d)", r.ArchiveObjects), len(r.MultiVersion))
	row(len(r.BadStubs) == 0, "archived records that fail verification", len(r.BadStubs))
	row(len(r.CounterDrift) == 0, "metrics counters that differ from a recount", len(r.CounterDrift))
	tw.Flush()
	for _, l := range [][]string{r.Lost, r.Duplicates, r.SealFailures, r.Unexplained, r.Overconsumed, r.WrongState, r.MultiVersion, r.BadStubs, r.CounterDrift} {
		for _, x := range l[:min(len(l), 5)] {
			fmt.Fprintf(w, "    %s\n", x)
		}
	}
	fmt.Fprintf(w, "\nfinished in %s (%s)\n", r.Elapsed.Round(time.Millisecond), strings.Join(r.Phases, ", "))
}

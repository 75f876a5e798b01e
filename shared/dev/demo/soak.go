package demo

import (
	"context"
	"fmt"
	"hash/fnv"
	"io"
	"log/slog"
	"maps"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"

	"github.com/dlqquarantine/dlqq/shared/adapter/dynamostore"
	"github.com/dlqquarantine/dlqq/shared/dev/embedded"
	"github.com/dlqquarantine/dlqq/shared/dev/faults"
	"github.com/dlqquarantine/dlqq/shared/dev/localrunner"
	"github.com/dlqquarantine/dlqq/shared/dev/syncio"
	dl "github.com/dlqquarantine/dlqq/shared/domain/ledger"
	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
	"github.com/dlqquarantine/dlqq/shared/runtime/awsclients"
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
	// CrashShare is the share of redrive, sweeper, ledger and digest
	// invocations that crash at a random request (default 0.5); the first
	// ledger and digest processes crash at chosen requests (soakAims).
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
	// DigestEvery is the ledger's digest schedule (default 1 s; deployed,
	// 5 minutes).
	DigestEvery time.Duration
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
	if o.DigestEvery <= 0 {
		o.DigestEvery = time.Second
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
	// CounterDrift are metrics counters that differ from a recount of the
	// table (state and open counters); CountedDrift counters that differ
	// from the deltas of every change in the stream, each counted once.
	CounterDrift, CountedDrift []string
	// Counters and CountedKeys are how many counter shards the two
	// recounts compared.
	Counters, CountedKeys int

	// The ledger. StreamChanges are the record and policy changes the
	// table's stream holds (read on its own, from its start), of which
	// VersionChanges wrote a new record version; VersionsSum is the sum of
	// the records' versions (each version is one write), VersionDrift
	// what disagrees between the two.
	StreamChanges, VersionChanges, VersionsSum int
	VersionDrift                               []string
	// Ledgered are the entries of every segment, in Segments objects;
	// LedgerMissing are stream changes no segment holds, LedgerDuplicates
	// changes ledgered more than once, LedgerExtra entries the stream
	// never held.
	Ledgered, Segments                           int
	LedgerMissing, LedgerDuplicates, LedgerExtra []string
	// Digests are the digest objects; Unanchored changes no digest
	// anchors; Lags the anchoring lags (change time to the time of the
	// first digest whose heads cover it), sorted.
	Digests    int
	Unanchored []string
	Lags       []time.Duration
	// LedgerProblems are what the pure ledger.Verify names over the table
	// and the bucket.
	LedgerProblems []string
	// LedgerBatches are the mapping's deliveries, LedgerRetried those that
	// failed (crashed, or a partial batch response) and came again.
	LedgerBatches, LedgerRetried int
	// DigestRuns are the digest processes that finished; DigestsWritten
	// and DigestsAdopted what they did; FinalDigestLag the lag the last
	// one reported with everything anchored.
	DigestRuns, DigestsWritten, DigestsAdopted int
	FinalDigestLag                             float64
	// AimedCrashes are the crashes aimed at a chosen request.
	AimedCrashes []string
	// Verified is what ledger.Verify found.
	Verified dl.Result

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
	// lister reads the status index (on clean clients) to see whether
	// anything is left in flight or parked.
	lister quarantine.Lister
	// ledgerPoller is the ledger's stream mapping; aims the crash points
	// left to meet, by function.
	ledgerPoller *localrunner.StreamPoller
	aims         map[string][]aim
}

// Soak sends o.Messages through the whole pipeline on st while injecting
// faults into every function's AWS clients and crashing redrive, sweeper
// and ledger processes, then checks that nothing was lost, duplicated or
// altered, and that the ledger holds every change once, anchored, with
// exact counters.
func Soak(ctx context.Context, st *embedded.Stack, o SoakOptions) (*SoakReport, error) {
	start := time.Now()
	o = o.withDefaults()
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	logw := syncio.NewWriter(o.Log)
	s := &soak{
		st: st, o: o, inj: faults.New(o.FaultRate, o.Seed), cfg: st.AWS.Copy(), base: st.AWS.HTTPClient,
		rngs: map[string]*rand.Rand{}, spans: map[string]int64{}, log: slog.New(slog.NewJSONHandler(logw, nil)),
		aims: map[string][]aim{},
		rep:  &SoakReport{Final: map[quarantine.Status]int{}, Invocations: map[string]int{}, Crashes: map[string]int{}, Errors: map[string]int{}},
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
	s.lister = dynamostore.NewLister(st.Clients.DynamoDB, s.fns.IngestConfig.TableName)
	for k, v := range soakAims {
		s.aims[k] = slices.Clone(v)
	}
	// The ledger follows the table's stream from the first write on.
	stopLedger := s.startLedger(ctx)
	defer stopLedger()
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
	if err := verify(ctx, st, s.fns.IngestConfig, s.fns.Source, gen, first); err != nil {
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
	// The ledger's and the digest's processes already run (invoke reads and
	// writes spans under mu).
	sweepSpan := int64(8 * s.sweepPerRun())
	s.mu.Lock()
	s.spans["redrive"], s.spans["settle"] = int64(4*o.PerInvocation), int64(2*o.PerInvocation)
	s.spans["sweeper"] = sweepSpan
	s.mu.Unlock()

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
	// Phase 4: the ledger catches up with the stream and a digest anchors
	// it all; then metrics, under the same faults, until one run gets
	// through, on the ledger's counters.
	stopLedger()
	if err := s.catchUpLedger(ctx); err != nil {
		return nil, fmt.Errorf("ledger: %w", err)
	}
	delivered := s.pollerStats()
	rep.LedgerBatches, rep.LedgerRetried = delivered.Invocations, delivered.Failed
	phase("ledgered and anchored by")
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
	var proc process = faults.NewCrash(s.inj.HTTPClient(s.base), at, applied, cancel)
	aimed := len(s.aims[name]) > 0
	if aimed {
		// The function's next aimed crash point comes first; a process
		// that does not reach it leaves it to the next one.
		proc = &aimedCrash{base: s.inj.HTTPClient(s.base), aim: s.aims[name][0], cancel: cancel}
	}
	s.mu.Unlock()
	err = run(ctx, s.clients(proc))
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rep.Invocations[name]++
	if ok, point := proc.Crashed(); ok {
		s.rep.Crashes[name]++
		if aimed {
			s.aims[name] = s.aims[name][1:]
			s.rep.AimedCrashes = append(s.rep.AimedCrashes, name+" "+point)
		} else {
			s.rep.CrashPoints = append(s.rep.CrashPoints, fmt.Sprintf("%s at request %d: %s", name, at, point))
		}
		return true, nil
	}
	s.spans[name] = proc.Requests()
	if err != nil {
		s.rep.Errors[name]++
		s.log.Warn("soak invocation failed", "function", name, "error", quarantine.ErrorKind(err))
	}
	return false, err
}

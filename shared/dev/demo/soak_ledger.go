package demo

import (
	"context"
	"errors"
	"io"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/dlqquarantine/dlqq/shared/dev/faults"
	"github.com/dlqquarantine/dlqq/shared/dev/localrunner"
	"github.com/dlqquarantine/dlqq/shared/runtime/awsclients"
	"github.com/dlqquarantine/dlqq/shared/usecase/ledger"
)

// The ledger in the soak runs as deployed: its stream mapping (the
// localrunner poller, Lambda's service, on clean clients) feeds each batch
// to one process of the stream function on the faulty network, which
// crashes like the redrive and sweeper processes do; a failed or crashed
// batch is delivered again, bisected. A process of the digest function
// runs on a short schedule, through its entry point with the schedule's
// input, crashing too.

// aim is a crash point chosen by what a request is, so that a short run
// meets each crash the ledger must survive. at sees the request's
// operation and the operations the process made before it.
type aim struct {
	what    string
	at      func(op string, earlier []string) bool
	applied bool
}

// opAfter aims at the first op after one of after in the same process.
func opAfter(op string, after string) func(string, []string) bool {
	return func(o string, earlier []string) bool { return o == op && slices.Contains(earlier, after) }
}

func opIs(op string) func(string, []string) bool {
	return func(o string, _ []string) bool { return o == op }
}

const (
	opSegmentPut  = "s3 PutObject"
	opUpdateItem  = "dynamodb UpdateItem"
	opTransaction = "dynamodb TransactWriteItems"
)

// soakAims are the crash points the first processes of a function die at
// (each once, in order), before the random crashes begin.
var soakAims = map[string][]aim{
	"ledger": {
		{"after its segment PUT, before the head update", opAfter(opUpdateItem, opSegmentPut), false},
		{"its segment PUT applied, the answer lost", opIs(opSegmentPut), true},
		{"its counters' transaction applied, the answer lost", opIs(opTransaction), true},
	},
	"digest": {
		{"its digest PUT applied, the answer lost", opIs(opSegmentPut), true},
		{"after its digest PUT, before the digest head update", opAfter(opUpdateItem, opSegmentPut), false},
	},
}

// opOf names a request: its service and operation ("dynamodb UpdateItem",
// "s3 PutObject", "kms Sign").
func opOf(req *http.Request) string { return faults.Operation(req) }

// process is one function process's network: it may crash.
type process interface {
	aws.HTTPClient
	Crashed() (bool, string)
	Requests() int64
}

// aimedCrash is a process network that dies at the first request its aim
// names; that request reaches AWS (its answer lost) when the aim says so.
type aimedCrash struct {
	base   aws.HTTPClient
	aim    aim
	cancel context.CancelFunc

	mu      sync.Mutex
	ops     []string
	crashed bool
	point   string
}

func (c *aimedCrash) Do(req *http.Request) (*http.Response, error) {
	op := opOf(req)
	c.mu.Lock()
	if c.crashed {
		c.mu.Unlock()
		return nil, faults.ErrCrashed
	}
	hit := c.aim.at(op, c.ops)
	c.ops = append(c.ops, op)
	c.crashed = hit
	c.mu.Unlock()
	if !hit {
		return c.base.Do(req)
	}
	what := op + " (never sent)"
	if c.aim.applied {
		if resp, err := c.base.Do(req); err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		what = op + " (applied, response lost)"
	}
	c.mu.Lock()
	c.point = c.aim.what + ": " + what
	c.mu.Unlock()
	c.cancel()
	return nil, faults.ErrCrashed
}

func (c *aimedCrash) Crashed() (bool, string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.crashed, c.point
}

func (c *aimedCrash) Requests() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return int64(len(c.ops))
}

// errProcessCrashed is what the mapping sees of a crashed ledger process:
// a function error, so the batch comes again.
var errProcessCrashed = errors.New("the ledger process crashed")

// ledgerBatch is the stream function's handler as its mapping invokes it:
// each batch one process on the faulty network.
func (s *soak) ledgerBatch(ctx context.Context, ev events.DynamoDBTimeWindowEvent) (events.DynamoDBTimeWindowEventResponse, error) {
	resp := events.DynamoDBTimeWindowEventResponse{}
	resp.State = map[string]string{}
	crashed, err := s.invoke(ctx, "ledger", func(ctx context.Context, cl *awsclients.Clients) error {
		svc, err := s.fns.NewLedger(cl, io.Discard)
		if err != nil {
			return err
		}
		resp, err = svc.HandleStream(ctx, ev)
		return err
	})
	if crashed {
		return resp, errProcessCrashed
	}
	return resp, err
}

// digestOnce runs one process of the digest function with the schedule's
// input.
func (s *soak) digestOnce(ctx context.Context) (ledger.DigestReport, bool, error) {
	var rep ledger.DigestReport
	crashed, err := s.invoke(ctx, "digest", func(ctx context.Context, cl *awsclients.Clients) error {
		svc, err := s.fns.NewDigest(cl, io.Discard)
		if err != nil {
			return err
		}
		out, err := svc.DigestEntry(ctx, []byte(`{"action":"digest"}`))
		if r, ok := out.(ledger.DigestReport); ok {
			rep = r
		}
		return err
	})
	if err == nil && !crashed {
		s.mu.Lock()
		s.rep.DigestRuns++
		if rep.Written {
			s.rep.DigestsWritten++
		}
		if rep.Adopted {
			s.rep.DigestsAdopted++
		}
		s.mu.Unlock()
	}
	return rep, crashed, err
}

// startLedger starts the ledger's mapping and its digest schedule; stop
// ends both and waits for them.
func (s *soak) startLedger(ctx context.Context) (stop func()) {
	s.ledgerPoller = s.fns.LedgerPoller(s.st.Clients, s.ledgerBatch)
	s.ledgerPoller.Log = s.log
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); _ = s.ledgerPoller.Run(ctx) }()
	go func() {
		defer wg.Done()
		t := time.NewTicker(s.o.DigestEvery)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				_, _, _ = s.digestOnce(ctx)
			}
		}
	}()
	var once sync.Once
	return func() { once.Do(func() { cancel(); wg.Wait() }) }
}

// catchUpLedger delivers what the stream holds now to the ledger (its
// processes still crashing) until a drain gets through, then runs digests
// until one gets through with nothing left unanchored.
func (s *soak) catchUpLedger(ctx context.Context) error {
	for {
		_, err := s.ledgerPoller.Drain(ctx)
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			return err
		}
	}
	for {
		rep, crashed, err := s.digestOnce(ctx)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		// A run that found no head moved since the newest digest: that
		// digest anchors every change. (Its lag is read from pending_since,
		// which a crash between the digest head's update and the heads'
		// marking leaves set until the next digest is written.)
		if err == nil && !crashed && rep.N > 0 && !rep.Written && !rep.Adopted {
			s.rep.FinalDigestLag = rep.LagSeconds
			return nil
		}
	}
}

// pollerStats are the ledger mapping's deliveries.
func (s *soak) pollerStats() localrunner.StreamStats {
	if s.ledgerPoller == nil {
		return localrunner.StreamStats{}
	}
	return s.ledgerPoller.Stats()
}

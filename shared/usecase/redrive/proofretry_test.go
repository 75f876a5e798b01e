package redrive_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/dlqquarantine/dlqq/shared/adapter/dynamostore"
	"github.com/dlqquarantine/dlqq/shared/dev/macfake"
	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
	"github.com/dlqquarantine/dlqq/shared/domain/writerproof"
	"github.com/dlqquarantine/dlqq/shared/usecase/redrive"
)

// acceptedSender counts the SendMessageBatch calls that SQS accepted.
type acceptedSender struct {
	redrive.Sender
	mu    sync.Mutex
	sends int
}

func (s *acceptedSender) SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, opts ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	out, err := s.Sender.SendMessageBatch(ctx, in, opts...)
	if err == nil {
		s.mu.Lock()
		s.sends += len(out.Successful)
		s.mu.Unlock()
	}
	return out, err
}

func (s *acceptedSender) sent() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sends
}

var errThrottled = errors.New("ThrottlingException: rate exceeded")

// flakyMAC fails the MAC calls fail picks (given how many messages were
// sent so far and how many calls it failed): a KMS that throttles.
type flakyMAC struct {
	macfake.MAC
	sender *acceptedSender
	fail   func(sent, failed int) bool
	mu     sync.Mutex
	failed int
}

func (f *flakyMAC) Generate(ctx context.Context, msg []byte) ([]byte, string, error) {
	f.mu.Lock()
	if f.fail(f.sender.sent(), f.failed) {
		f.failed++
		f.mu.Unlock()
		return nil, "", errThrottled
	}
	f.mu.Unlock()
	return f.MAC.Generate(ctx, msg)
}

func (f *flakyMAC) failures() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.failed
}

// proofEnv is a seeded source whose redrive store proves with a flaky MAC.
func proofEnv(t *testing.T, fail func(sent, failed int) bool, cfg redrive.Config) (*env, []string, *acceptedSender, *flakyMAC, *redrive.Service) {
	t.Helper()
	e, ids := seeded(t, 1)
	sender := &acceptedSender{Sender: stack.Clients.SQS}
	const arn = "arn:aws:kms:us-east-1:000000000000:key/redrive"
	mac := &flakyMAC{MAC: macfake.MAC{Keys: macfake.New(arn), ARN: arn}, sender: sender, fail: fail}
	store := dynamostore.New(stack.Clients.DynamoDB, stack.Names["QuarantineTable"]).WithWriter(writerproof.NewProver(mac, writerproof.RoleRedrive))
	return e, ids, sender, mac, e.service(sender, store, cfg)
}

// A KMS throttle after SendMessage: the mark's proof is tried again until
// it is made, so the mark is written and a later run sends nothing again.
func TestMarkProofRetriedAfterSend(t *testing.T) {
	t.Parallel()
	const throttles = 3
	e, ids, sender, mac, svc := proofEnv(t, func(sent, failed int) bool { return sent > 0 && failed < throttles }, redrive.Config{MaxBackoff: time.Millisecond})
	rep, err := svc.Run(context.Background(), e.request(1))
	if err != nil {
		t.Fatal(err)
	}
	if mac.failures() != throttles || rep.Redriven.Count != 1 || sender.sent() != 1 {
		t.Fatalf("%d throttles, %d redriven, %d sent", mac.failures(), rep.Redriven.Count, sender.sent())
	}
	if got := e.get(t, ids[0]).Status; got != quarantine.StatusRedriven {
		t.Fatalf("after the send the record is %s, want REDRIVEN", got)
	}
	e.drain(t, none)
	// Past the lease: nothing to reclaim, nothing sent twice.
	e.clock.Advance(time.Hour)
	if _, err := svc.Run(context.Background(), e.request(1)); err != nil {
		t.Fatal(err)
	}
	if sender.sent() != 1 {
		t.Fatalf("the message was sent %d times", sender.sent())
	}
}

// Without a deadline the retries are bounded; with one they go on until
// the deadline margin: either way the run ends.
func TestMarkProofRetryEnds(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name    string
		timeout time.Duration
		atLeast int
	}{
		{"no deadline", 0, 2},
		// A call needs 1.1 s (send timeout and margin): 8 s leave
		// several seconds of tries at a millisecond's backoff before the
		// margin (room for a slow claim on a loaded machine), far more
		// tries than the bound without a deadline.
		{"a deadline", 8 * time.Second, 11},
	} {
		t.Run(c.name, func(t *testing.T) {
			e, ids, sender, mac, svc := proofEnv(t, func(sent, _ int) bool { return sent > 0 },
				redrive.Config{MaxBackoff: time.Millisecond, SendTimeout: 100 * time.Millisecond, DeadlineMargin: time.Second})
			ctx := context.Background()
			if c.timeout > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, c.timeout)
				defer cancel()
			}
			_, err := svc.Run(ctx, e.request(1))
			if !errors.Is(err, writerproof.ErrGenerate) {
				t.Fatalf("run: %v", err)
			}
			if ctx.Err() != nil {
				t.Fatal("the retries ran into the deadline")
			}
			if sender.sent() != 1 || mac.failures() < c.atLeast {
				t.Fatalf("%d sent, %d MAC failures", sender.sent(), mac.failures())
			}
			// The mark could not be proved: the record stays claimed (the
			// run fails, and a reclaim says a duplicate is possible).
			if got := e.get(t, ids[0]).Status; got != quarantine.StatusRedriving {
				t.Fatalf("the record is %s", got)
			}
		})
	}
}

// A MAC that fails before any send: the claim is not written, nothing is
// sent, the record stays as it was.
func TestClaimProofFailureSendsNothing(t *testing.T) {
	t.Parallel()
	e, ids, sender, mac, svc := proofEnv(t, func(int, int) bool { return true }, redrive.Config{MaxBackoff: time.Millisecond})
	before := e.get(t, ids[0])
	_, _ = svc.Run(context.Background(), e.request(1))
	if sender.sent() != 0 || mac.failures() == 0 {
		t.Fatalf("%d sent, %d MAC failures", sender.sent(), mac.failures())
	}
	if after := e.get(t, ids[0]); after.Version != before.Version || after.Status != quarantine.StatusQuarantined {
		t.Fatalf("the record went from version %d to %d, %s", before.Version, after.Version, after.Status)
	}
	if got := len(e.drain(t, none)); got != 0 {
		t.Fatalf("%d messages in the source queue", got)
	}
}

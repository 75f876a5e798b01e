package redrive

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/smithy-go"

	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
	"github.com/dlqquarantine/dlqq/shared/domain/sources"
	"github.com/dlqquarantine/dlqq/shared/domain/writerproof"
)

// SQS limits for one SendMessageBatch call and one message.
const (
	MaxEntriesPerCall = 10
	MaxCallBytes      = 1 << 20
	MaxAttributes     = 10
)

// send replays the claimed records in SendMessageBatch calls of at most 10
// entries and 1 MiB, then marks each record REDRIVEN, parks it, gives its
// claim back or, when SQS may have enqueued it without saying so, records
// that it was possibly sent. Every record gets its outcome, whatever
// happens to the others.
//
// The records go in waves whose calls are in flight together, Concurrency
// at a time: into a standard queue one wave of them all; into a FIFO queue
// a wave holds at most one message of each group (the first of each group
// not yet sent), and the next wave starts when every call of this one is
// answered and settled. A group whose message was not surely sent sends
// nothing more this run: no later message of a group may go before an
// earlier one, also when that one's send fails and is retried.
func (r *run) send(ctx context.Context, ready []*claimed) {
	url, err := r.queue(ctx)
	if err != nil {
		for _, c := range ready {
			r.block(c.rec)
			if rerr := r.release(ctx, c.rec, "source queue unavailable: "+quarantine.ErrorKind(err), nil, &r.rep.Failed); rerr != nil {
				r.failLater(ctx, c.rec.DLQID, "release", rerr)
			}
		}
		return
	}
	fifo := r.fifo()
	for len(ready) > 0 {
		var wave, rest []*claimed
		taken := map[string]bool{}
		for _, c := range ready {
			switch {
			case r.isBlocked(c.rec):
				if err := r.release(ctx, c.rec, "held back: an earlier message of its FIFO group was not sent", nil, &r.rep.Deferred); err != nil {
					r.failLater(ctx, c.rec.DLQID, "release", err)
				}
			case c.size > MaxCallBytes:
				// One message above the call limit can never be sent.
				r.block(c.rec)
				if err := r.park(ctx, c.rec, "the message exceeds the SQS size limit"); err != nil {
					r.failLater(ctx, c.rec.DLQID, "park", err)
				}
			case !fifo || !taken[group(c.rec)]:
				wave = append(wave, c)
				taken[group(c.rec)] = true
			default:
				rest = append(rest, c)
			}
		}
		if !r.sendWave(ctx, url, wave) {
			// Stopped at the deadline: what is left waits for a later run.
			for _, c := range rest {
				r.block(c.rec)
				if err := r.release(ctx, c.rec, "not sent: the invocation's deadline is near", nil, &r.rep.Deferred); err != nil {
					r.failLater(ctx, c.rec.DLQID, "release", err)
				}
			}
			return
		}
		ready = rest
	}
}

// sendWave sends records that may go in any order among themselves in
// calls of at most 10 entries and 1 MiB, Concurrency calls at a time, each
// settled as it returns. A call that no longer fits before the margin
// gives its claims back unsent; sendWave then reports false (stopped at
// the deadline).
func (r *run) sendWave(ctx context.Context, url string, wave []*claimed) bool {
	var calls [][]*claimed
	var call []*claimed
	bytes := 0
	for _, c := range wave {
		if len(call) == MaxEntriesPerCall || bytes+c.size > MaxCallBytes {
			calls, call, bytes = append(calls, call), nil, 0
		}
		call = append(call, c)
		bytes += c.size
	}
	if len(call) > 0 {
		calls = append(calls, call)
	}
	var stopped atomic.Bool
	_ = each(len(calls), func(i int) error {
		// Within MaxSendBytes of payload in flight; the time is read once
		// the call may go.
		release := r.s.sending.Acquire(int64(payloadBytes(calls[i])))
		if !r.timeForACall(ctx) {
			release()
			// Not enough time left for a call and its retries: give the
			// claims back unsent rather than be stopped mid-send (which
			// leaves them claimed until their lease expires).
			for _, c := range calls[i] {
				r.block(c.rec)
				if err := r.release(ctx, c.rec, "not sent: the invocation's deadline is near", nil, &r.rep.Deferred); err != nil {
					r.failLater(ctx, c.rec.DLQID, "release", err)
				}
			}
			r.stop(StoppedDeadline)
			stopped.Store(true)
			return nil
		}
		answer := r.sendCall(ctx, url, calls[i])
		release()
		r.settleCall(ctx, calls[i], answer)
		return nil
	})
	return !stopped.Load()
}

// stop records why the run ended; safe while calls run concurrently.
func (r *run) stop(why string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.rep.Stopped = why
}

// sent is what the tries of one SendMessageBatch entry came to.
type sent struct {
	messageID string // SQS accepted it
	maybe     bool   // a try ended without an answer: it may be enqueued
	refused   bool   // SQS refused it as malformed: no retry can help
	code      string // why the last try failed
}

// noSDKRetry turns the SDK's retries off for one call: a retried
// SendMessageBatch whose first try was enqueued but unanswered enqueues it
// again, and only redrive's own loop knows to record that.
func noSDKRetry(o *sqs.Options) { o.Retryer = retry.AddWithMaxAttempts(o.Retryer, 1) }

// sendCall sends group in one SendMessageBatch call, retrying the entries
// that failed with jittered backoff, and says what became of each entry.
// It writes nothing.
func (r *run) sendCall(ctx context.Context, url string, group []*claimed) []sent {
	res := make([]sent, len(group))
	if r.limiter != nil {
		if err := r.limiter.WaitN(ctx, len(group)); err != nil {
			for i := range res {
				res[i].code = quarantine.ErrorKind(err)
			}
			return res
		}
	}
	pending := make([]int, len(group))
	for i := range pending {
		pending[i] = i
	}
	backoff := retry.NewExponentialJitterBackoff(r.s.cfg.MaxBackoff)
	for attempt := 1; len(pending) > 0 && attempt <= r.s.cfg.SendAttempts; attempt++ {
		if attempt > 1 {
			d, _ := backoff.BackoffDelay(attempt-1, nil)
			select {
			case <-ctx.Done():
				return res
			case <-time.After(d):
			}
		}
		if !r.timeForACall(ctx) {
			// No retry past the deadline margin: what is pending stays
			// unsent (or possibly sent, if a try had no answer).
			return res
		}
		in := &sqs.SendMessageBatchInput{QueueUrl: aws.String(url)}
		for _, i := range pending {
			in.Entries = append(in.Entries, r.entry(strconv.Itoa(i), group[i]))
		}
		callCtx, cancel := context.WithTimeout(ctx, r.budget.sendTimeout)
		out, err := r.s.sqs.SendMessageBatch(callCtx, in, noSDKRetry)
		cancel()
		if err != nil {
			maybe := mayHaveApplied(err)
			for _, i := range pending {
				res[i].code = quarantine.ErrorKind(err)
				res[i].maybe = res[i].maybe || maybe
			}
			if ctx.Err() != nil {
				return res
			}
			continue
		}
		pending = recordAnswer(out, len(group), pending, res)
	}
	return res
}

// recordAnswer writes into res what SQS answered for the pending entries
// of one try of a call of n entries, and returns the entries to try again.
func recordAnswer(out *sqs.SendMessageBatchOutput, n int, pending []int, res []sent) []int {
	answered := map[int]bool{}
	for _, ok := range out.Successful {
		if i, mine := entryIndex(aws.ToString(ok.Id), n); mine {
			res[i].messageID = aws.ToString(ok.MessageId)
			answered[i] = true
		}
	}
	for _, f := range out.Failed {
		if i, mine := entryIndex(aws.ToString(f.Id), n); mine && !answered[i] {
			res[i].code = aws.ToString(f.Code)
			// The request itself is wrong: retrying cannot help.
			res[i].refused = f.SenderFault
			answered[i] = true
		}
	}
	var again []int
	for _, i := range pending {
		switch {
		case !answered[i]:
			// SQS answers every entry; one it left out may be enqueued.
			res[i].maybe, res[i].code = true, "unanswered entry"
			again = append(again, i)
		case res[i].messageID == "" && !res[i].refused:
			again = append(again, i)
		}
	}
	return again
}

// mayHaveApplied reports whether a failed call may still have been carried
// out: anything but a 4xx answer (SQS refused it) or a connection that
// never opened. A timeout, a reset connection, a 5xx: SQS may have
// enqueued the messages and the answer was lost.
func mayHaveApplied(err error) bool {
	var status interface{ HTTPStatusCode() int }
	if errors.As(err, &status) && status.HTTPStatusCode() >= 400 && status.HTTPStatusCode() < 500 {
		return false
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return false
	}
	var params *smithy.InvalidParamsError
	var ser *smithy.SerializationError
	return !errors.As(err, &params) && !errors.As(err, &ser)
}

// settleCall writes the outcome of each entry of one call: marks first (a
// sent record must never stay claimed while others are released), then
// the records whose send is unknown, then the ones given back.
func (r *run) settleCall(ctx context.Context, call []*claimed, res []sent) {
	var marks []int
	for i := range call {
		if res[i].messageID != "" {
			marks = append(marks, i)
		}
	}
	_ = each(len(marks), func(k int) error {
		i := marks[k]
		if err := r.mark(ctx, call[i], res[i].messageID, res[i].maybe); err != nil {
			// Sent, but REDRIVING until its lease expires, when a later
			// run sends it again: nothing later of its FIFO group goes
			// before that copy.
			r.block(call[i].rec)
			r.failLater(ctx, call[i].rec.DLQID, "mark", err)
		}
		return nil
	})
	for i, c := range call {
		var err error
		switch {
		case res[i].messageID != "":
			continue
		case res[i].maybe:
			// Possibly enqueued: never "not sent", never the count back.
			r.block(c.rec)
			err = r.unknown(ctx, c, res[i].code)
		case res[i].refused:
			r.block(c.rec)
			err = r.park(ctx, c.rec, "send refused: "+res[i].code)
		default:
			r.block(c.rec)
			err = r.release(ctx, c.rec, "send failed after retries: "+res[i].code, nil, &r.rep.Failed)
		}
		if err != nil {
			r.failLater(ctx, c.rec.DLQID, "record send outcome", err)
		}
	}
}

// entryIndex turns a batch entry id back into the index it was made from.
func entryIndex(id string, n int) (int, bool) {
	i, err := strconv.Atoi(id)
	return i, err == nil && i >= 0 && i < n
}

// mark records a completed send. If the record changed since the claim (its
// message already failed again and came back), the send is still written to
// its history.
func (r *run) mark(ctx context.Context, c *claimed, messageID string, maybeTwice bool) error {
	round, fifo := c.rec.RedriveCount, r.fifo()
	r.note(&r.rep.Redriven, c.rec.DLQID)
	return r.rewriteHistory(ctx, c.rec, "mark redriven", func(cur *quarantine.Record) (*quarantine.Record, error) {
		if cur.Status == quarantine.StatusRedriving && cur.RedriveCount == round {
			return cur.MarkSent(r.req.RequestedBy, messageID, maybeTwice, fifo, r.s.now())
		}
		return cur.NoteSentWhileChanged(r.req.RequestedBy, messageID, round, maybeTwice, fifo, r.s.now())
	})
}

// unknown records a send whose outcome no try could learn.
func (r *run) unknown(ctx context.Context, c *claimed, code string) error {
	round := c.rec.RedriveCount
	r.note(&r.rep.Unknown, c.rec.DLQID)
	return r.rewriteHistory(ctx, c.rec, "record unknown send", func(cur *quarantine.Record) (*quarantine.Record, error) {
		return cur.SendUnknown(r.req.RequestedBy, code, round, r.s.now())
	})
}

// rewriteHistory writes step's successor of the current version of rec,
// re-reading and retrying on concurrent changes: what it records (a send)
// happened whatever the record did meanwhile. A version read since that no
// longer verifies is set aside: the send is reported, nothing is written
// under a new seal.
//
// Its writes follow a send, so a writer proof that could not be made (a
// KMS throttle, say, past the SDK's retries) is tried again with backoff
// until the invocation's deadline is near (DeadlineMargin; without a
// deadline, postSendProofTries times): a mark never written leaves the
// record REDRIVING, and once its lease expires a later run reclaims it
// and sends the message again.
func (r *run) rewriteHistory(ctx context.Context, rec *quarantine.Record, op string, step func(*quarantine.Record) (*quarantine.Record, error)) error {
	backoff := retry.NewExponentialJitterBackoff(r.s.cfg.MaxBackoff)
	for attempt := 1; ; attempt++ {
		_, err := r.update(ctx, rec, op, step)
		if err == nil || !retryableAfterSend(err) {
			return err
		}
		r.slowDown()
		d, _ := backoff.BackoffDelay(attempt, nil)
		if left, ok := r.s.left(ctx); ok && left < d+r.budget.margin || !ok && attempt >= postSendProofTries {
			return err
		}
		r.s.log.WarnContext(ctx, "a write after a send failed: trying again", "run_id", r.rep.RunID, "op", op, "attempt", attempt, "error_kind", quarantine.ErrorKind(err))
		select {
		case <-ctx.Done():
			return err
		case <-time.After(d):
		}
	}
}

// postSendProofTries bounds rewriteHistory's tries when the context has
// no deadline (a Lambda invocation always has one).
const postSendProofTries = 10

// retryableAfterSend reports whether a write that records a send may
// succeed if tried again: a writer proof not made, a throttle or a 5xx the
// SDK's own retries did not get past, or the SDK's retry quota spent (a
// burst of throttles). A mark given up leaves the record REDRIVING, and
// its message is sent again once the lease expires.
func retryableAfterSend(err error) bool {
	var quota ratelimit.QuotaExceededError
	return errors.Is(err, writerproof.ErrGenerate) || errors.As(err, &quota) ||
		retry.IsErrorRetryables(retry.DefaultRetryables).IsErrorRetryable(err) == aws.TrueTernary
}

// ErrOtherRegion: a source whose queue is in another Region than the
// function's (Config.Region).
var ErrOtherRegion = errors.New("a replay goes only to queues of the function's Region")

// inRegion returns ErrOtherRegion, named, when src's queue ARN names
// another Region than the function's.
func (s *Service) inRegion(src *quarantine.Source) error {
	parts := strings.Split(src.ARN, ":")
	if s.cfg.Region == "" || len(parts) != 6 || parts[3] == s.cfg.Region {
		return nil
	}
	return fmt.Errorf("source %q: its queue is in %s, the function in %s: %w (SQS moves dead letters within a Region)", src.Name, parts[3], s.cfg.Region, ErrOtherRegion)
}

// ErrSourceUntagged: a source granted by its queue's tag alone
// (TaggedSourceAccess) whose queue does not carry it now.
var ErrSourceUntagged = errors.New("the queue does not carry the stack's source tag")

// checkTag reads the tags of src's queue at url and returns an error
// unless sources.SourceTagKey has the stack's value: without it the role
// may not send there (and may not read the tags: AccessDenied is
// refused the same way).
func (s *Service) checkTag(ctx context.Context, src *quarantine.Source, url string) error {
	out, err := s.sqs.ListQueueTags(ctx, &sqs.ListQueueTagsInput{QueueUrl: aws.String(url)})
	if err != nil {
		return s.untagged(src, fmt.Sprintf("its queue's tags could not be read (%s)", quarantine.ErrorKind(err)))
	}
	if got, ok := out.Tags[sources.SourceTagKey]; !ok || got != s.cfg.SourceTagValue {
		return s.untagged(src, "its queue does not carry the tag (tag the queue, or register it in SourceQueueArns)")
	}
	return nil
}

// untagged is ErrSourceUntagged for src, saying why.
func (s *Service) untagged(src *quarantine.Source, why string) error {
	return fmt.Errorf("source %q: %s: a source granted by tag is replayed only while its queue carries %s=%s: %w",
		src.Name, why, sources.SourceTagKey, s.cfg.SourceTagValue, ErrSourceUntagged)
}

// refused reports whether err is SQS refusing the caller (AccessDenied),
// or saying the queue does not exist, which SQS may answer a caller who
// may not see it.
func refused(err error) bool {
	var api smithy.APIError
	if !errors.As(err, &api) {
		return false
	}
	code := api.ErrorCode()
	return strings.Contains(code, "AccessDenied") || strings.Contains(code, "NonExistentQueue") || code == "QueueDoesNotExist"
}

// dest is the source whose queue the run sends to: its target, else its
// source.
func (r *run) dest() *quarantine.Source {
	if r.target != nil {
		return r.target
	}
	return r.src
}

// queue is the URL of the queue the run sends to.
func (r *run) queue(ctx context.Context) (string, error) { return r.queueOf(ctx, r.dest()) }

// queueOf is the URL of src's queue, looked up once a run.
func (r *run) queueOf(ctx context.Context, src *quarantine.Source) (string, error) {
	r.mu.Lock()
	u := r.queueURL[src.Name]
	r.mu.Unlock()
	if u != "" {
		return u, nil
	}
	if err := r.s.inRegion(src); err != nil {
		return "", err
	}
	in := &sqs.GetQueueUrlInput{QueueName: aws.String(src.Name)}
	if parts := strings.Split(src.ARN, ":"); len(parts) == 6 {
		in.QueueOwnerAWSAccountId = aws.String(parts[4])
	}
	out, err := r.s.sqs.GetQueueUrl(ctx, in)
	if err != nil && r.s.cfg.TaggedSources[src.Name] && refused(err) {
		// IAM refuses GetQueueUrl too on a queue without the tag (the
		// grant rests on it): the same refusal as a missing tag.
		return "", r.s.untagged(src, fmt.Sprintf("its queue could not be looked up (%s)", quarantine.ErrorKind(err)))
	}
	if err != nil {
		return "", fmt.Errorf("source queue url: %w", err)
	}
	if r.s.cfg.TaggedSources[src.Name] {
		if err := r.s.checkTag(ctx, src, aws.ToString(out.QueueUrl)); err != nil {
			return "", err
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.queueURL == nil {
		r.queueURL = map[string]string{}
	}
	r.queueURL[src.Name] = aws.ToString(out.QueueUrl)
	return r.queueURL[src.Name], nil
}

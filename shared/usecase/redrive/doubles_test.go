package redrive_test

// The test doubles of the package's tests: stores and senders that inject
// a fault (a crash, a failed or held write, a lost answer), record what was
// sent, or answer without SQS; and the raw item access that tampering
// tests use.

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/dlqquarantine/dlqq/shared/adapter/dynamostore"
	"github.com/dlqquarantine/dlqq/shared/domain/identity"
	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
	"github.com/dlqquarantine/dlqq/shared/usecase/redrive"
)

// crashingStore cancels the run right after a write that moves a record
// into the given status: a process crash at that point.
type crashingStore struct {
	quarantine.Store
	after  quarantine.Status
	cancel context.CancelFunc
	once   sync.Once
}

func (c *crashingStore) Replace(ctx context.Context, prev, r *quarantine.Record) error {
	err := c.Store.Replace(ctx, prev, r)
	if err == nil && r.Status == c.after {
		c.once.Do(c.cancel)
	}
	return err
}

// failingStore fails the writes that fail says fail, without applying
// them, with err (errStoreDown if nil).
type failingStore struct {
	quarantine.Store
	fail func(r *quarantine.Record) bool
	err  error
}

var errStoreDown = errors.New("injected store failure")

func (f *failingStore) Replace(ctx context.Context, prev, r *quarantine.Record) error {
	if f.fail(r) {
		if f.err != nil {
			return f.err
		}
		return errStoreDown
	}
	return f.Store.Replace(ctx, prev, r)
}

// heldStore answers every claim write with the hold another run set
// meanwhile, as the DynamoDB store does (its text names the record).
type heldStore struct{ quarantine.Store }

func (h *heldStore) Replace(ctx context.Context, prev, r *quarantine.Record) error {
	if r.Status == quarantine.StatusRedriving {
		return fmt.Errorf("replace %s: %w", r.DLQID, quarantine.ErrHeld)
	}
	return h.Store.Replace(ctx, prev, r)
}

// timeoutError is what the SDK's HTTP client returns when a request's
// answer does not arrive in time.
type timeoutError struct{}

func (timeoutError) Error() string   { return "read tcp: i/o timeout (injected)" }
func (timeoutError) Timeout() bool   { return true }
func (timeoutError) Temporary() bool { return true }

// lostAnswerSender enqueues each call for real and then loses the answer
// (a timeout) on the calls numbered in lose (1-based): SQS did the work and
// redrive cannot know.
type lostAnswerSender struct {
	redrive.Sender
	mu    sync.Mutex
	calls int
	lose  func(call int) bool
}

func (l *lostAnswerSender) SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, opts ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	l.mu.Lock()
	l.calls++
	n := l.calls
	l.mu.Unlock()
	out, err := l.Sender.SendMessageBatch(ctx, in, opts...)
	if err == nil && l.lose(n) {
		return nil, fmt.Errorf("operation error SQS: SendMessageBatch, https response error: %w", timeoutError{})
	}
	return out, err
}

// http4xx is an error answer: SQS refused the call.
type http4xx struct{}

func (*http4xx) Error() string       { return "api error RequestThrottled: throttled (injected 400)" }
func (*http4xx) HTTPStatusCode() int { return http.StatusBadRequest }

// errSender fails every call with err, sending nothing.
type errSender struct {
	redrive.Sender
	err error
}

func (e *errSender) SendMessageBatch(context.Context, *sqs.SendMessageBatchInput, ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	return nil, e.err
}

// crashingSender cancels the run right after the first batch call succeeds.
type crashingSender struct {
	redrive.Sender
	cancel context.CancelFunc
	once   sync.Once
	mu     sync.Mutex
	dedup  map[string][]string // record id → dedup ids sent
	groups map[string]string   // record id → group id sent
}

func (c *crashingSender) SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, opts ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	out, err := c.Sender.SendMessageBatch(context.Background(), in, opts...)
	c.mu.Lock()
	for _, e := range in.Entries {
		rid := aws.ToString(e.MessageAttributes[quarantine.AttrRecordID].StringValue)
		c.dedup[rid] = append(c.dedup[rid], aws.ToString(e.MessageDeduplicationId))
		if c.groups != nil {
			c.groups[rid] = aws.ToString(e.MessageGroupId)
		}
	}
	c.mu.Unlock()
	if c.cancel != nil {
		c.once.Do(c.cancel)
	}
	return out, err
}

// entrySender sends through SQS but fails, with InternalError (not the
// sender's fault), the entries of the records in fail: on every try, or
// only on their first when once is set. It counts its calls and records,
// per message group, the record ids in the order SQS accepted them (call by
// call, entry by entry: SQS enqueues a FIFO batch in entry order).
type entrySender struct {
	redrive.Sender
	fail   map[string]bool
	once   bool
	mu     sync.Mutex
	tries  int
	order  map[string][]string // group → record ids, in enqueue order
	failed map[string]bool
}

func newEntrySender(fail map[string]bool, once bool) *entrySender {
	if fail == nil {
		fail = map[string]bool{}
	}
	return &entrySender{Sender: stack.Clients.SQS, fail: fail, once: once, order: map[string][]string{}, failed: map[string]bool{}}
}

func (s *entrySender) SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, opts ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tries++
	var pass []sqstypes.SendMessageBatchRequestEntry
	var failed []sqstypes.BatchResultErrorEntry
	for _, e := range in.Entries {
		if rid := entryRecord(e); s.fail[rid] && !(s.once && s.failed[rid]) {
			s.failed[rid] = true
			failed = append(failed, sqstypes.BatchResultErrorEntry{Id: e.Id, Code: aws.String("InternalError")})
			continue
		}
		pass = append(pass, e)
	}
	out := &sqs.SendMessageBatchOutput{Failed: failed}
	if len(pass) == 0 {
		return out, nil
	}
	in2 := *in
	in2.Entries = pass
	res, err := s.Sender.SendMessageBatch(ctx, &in2, opts...)
	if err != nil {
		return nil, err
	}
	ok := map[string]bool{}
	for _, r := range res.Successful {
		ok[aws.ToString(r.Id)] = true
	}
	for _, e := range pass {
		if ok[aws.ToString(e.Id)] {
			g := aws.ToString(e.MessageGroupId)
			s.order[g] = append(s.order[g], entryRecord(e))
		}
	}
	out.Successful, out.Failed = res.Successful, append(out.Failed, res.Failed...)
	return out, nil
}

// entryRecord is the record id a batch entry carries.
func entryRecord(e sqstypes.SendMessageBatchRequestEntry) string {
	return aws.ToString(e.MessageAttributes[quarantine.AttrRecordID].StringValue)
}

func sqsOK(id *string) sqstypes.SendMessageBatchResultEntry {
	return sqstypes.SendMessageBatchResultEntry{Id: id, MessageId: aws.String("sent-" + aws.ToString(id)), MD5OfMessageBody: aws.String("x")}
}

// countingSender records every entry it is asked to send.
type countingSender struct {
	mu      sync.Mutex
	entries []string
}

func (c *countingSender) SendMessageBatch(_ context.Context, in *sqs.SendMessageBatchInput, _ ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := &sqs.SendMessageBatchOutput{}
	for _, e := range in.Entries {
		c.entries = append(c.entries, aws.ToString(e.MessageAttributes[quarantine.AttrRecordID].StringValue))
		out.Successful = append(out.Successful, sqsOK(e.Id))
	}
	return out, nil
}

func (c *countingSender) GetQueueAttributes(context.Context, *sqs.GetQueueAttributesInput, ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error) {
	return &sqs.GetQueueAttributesOutput{Attributes: map[string]string{
		"RedrivePolicy":     `{"deadLetterTargetArn":"arn:aws:sqs:us-east-1:000000000000:inv-dlq","maxReceiveCount":2}`,
		"VisibilityTimeout": "30", "DelaySeconds": "0",
	}}, nil
}

func (c *countingSender) GetQueueUrl(_ context.Context, in *sqs.GetQueueUrlInput, _ ...func(*sqs.Options)) (*sqs.GetQueueUrlOutput, error) {
	return &sqs.GetQueueUrlOutput{QueueUrl: aws.String("https://sqs.local/" + aws.ToString(in.QueueName))}, nil
}

// ListQueueTags: the countingSender's queues carry no tags (no source of
// its tests is granted by tag).
func (c *countingSender) ListQueueTags(context.Context, *sqs.ListQueueTagsInput, ...func(*sqs.Options)) (*sqs.ListQueueTagsOutput, error) {
	return &sqs.ListQueueTagsOutput{}, nil
}

// noAttributes is a sender that cannot read queue attributes (say, the
// role lacks sqs:GetQueueAttributes).
type noAttributes struct{ redrive.Sender }

func (noAttributes) GetQueueAttributes(context.Context, *sqs.GetQueueAttributesInput, ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error) {
	return nil, errors.New("AccessDenied (test)")
}

// historyHas reports whether an attempt of r's history has sub in its
// reason.
func historyHas(r *quarantine.Record, sub string) bool {
	for _, a := range r.Attempts {
		if strings.Contains(a.Reason, sub) {
			return true
		}
	}
	return false
}

// rawItem reads a record's item as stored.
func rawItem(t *testing.T, id string) map[string]ddbtypes.AttributeValue {
	t.Helper()
	out, err := stack.Clients.DynamoDB.GetItem(context.Background(), &dynamodb.GetItemInput{
		TableName: aws.String(stack.Names["QuarantineTable"]), ConsistentRead: aws.Bool(true),
		Key: map[string]ddbtypes.AttributeValue{"dlq_id": &ddbtypes.AttributeValueMemberS{Value: id}},
	})
	if err != nil || len(out.Item) == 0 {
		t.Fatalf("get %s: %v", id, err)
	}
	return out.Item
}

// tamper changes a record's item with one plain PutItem, keeping its seal:
// someone with write access to the table.
func tamper(t *testing.T, id string, change func(*quarantine.Record)) {
	t.Helper()
	r := mustUnmarshal(t, rawItem(t, id))
	change(r)
	item, err := dynamostore.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	putItem(t, item)
}

// putItem writes a record's item as given, with one plain PutItem.
func putItem(t *testing.T, item map[string]ddbtypes.AttributeValue) {
	t.Helper()
	if _, err := stack.Clients.DynamoDB.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: aws.String(stack.Names["QuarantineTable"]), Item: item}); err != nil {
		t.Fatal(err)
	}
}

func mustUnmarshal(t *testing.T, item map[string]ddbtypes.AttributeValue) *quarantine.Record {
	t.Helper()
	r, err := dynamostore.Unmarshal(item)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// spoil sets attribute attr of record id's item to the string value, as
// someone with write access to the table could: a number attribute so
// changed no longer decodes.
func spoil(t *testing.T, id, attr, value string) {
	t.Helper()
	item := rawItem(t, id)
	item[attr] = &ddbtypes.AttributeValueMemberS{Value: value}
	putItem(t, item)
}

// countingLister counts the listings of REDRIVEN records, which only the
// settle step makes.
type countingLister struct {
	quarantine.Lister
	redriven atomic.Int64 // settle steps (their probes)
	failNext atomic.Bool  // the next listing of due records fails (a throttle)
}

func (l *countingLister) List(ctx context.Context, q quarantine.ListQuery) (quarantine.ListPage, error) {
	// A settle step starts with a probe for any REDRIVEN record, then
	// lists the records that can be due (status_since bounded).
	if q.Status == quarantine.StatusRedriven && q.Cursor == "" {
		if q.StatusSinceBefore.IsZero() {
			l.redriven.Add(1)
		} else if l.failNext.CompareAndSwap(true, false) {
			return quarantine.ListPage{}, errors.New("ProvisionedThroughputExceededException: throttled")
		}
	}
	return l.Lister.List(ctx, q)
}

// barrierStore holds its first Get after skip until two stores' have
// happened, so two corrections read the same version (the check before a
// correction waits for its approval reads it once more, skipped).
type barrierStore struct {
	quarantine.Store
	wg   *sync.WaitGroup
	skip int
	gets atomic.Int64
}

func (b *barrierStore) Get(ctx context.Context, id string) (*quarantine.Record, error) {
	r, err := b.Store.Get(ctx, id)
	if int(b.gets.Add(1)) == b.skip+1 {
		b.wg.Done()
		b.wg.Wait()
	}
	return r, err
}

// The two verified operators of the four-eyes tests.
var (
	operatorA = mustPrincipal("arn:aws:iam::000000000000:user/operator-a", "AIDAOPERATORA")
	operatorB = mustPrincipal("arn:aws:iam::000000000000:user/operator-b", "AIDAOPERATORB")
)

func mustPrincipal(arn, userID string) identity.Principal {
	p, err := identity.FromIAM(arn, "000000000000", userID, "AKIALOCAL")
	if err != nil {
		panic(err)
	}
	return p
}

// runApproved runs a high-risk request the way it must run now: operator
// A asks through the operator endpoint (a pending approval), operator B
// approves, and the plan runs. A request that needs no approval runs on
// A's request. The report and error are the plan's run's.
func runApproved(ctx context.Context, svc *redrive.Service, req redrive.Request) (*redrive.Report, error) {
	if req.Reason == "" && req.Action != redrive.ActionPark && req.Action != redrive.ActionUnpark {
		req.Reason = "approved in a test"
	}
	req.RequestedBy = ""
	rep, err := redrive.RunVerified(ctx, svc, req, operatorA)
	if err != nil || rep.Approval == nil || rep.Stopped != redrive.StoppedPendingApproval {
		return rep, err
	}
	return redrive.RunVerified(ctx, svc, redrive.Request{Action: redrive.ActionApprove, Source: req.Source, ApprovalID: rep.Approval.ID, Reason: "second pair of eyes"}, operatorB)
}

// viaApproval is runApproved of a request's JSON (requested_by is dropped:
// the verified operators ask and approve).
func viaApproval(ctx context.Context, svc *redrive.Service, raw []byte) (*redrive.Report, error) {
	req, err := redrive.ParseRequest(raw)
	if err != nil {
		return nil, err
	}
	return runApproved(ctx, svc, req)
}

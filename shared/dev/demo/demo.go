package demo

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatch"
	cwtypes "github.com/aws/aws-sdk-go-v2/service/cloudwatch/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/dlqquarantine/dlqq/shared/adapter/dynamostore"
	"github.com/dlqquarantine/dlqq/shared/adapter/s3store"
	"github.com/dlqquarantine/dlqq/shared/dev/embedded"
	"github.com/dlqquarantine/dlqq/shared/dev/localrunner"
	"github.com/dlqquarantine/dlqq/shared/domain/policy"
	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
	"github.com/dlqquarantine/dlqq/shared/domain/sources"
	"github.com/dlqquarantine/dlqq/shared/usecase/ingest"
	"github.com/dlqquarantine/dlqq/shared/usecase/metrics"
	"github.com/dlqquarantine/dlqq/shared/usecase/redrive"
	"github.com/dlqquarantine/dlqq/shared/usecase/sweeper"
)

// Options size the scenario.
type Options struct {
	Seed   uint64
	Events int
	// Timeout bounds the whole run.
	Timeout time.Duration
	// Log receives the functions' JSON logs (discarded when nil).
	Log io.Writer
}

// StackParams are the template parameters the demo deploys with: short
// visibility timeouts and settle window so retries happen in seconds, and
// parked records due for the archive at once.
var StackParams = map[string]any{
	"MaxReceiveCount":                3,
	"SourceVisibilityTimeoutSeconds": 2,
	"DLQVisibilityTimeoutSeconds":    2,
	// At least MaxReceiveCount × visibility + margin (redrive would
	// settle later anyway).
	"SettleWindowSeconds": 7,
	"SettleMarginSeconds": 1,
	"ParkAgeSeconds":      0,
}

// Report is what the scenario found.
type Report struct {
	Sent, Consumed, DeadLettered, Recalled int
	// Records as quarantined, before any redrive.
	Records     []*quarantine.Record
	ByClass     map[quarantine.Class]int
	BySignature map[string]int
	Ingest      localrunner.Stats
	// Redrive rounds after the outage cleared, and the final states.
	Rounds         []*redrive.Report
	ClearedReasons []string
	Final          map[quarantine.Status]int
	// Corrected are the malformed events a pharmacist corrected, by event
	// id; Policies what the standing policy did with them.
	Corrected                        map[string]bool
	Policies                         []redrive.PolicyOutcome
	Sweep                            *sweeper.Report
	Lost, Unexpected, SealFailures   []string
	Duplicated, WrongState, BadStubs []string
	// Metrics as the emulator's CloudWatch holds them.
	Metrics map[string]float64
	Elapsed time.Duration
}

// OK reports whether every invariant held.
func (r *Report) OK() bool {
	return len(r.Lost)+len(r.Unexpected)+len(r.SealFailures)+len(r.Duplicated)+len(r.WrongState)+len(r.BadStubs) == 0 &&
		len(r.Records) == r.DeadLettered
}

// Run plays the scenario on st, whose resources come from the template.
func Run(ctx context.Context, st *embedded.Stack, o Options) (*Report, error) {
	start := time.Now()
	if o.Timeout == 0 {
		o.Timeout = 100 * time.Second
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	// Invocations run concurrently here (one at a time in Lambda): their log
	// and metric lines share one writer.
	logw := &syncWriter{w: o.Log}
	log := slog.New(slog.NewJSONHandler(logw, nil))
	fns, err := localrunner.NewFunctions(st, nil, log, logw)
	if err != nil {
		return nil, err
	}
	poller := &localrunner.Poller{SQS: st.Clients.SQS, Mapping: fns.Mapping, Handler: fns.Ingest.Handle, Log: log}
	pollCtx, stopPolling := context.WithCancel(ctx)
	var pollers sync.WaitGroup
	pollers.Add(1)
	go func() { defer pollers.Done(); _ = poller.Run(pollCtx) }()
	defer func() { stopPolling(); pollers.Wait() }()

	// Phase 1: the consumer rejects malformed events, dead-letters recalled
	// lots and cannot reach one facility's system.
	gen := Generate(o.Seed, o.Events)
	rep := &Report{Sent: len(gen), ByClass: map[quarantine.Class]int{}, BySignature: map[string]int{}, Final: map[quarantine.Status]int{}}
	c, err := deadLetter(ctx, st, gen)
	if err != nil {
		return nil, err
	}
	rep.DeadLettered = c.deadLettered
	rep.Consumed, rep.Recalled = int(c.consumed.Load()), int(c.recalled.Load())
	if err := verify(ctx, st, fns.IngestConfig, gen, rep); err != nil {
		return nil, err
	}

	// Phase 2: the outage clears; the on-call engineer marks its signature
	// (and, mistakenly, the recall's) as cleared and replays. Outage events
	// go through; recalled lots fail again until their cap parks them.
	c.outage.Store(false)
	rep.ClearedReasons = []string{"consumer|retries exhausted|v#", "allocation|lot under recall|v#"}
	for round := 0; round <= fns.RedriveCap; round++ {
		rr, err := fns.Redrive.Run(ctx, redrive.Request{
			Source: fns.Source, RequestedBy: "oncall@demo", ClearedReasons: rep.ClearedReasons,
			MaxMessages: redrive.MaxMaxMessages, Approve: true,
		})
		if err != nil {
			return nil, fmt.Errorf("redrive round %d: %w", round+1, err)
		}
		rep.Rounds = append(rep.Rounds, rr)
		if err := c.run(ctx); err != nil {
			return nil, err
		}
		if err := waitEmpty(ctx, st.Clients.SQS, st.QueueURLs["DeadLetterQueue"]); err != nil {
			return nil, err
		}
		time.Sleep(fns.Settle + 100*time.Millisecond) // let replays that stayed away settle
	}
	// Phase 2b: a pharmacist corrects the NDCs typed with a stray "NDC?"
	// prefix, and a standing policy replays corrected records.
	if err := correctAndPolicy(ctx, st, fns, gen, c, rep); err != nil {
		return nil, err
	}
	settled, err := fns.Redrive.Run(ctx, redrive.Request{Action: redrive.ActionSettle, Source: fns.Source, RequestedBy: "schedule:settle"})
	if err != nil {
		return nil, err
	}
	rep.Rounds = append(rep.Rounds, settled)
	stopPolling()
	pollers.Wait()
	rep.Ingest = poller.Stats()

	// Phase 3: the sweeper ages parked records into the Object Lock archive.
	if rep.Sweep, err = fns.Sweeper.Run(ctx); err != nil {
		return nil, err
	}
	if err := verifyFinal(ctx, st, fns, gen, c, rep); err != nil {
		return nil, err
	}
	// Phase 4: the metrics function publishes DLQ health; read it back.
	if _, err := fns.Metrics.Run(ctx); err != nil {
		return nil, err
	}
	if rep.Metrics, err = readMetrics(ctx, st, fns.Source); err != nil {
		return nil, err
	}
	rep.Elapsed = time.Since(start)
	return rep, nil
}

// deadLetter sends gen to the source queue, runs the consumer through the
// outage until the redrive policy has dead-lettered what it rejects, and
// waits until ingest has taken everything off the DLQ.
func deadLetter(ctx context.Context, st *embedded.Stack, gen []Generated) (*consumer, error) {
	if err := produce(ctx, st, gen); err != nil {
		return nil, err
	}
	c := newConsumer(st)
	c.outage.Store(true)
	for _, g := range gen {
		c.byBody[g.Body] = g
		if g.Kind != Good {
			c.deadLettered++
		}
	}
	if err := c.run(ctx); err != nil {
		return nil, err
	}
	return c, waitEmpty(ctx, st.Clients.SQS, st.QueueURLs["DeadLetterQueue"])
}

func produce(ctx context.Context, st *embedded.Stack, gen []Generated) error {
	url := st.QueueURLs["SourceQueue"]
	for i := 0; i < len(gen); i += 10 {
		var entries []sqstypes.SendMessageBatchRequestEntry
		for j, g := range gen[i:min(i+10, len(gen))] {
			entries = append(entries, sqstypes.SendMessageBatchRequestEntry{Id: aws.String(fmt.Sprint(j)), MessageBody: aws.String(g.Body)})
		}
		out, err := st.Clients.SQS.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String(url), Entries: entries})
		if err != nil {
			return fmt.Errorf("produce: %w", err)
		}
		if len(out.Failed) > 0 {
			return fmt.Errorf("produce: %d entries failed", len(out.Failed))
		}
	}
	return nil
}

// consumer is the source queue's consumer: the user's service, simulated.
type consumer struct {
	st                 *embedded.Stack
	byBody             map[string]Generated
	consumed, recalled atomic.Int64
	outage             atomic.Bool
	deadLettered       int // events the scenario makes fail
	mu                 sync.Mutex
	seen               map[string]map[string]bool // event id → message ids consumed
	// sends maps a replay, by record id and round (the attributes redrive
	// sets), to the message ids that carried it: more than one is a
	// duplicate send.
	sends map[replay]map[string]bool
}

type replay struct {
	id    string
	round string
}

// consumedCount is how many distinct messages of event id were consumed.
func (c *consumer) consumedCount(id string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.seen[id])
}

func (c *consumer) note(m sqstypes.Message) {
	id, round := m.MessageAttributes[quarantine.AttrRecordID], m.MessageAttributes[quarantine.AttrRedriveCount]
	if id.StringValue == nil || round.StringValue == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	k := replay{aws.ToString(id.StringValue), aws.ToString(round.StringValue)}
	if c.sends[k] == nil {
		c.sends[k] = map[string]bool{}
	}
	c.sends[k][aws.ToString(m.MessageId)] = true
}

func newConsumer(st *embedded.Stack) *consumer {
	return &consumer{st: st, byBody: map[string]Generated{}, seen: map[string]map[string]bool{}, sends: map[replay]map[string]bool{}}
}

func (c *consumer) run(ctx context.Context) error {
	url := c.st.QueueURLs["SourceQueue"]
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				out, err := c.st.Clients.SQS.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), MaxNumberOfMessages: 10,
					MessageAttributeNames: []string{"All"}})
				if err != nil {
					errs <- fmt.Errorf("consume: %w", err)
					return
				}
				if len(out.Messages) == 0 {
					empty, err := isEmpty(ctx, c.st.Clients.SQS, url)
					if err != nil {
						errs <- err
						return
					}
					if empty {
						return
					}
					time.Sleep(50 * time.Millisecond)
					continue
				}
				for _, m := range out.Messages {
					if err := c.handle(ctx, url, m); err != nil {
						errs <- err
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	return <-errs
}

func (c *consumer) handle(ctx context.Context, url string, m sqstypes.Message) error {
	g := c.byBody[aws.ToString(m.Body)]
	c.note(m)
	sqsc := c.st.Clients.SQS
	kind := g.Kind
	if kind == Outage && !c.outage.Load() {
		kind = Good
	}
	switch kind {
	case Malformed, Outage:
		// Fail: give the message back at once; SQS counts the receive and
		// the redrive policy dead-letters it after MaxReceiveCount.
		_, err := sqsc.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{QueueUrl: aws.String(url), ReceiptHandle: m.ReceiptHandle, VisibilityTimeout: 0})
		return err
	case Recalled:
		// Dead-letter on purpose, saying why, then acknowledge.
		_, err := sqsc.SendMessage(ctx, &sqs.SendMessageInput{
			QueueUrl: aws.String(c.st.QueueURLs["DeadLetterQueue"]), MessageBody: m.Body,
			MessageAttributes: map[string]sqstypes.MessageAttributeValue{
				quarantine.AttrFailureReason: {DataType: aws.String("String"), StringValue: aws.String("lot under recall")},
				quarantine.AttrFailureStage:  {DataType: aws.String("String"), StringValue: aws.String("allocation")},
				quarantine.AttrFailureType:   {DataType: aws.String("String"), StringValue: aws.String("permanent")},
			},
		})
		if err != nil {
			return err
		}
		c.recalled.Add(1)
	default:
		c.consumed.Add(1)
		c.mu.Lock()
		if c.seen[g.ID] == nil {
			c.seen[g.ID] = map[string]bool{}
		}
		c.seen[g.ID][aws.ToString(m.MessageId)] = true
		c.mu.Unlock()
	}
	_, err := sqsc.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(url), ReceiptHandle: m.ReceiptHandle})
	return err
}

func isEmpty(ctx context.Context, api *sqs.Client, url string) (bool, error) {
	out, err := api.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(url), AttributeNames: []sqstypes.QueueAttributeName{
		sqstypes.QueueAttributeNameApproximateNumberOfMessages, sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible,
	}})
	if err != nil {
		return false, fmt.Errorf("queue depth: %w", err)
	}
	return out.Attributes["ApproximateNumberOfMessages"] == "0" && out.Attributes["ApproximateNumberOfMessagesNotVisible"] == "0", nil
}

func waitEmpty(ctx context.Context, api *sqs.Client, url string) error {
	for {
		empty, err := isEmpty(ctx, api, url)
		if err != nil || empty {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s to drain: %w", url, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// verify reads back every record of the demo's source and checks the
// invariants: every dead-lettered event has exactly one record, nothing else
// does, and every seal verifies. (A scan is fine for a demo-sized table.)
func verify(ctx context.Context, st *embedded.Stack, cfg ingest.Config, gen []Generated, rep *Report) error {
	store := dynamostore.New(st.Clients.DynamoDB, cfg.TableName)
	payloads := s3store.New(st.Clients.S3, cfg.PayloadBucket, "")
	var source string
	for name := range cfg.Sources {
		source = name
	}
	byID, err := scanRecords(ctx, st, cfg.TableName, source)
	if err != nil {
		return err
	}
	expected := map[string]Generated{}
	src := quarantine.Source{Name: source, ARN: cfg.Sources[source].ARN, IdempotencyPointer: cfg.Sources[source].IdempotencyPointer}
	for _, g := range gen {
		if g.Kind == Good {
			continue
		}
		key, _ := quarantine.DeriveKey(&src, quarantine.DefaultKeyAttribute, nil, src.Check([]byte(g.Body)).Doc, src.ARN, []byte(g.Body))
		expected[quarantine.RecordID(source, key)] = g
	}
	for id, g := range expected {
		r, ok := byID[id]
		if !ok {
			rep.Lost = append(rep.Lost, id)
			continue
		}
		if _, err := store.Get(ctx, id); err != nil {
			return err
		}
		body, err := quarantine.LoadBody(ctx, payloads, r)
		if err != nil || string(body) != g.Body {
			rep.SealFailures = append(rep.SealFailures, id+": body not verbatim")
		}
	}
	for _, id := range slices.Sorted(maps.Keys(byID)) {
		r := byID[id]
		if _, ok := expected[id]; !ok {
			rep.Unexpected = append(rep.Unexpected, id)
		}
		if err := quarantine.Verify(r); err != nil {
			rep.SealFailures = append(rep.SealFailures, id)
		}
		rep.Records = append(rep.Records, r)
		rep.ByClass[r.FailureClass]++
		rep.BySignature[r.FailureSignature]++
	}
	return nil
}

// scanRecords reads every record of source, skipping the metrics counters.
// (A scan is fine for a demo-sized table.)
func scanRecords(ctx context.Context, st *embedded.Stack, table, source string) (map[string]*quarantine.Record, error) {
	expr, err := expression.NewBuilder().WithFilter(expression.Name("source").Equal(expression.Value(source))).Build()
	if err != nil {
		return nil, err
	}
	p := dynamodb.NewScanPaginator(st.Clients.DynamoDB, &dynamodb.ScanInput{
		TableName: aws.String(table), FilterExpression: expr.Filter(),
		ExpressionAttributeNames: expr.Names(), ExpressionAttributeValues: expr.Values(), ConsistentRead: aws.Bool(true),
	})
	byID := map[string]*quarantine.Record{}
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("scan records: %w", err)
		}
		for _, item := range page.Items {
			if k, ok := item[dynamostore.KeyAttr].(*ddbtypes.AttributeValueMemberS); ok && !dynamostore.IsRecordKey(k.Value) {
				continue // a metrics counter, not a record
			}
			r, err := dynamostore.Unmarshal(item)
			if err != nil {
				return nil, err
			}
			byID[r.DLQID] = r
		}
	}
	return byID, nil
}

// Print writes the human-readable report.
func (r *Report) Print(w io.Writer, sample int) {
	fmt.Fprintf(w, "\nDLQ Quarantine demo\n===================\n")
	fmt.Fprintf(w, "events sent %d · consumed %d · dead-lettered %d (%d on purpose, recalled lots)\n", r.Sent, r.Consumed, r.DeadLettered, r.Recalled)
	fmt.Fprintf(w, "ingest: %d invocations, %d messages received, %d stored and acknowledged, %d reported as batch item failures\n",
		r.Ingest.Invocations, r.Ingest.Received, r.Ingest.Deleted, r.Ingest.Failed)
	fmt.Fprintf(w, "records sealed: %d\n\nby failure class:\n", len(r.Records))
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, c := range slices.Sorted(maps.Keys(r.ByClass)) {
		fmt.Fprintf(tw, "  %s\t%d\n", c, r.ByClass[c])
	}
	tw.Flush()
	fmt.Fprintf(w, "\ntriage by failure signature (stage|reason|schema):\n")
	sigs := slices.Collect(maps.Keys(r.BySignature))
	slices.SortFunc(sigs, func(a, b string) int {
		if d := r.BySignature[b] - r.BySignature[a]; d != 0 {
			return d
		}
		return strings.Compare(a, b)
	})
	for _, s := range sigs {
		fmt.Fprintf(tw, "  %d\t%5.1f%%\t%s\n", r.BySignature[s], 100*float64(r.BySignature[s])/float64(max(len(r.Records), 1)), s)
	}
	tw.Flush()
	fmt.Fprintf(w, "\nsealed records (first %d):\n", sample)
	fmt.Fprintf(tw, "  dlq_id\tclass\tstatus\tattempts\tseal\n")
	for _, rec := range r.Records[:min(sample, len(r.Records))] {
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%d\t%s…\n", rec.DLQID[:min(len(rec.DLQID), 48)], rec.FailureClass, rec.Status, rec.AttemptCount, rec.Seal[:16])
	}
	tw.Flush()
	fmt.Fprintf(w, "\nthe outage clears; redrive with cleared reasons %v:\n", r.ClearedReasons)
	for i, rr := range r.Rounds {
		label := fmt.Sprintf("round %d", i+1)
		if rr.Action == redrive.ActionSettle {
			label = "settle"
		}
		fmt.Fprintf(tw, "  %s\tredriven %d\tskipped %d\theld %d\tparked as poison %d\tfailed %d\tsettled %d\n",
			label, rr.Redriven.Count, rr.Skipped.Count, rr.Held.Count, rr.Parked.Count, rr.Failed.Count, rr.Settled.Count)
	}
	tw.Flush()
	if len(r.Corrected) > 0 {
		fmt.Fprintf(w, "\na pharmacist corrected %d malformed NDCs (the redrive function's correct action, as dlqctl fix sends it; the originals kept and sealed);\n", len(r.Corrected))
		for _, p := range r.Policies {
			fmt.Fprintf(w, "standing policy %s (signature operator|payload corrected) replayed %d of them\n", p.ID, p.Redriven)
		}
	}
	fmt.Fprintf(w, "\nfinal states of the dead-lettered events:\n")
	for _, st := range slices.Sorted(maps.Keys(r.Final)) {
		fmt.Fprintf(tw, "  %s\t%d\n", st, r.Final[st])
	}
	tw.Flush()
	if r.Sweep != nil {
		fmt.Fprintf(w, "\nsweeper: %d parked records archived into Object Lock (COMPLIANCE), %d failed; first %d:\n", len(r.Sweep.Archived), r.Sweep.Failed, min(sample, len(r.Sweep.Archived)))
		for _, a := range r.Sweep.Archived[:min(sample, len(r.Sweep.Archived))] {
			fmt.Fprintf(tw, "  s3://%s/%s\tversion %s\tretained until %s\n", a.Bucket, a.Key, a.VersionID, a.RetainUntil.Format(time.DateOnly))
		}
		tw.Flush()
	}
	if len(r.Metrics) > 0 {
		fmt.Fprintf(w, "\nDLQ health, as CloudWatch holds it (namespace DLQQuarantine):\n")
		for _, name := range slices.Sorted(maps.Keys(r.Metrics)) {
			fmt.Fprintf(tw, "  %s\t%g\n", name, r.Metrics[name])
		}
		tw.Flush()
	}
	fmt.Fprintf(w, "\ninvariants:\n")
	check := func(ok bool, what string, n int) {
		mark := "ok  "
		if !ok {
			mark = "FAIL"
		}
		fmt.Fprintf(w, "  [%s] %s (%d)\n", mark, what, n)
	}
	check(len(r.Lost) == 0, "no dead-lettered message lost", len(r.Lost))
	check(len(r.Unexpected) == 0 && len(r.Records) == r.DeadLettered, "exactly one record per dead-lettered message", len(r.Records))
	check(len(r.SealFailures) == 0, "every seal verifies and every body is verbatim", len(r.SealFailures))
	check(len(r.Duplicated) == 0, "no event consumed twice", len(r.Duplicated))
	check(len(r.WrongState) == 0, "outage events resolved, recalled lots poison-parked at the cap, malformed never replayed", len(r.WrongState))
	check(len(r.BadStubs) == 0, "every archive object verifies (checksum, seal chain, COMPLIANCE lock)", len(r.BadStubs))
	for _, l := range [][]string{r.Lost, r.Unexpected, r.SealFailures, r.Duplicated, r.WrongState, r.BadStubs} {
		for _, x := range l[:min(len(l), 5)] {
			fmt.Fprintf(w, "    %s\n", x)
		}
	}
	fmt.Fprintf(w, "\nfinished in %s\n", r.Elapsed.Round(time.Millisecond))
}

// MarshalSummary is the report as JSON, for scripts.
func (r *Report) MarshalSummary() ([]byte, error) {
	return json.Marshal(map[string]any{
		"sent": r.Sent, "consumed": r.Consumed, "dead_lettered": r.DeadLettered, "records": len(r.Records),
		"lost": len(r.Lost), "unexpected": len(r.Unexpected), "seal_failures": len(r.SealFailures), "by_class": r.ByClass,
	})
}

// verifyFinal checks where every event ended: outage events RESOLVED and
// consumed exactly once, recalled lots parked at their cap and archived
// (stub and object verified), malformed events still quarantined and never
// replayed, every good event consumed exactly once, every seal intact.
func verifyFinal(ctx context.Context, st *embedded.Stack, fns *localrunner.Functions, gen []Generated, c *consumer, rep *Report) error {
	store := dynamostore.New(st.Clients.DynamoDB, fns.IngestConfig.TableName)
	src := quarantine.Source{Name: fns.Source, ARN: fns.IngestConfig.Sources[fns.Source].ARN, IdempotencyPointer: fns.IngestConfig.Sources[fns.Source].IdempotencyPointer}
	for _, g := range gen {
		if g.Kind == Good {
			if n := c.consumedCount(g.ID); n != 1 {
				rep.Duplicated = append(rep.Duplicated, fmt.Sprintf("%s consumed %d times", g.ID, n))
			}
			continue
		}
		key, _ := quarantine.DeriveKey(&src, quarantine.DefaultKeyAttribute, nil, src.Check([]byte(g.Body)).Doc, src.ARN, []byte(g.Body))
		id := quarantine.RecordID(src.Name, key)
		r, err := store.Get(ctx, id)
		if err != nil {
			rep.Lost = append(rep.Lost, id)
			continue
		}
		rep.Final[r.Status]++
		if err := quarantine.Verify(r); err != nil {
			rep.SealFailures = append(rep.SealFailures, id)
		}
		wrong := func(format string, a ...any) {
			rep.WrongState = append(rep.WrongState, id+": "+fmt.Sprintf(format, a...))
		}
		switch g.Kind {
		case Outage:
			if r.Status != quarantine.StatusResolved || r.RedriveCount != 1 {
				wrong("%s after %d redrives, want RESOLVED after 1", r.Status, r.RedriveCount)
			}
			if n := c.consumedCount(g.ID); n != 1 {
				rep.Duplicated = append(rep.Duplicated, fmt.Sprintf("%s consumed %d times after the replay", g.ID, n))
			}
		case Recalled:
			if r.Status != quarantine.StatusArchived {
				wrong("%s, want ARCHIVED (parked as poison at the cap)", r.Status)
				continue
			}
			problems, err := s3store.VerifyStub(ctx, st.Clients.S3, r)
			if err != nil || len(problems) > 0 {
				rep.BadStubs = append(rep.BadStubs, fmt.Sprintf("%s: %v %v", id, problems, err))
			}
			if r.RedriveCount != fns.RedriveCap {
				wrong("archived after %d redrives, want %d", r.RedriveCount, fns.RedriveCap)
			}
		case Malformed:
			if rep.Corrected[g.ID] {
				// Corrected, replayed by the standing policy, consumed once,
				// the original kept beside the correction.
				if r.Status != quarantine.StatusResolved || r.RedriveCount != 1 || len(r.Corrections) != 1 || r.BodySHA256 != quarantine.BodySHA256([]byte(g.Body)) ||
					r.RedrivenBy == "" || !strings.HasPrefix(r.RedrivenBy, quarantine.PolicyActorPrefix) {
					wrong("corrected: %s after %d redrives by %q with %d corrections, want RESOLVED once by the policy", r.Status, r.RedriveCount, r.RedrivenBy, len(r.Corrections))
				}
				if n := c.consumedCount(g.ID); n != 1 {
					rep.Duplicated = append(rep.Duplicated, fmt.Sprintf("%s consumed %d times after its correction", g.ID, n))
				}
				continue
			}
			if r.Status != quarantine.StatusQuarantined || r.RedriveCount != 0 || r.FailureClass != quarantine.ClassValidation {
				wrong("%s class %s after %d redrives: malformed events are never replayed", r.Status, r.FailureClass, r.RedriveCount)
			}
		}
	}
	return nil
}

// MaxCorrections bounds the malformed events the demo's pharmacist fixes.
const MaxCorrections = 5

// correctAndPolicy corrects up to MaxCorrections malformed events through
// the redrive function's correct action, creates a standing policy for
// corrected records and applies it, then lets the consumer take the
// replays and ingest drain the DLQ.
func correctAndPolicy(ctx context.Context, st *embedded.Stack, fns *localrunner.Functions, gen []Generated, c *consumer, rep *Report) error {
	src := quarantine.Source{Name: fns.Source, ARN: fns.IngestConfig.Sources[fns.Source].ARN, IdempotencyPointer: fns.IngestConfig.Sources[fns.Source].IdempotencyPointer}
	rep.Corrected = map[string]bool{}
	for _, g := range gen {
		if g.Kind != Malformed || !strings.Contains(g.Body, `"ndc":"NDC?`) || len(rep.Corrected) == MaxCorrections {
			continue
		}
		fixed := strings.Replace(g.Body, `"ndc":"NDC?`, `"ndc":"`, 1)
		key, _ := quarantine.DeriveKey(&src, quarantine.DefaultKeyAttribute, nil, src.Check([]byte(g.Body)).Doc, src.ARN, []byte(g.Body))
		req, _ := json.Marshal(redrive.Request{Action: redrive.ActionCorrect, Source: fns.Source, IDs: []string{quarantine.RecordID(fns.Source, key)},
			RequestedBy: "pharmacist@demo", Reason: "NDC keyed with a stray prefix; corrected from the shipping manifest", Payload: fixed})
		if _, err := fns.Redrive.Handle(ctx, req); err != nil {
			return fmt.Errorf("correct: %w", err)
		}
		rep.Corrected[g.ID] = true
		c.mu.Lock()
		c.byBody[fixed] = Generated{ID: g.ID, Body: fixed, Kind: Good}
		c.mu.Unlock()
	}
	schemaVersion := ""
	if s, err := sources.Build(fns.IngestConfig.Sources); err == nil && s[fns.Source] != nil {
		schemaVersion = s[fns.Source].SchemaVersion
	}
	p, err := policy.New(policy.Spec{Source: fns.Source, Signatures: []string{quarantine.Signature(quarantine.StageCorrection, quarantine.ReasonCorrection, schemaVersion)},
		MaxPerRun: 50, ExpiresAt: time.Now().Add(time.Hour), Note: "replay what the pharmacists correct"}, "lead@demo", time.Now())
	if err != nil {
		return err
	}
	if err := dynamostore.NewPolicyStore(st.Clients.DynamoDB, fns.IngestConfig.TableName).Create(ctx, p); err != nil {
		return err
	}
	out, err := fns.Redrive.Handle(ctx, []byte(`{"action":"policies","source":"`+fns.Source+`","requested_by":"schedule:policies"}`))
	if err != nil {
		return fmt.Errorf("standing policies: %w", err)
	}
	rep.Policies = out.Policies
	if err := c.run(ctx); err != nil {
		return err
	}
	if err := waitEmpty(ctx, st.Clients.SQS, st.QueueURLs["DeadLetterQueue"]); err != nil {
		return err
	}
	time.Sleep(fns.Settle + 100*time.Millisecond)
	return nil
}

// syncWriter serializes writes to w.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

// readMetrics reads back, from CloudWatch, what the metrics function
// published for source, and the sweeper's archive counts.
func readMetrics(ctx context.Context, st *embedded.Stack, source string) (map[string]float64, error) {
	out := map[string]float64{}
	src := []cwtypes.Dimension{{Name: aws.String(metrics.DimSource), Value: aws.String(source)}}
	for _, m := range []struct {
		name string
		dims []cwtypes.Dimension
	}{
		{metrics.MetricDLQDepth, src}, {metrics.MetricOldestAge, src}, {metrics.MetricArrivals, src}, {metrics.MetricSuccessRate, src},
		{metrics.MetricPoison, src}, {metrics.MetricNewPoison, src}, {metrics.MetricDominantShare, src},
		{sweeper.MetricArchived, nil}, {sweeper.MetricFailures, nil},
	} {
		res, err := st.Clients.CloudWatch.GetMetricStatistics(ctx, &cloudwatch.GetMetricStatisticsInput{
			Namespace: aws.String("DLQQuarantine"), MetricName: aws.String(m.name), Dimensions: m.dims,
			StartTime: aws.Time(time.Now().Add(-time.Hour)), EndTime: aws.Time(time.Now().Add(time.Hour)),
			Period: aws.Int32(3600), Statistics: []cwtypes.Statistic{cwtypes.StatisticMaximum},
		})
		if err != nil {
			return nil, fmt.Errorf("read back %s: %w", m.name, err)
		}
		if len(res.Datapoints) > 0 {
			out[m.name] = aws.ToFloat64(res.Datapoints[0].Maximum)
		}
	}
	return out, nil
}

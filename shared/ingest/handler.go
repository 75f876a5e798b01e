package ingest

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-lambda-go/events"

	"github.com/dlqquarantine/dlqq/shared/emf"
	"github.com/dlqquarantine/dlqq/shared/quarantine"
)

// Handler is the ingest Lambda handler.
type Handler struct {
	q           *quarantine.Quarantiner
	log         *slog.Logger
	metrics     io.Writer
	now         func() time.Time
	concurrency int
}

// NewHandler returns a Handler. Logs go to log; EMF metric documents go to
// metrics (stdout in Lambda; io.Discard to drop them).
func NewHandler(q *quarantine.Quarantiner, log *slog.Logger, metrics io.Writer, now func() time.Time, concurrency int) *Handler {
	if now == nil {
		now = time.Now
	}
	if concurrency <= 0 {
		concurrency = 10
	}
	if metrics == nil {
		metrics = io.Discard
	}
	return &Handler{q: q, log: log, metrics: metrics, now: now, concurrency: concurrency}
}

type result struct {
	msg     quarantine.Message
	outcome quarantine.Outcome
	err     error
}

// Handle stores every message of the batch and returns the ids of those not
// durably stored. It never fails the whole batch for one message.
func (h *Handler) Handle(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
	results := make([]result, len(ev.Records))
	sem := make(chan struct{}, h.concurrency)
	var wg sync.WaitGroup
	for i, rec := range ev.Records {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			results[i] = h.one(ctx, rec)
		}()
	}
	wg.Wait()

	var resp events.SQSEventResponse
	failedGroups := map[string]bool{}
	fifo := len(ev.Records) > 0 && strings.HasSuffix(ev.Records[0].EventSourceARN, ".fifo")
	for i, r := range results {
		group := ev.Records[i].Attributes["MessageGroupId"]
		// On a FIFO queue, everything after a failure in the same group is
		// returned too, so the group is redelivered in order.
		if r.err != nil || (fifo && failedGroups[group]) {
			failedGroups[group] = true
			resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: ev.Records[i].MessageId})
		}
	}
	h.emit(results)
	return resp, nil
}

func (h *Handler) one(ctx context.Context, rec events.SQSMessage) (res result) {
	res.msg = ToMessage(rec)
	defer func() {
		if p := recover(); p != nil {
			res.err = fmt.Errorf("panic while quarantining message %s", rec.MessageId)
			h.log.ErrorContext(ctx, "quarantine panicked", "message_id", rec.MessageId, "error_kind", "panic")
		}
	}()
	res.outcome, res.err = h.q.Quarantine(ctx, res.msg)
	if res.err != nil {
		h.log.ErrorContext(ctx, "quarantine failed; message will be redelivered",
			"message_id", rec.MessageId, "event_source", rec.EventSourceARN, "error_kind", quarantine.ErrorKind(res.err))
		return res
	}
	r := res.outcome.Record
	h.log.InfoContext(ctx, "message quarantined",
		"message_id", rec.MessageId,
		"result", string(res.outcome.Result),
		"source", r.Source,
		"record", quarantine.LogRef(r.DLQID),
		"key_origin", string(r.KeyOrigin),
		"status", string(r.Status),
		"class", string(r.FailureClass),
		"signature", r.FailureSignature,
		"body_sha256", quarantine.BodySHA256(res.msg.Body),
		"attempt_count", r.AttemptCount,
		"version", r.Version,
	)
	return res
}

func (h *Handler) emit(results []result) {
	type key struct{ source, class string }
	quarantined := map[key]float64{}
	perSource := map[string]map[string]float64{}
	bump := func(source, metric string) {
		if perSource[source] == nil {
			perSource[source] = map[string]float64{"Duplicates": 0, "StoreFailures": 0}
		}
		perSource[source][metric]++
	}
	for _, r := range results {
		switch {
		case r.err != nil:
			bump(sourceOf(r.msg), "StoreFailures")
		case r.outcome.Result == quarantine.ResultDuplicate:
			bump(r.outcome.Record.Source, "Duplicates")
		default:
			quarantined[key{r.outcome.Record.Source, string(r.outcome.Record.FailureClass)}]++
			bump(r.outcome.Record.Source, "Arrivals")
		}
	}
	now := h.now()
	for k, n := range quarantined {
		if err := emf.Write(h.metrics, now, map[string]string{"Source": k.source, "Class": k.class}, map[string]float64{"Quarantined": n}); err != nil {
			h.log.Warn("emit metrics failed", "error_kind", "emf")
		}
	}
	for source, counts := range perSource {
		if err := emf.Write(h.metrics, now, map[string]string{"Source": source}, counts); err != nil {
			h.log.Warn("emit metrics failed", "error_kind", "emf")
		}
	}
}

// sourceOf names the source of a message that could not be stored, for the
// failure metric: the DeadLetterQueueSourceArn's queue, else the DLQ's.
func sourceOf(m quarantine.Message) string {
	if m.SourceARN != "" {
		return quarantine.ARNResource(m.SourceARN)
	}
	return quarantine.ARNResource(m.DLQARN)
}

// ToMessage converts an aws-lambda-go SQS message into the core's Message,
// keeping every attribute. A string attribute that is not valid UTF-8 keeps
// its bytes as a binary value so nothing is lost to re-encoding.
func ToMessage(rec events.SQSMessage) quarantine.Message {
	m := quarantine.Message{
		MessageID:      rec.MessageId,
		Body:           []byte(rec.Body),
		DLQARN:         rec.EventSourceARN,
		SourceARN:      rec.Attributes["DeadLetterQueueSourceArn"],
		TraceHeader:    rec.Attributes["AWSTraceHeader"],
		MessageGroupID: rec.Attributes["MessageGroupId"],
	}
	if v, err := strconv.ParseInt(rec.Attributes["SentTimestamp"], 10, 64); err == nil {
		m.SentTimestamp = v
	}
	if v, err := strconv.Atoi(rec.Attributes["ApproximateReceiveCount"]); err == nil {
		m.ReceiveCount = v
	}
	if len(rec.MessageAttributes) > 0 {
		m.Attributes = make(map[string]quarantine.Attribute, len(rec.MessageAttributes))
		for name, a := range rec.MessageAttributes {
			qa := quarantine.Attribute{DataType: a.DataType}
			if a.StringValue != nil {
				if utf8.ValidString(*a.StringValue) {
					qa.StringValue = *a.StringValue
				} else {
					qa.BinaryValue = []byte(*a.StringValue)
				}
			}
			if len(a.BinaryValue) > 0 {
				qa.BinaryValue = append([]byte(nil), a.BinaryValue...)
			}
			m.Attributes[name] = qa
		}
	}
	return m
}

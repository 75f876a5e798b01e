package ingest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-lambda-go/events"

	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
	"github.com/dlqquarantine/dlqq/shared/runtime/emf"
	"github.com/dlqquarantine/dlqq/shared/runtime/fanout"
)

// Handler is the ingest Lambda handler.
type Handler struct {
	q           *Quarantiner
	log         *slog.Logger
	metrics     io.Writer
	now         func() time.Time
	concurrency int
	// dlqs are the queues batches are taken from (AcceptOnly); nil: any.
	dlqs map[string]bool
}

// AcceptOnly makes h refuse a batch with a record from any queue but arns
// (Config.DLQARNs): ErrUnknownDLQ, nothing written. No arns: any queue.
func (h *Handler) AcceptOnly(arns []string) *Handler {
	h.dlqs = nil
	if len(arns) > 0 {
		h.dlqs = make(map[string]bool, len(arns))
	}
	for _, a := range arns {
		h.dlqs[a] = true
	}
	return h
}

// ErrUnknownDLQ is the function error for a batch from a queue that is not
// one of the DLQs ingest takes (an event source mapping someone pointed at
// the function): nothing of it is written, and IngestErrorsAlarm pages.
var ErrUnknownDLQ = errors.New("a batch from a queue that is not a configured DLQ")

// NewHandler returns a Handler. Logs go to log; EMF metric documents go to
// metrics (stdout in Lambda; io.Discard to drop them).
func NewHandler(q *Quarantiner, log *slog.Logger, metrics io.Writer, now func() time.Time, concurrency int) *Handler {
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
	msg     Message
	outcome Outcome
	err     error
	// deferred is set on a FIFO message not attempted because an earlier
	// message of its group was not stored (err is set too).
	deferred bool
}

// ErrNotSQSBatch is the function error for an event that is not an SQS
// batch (a redrive request or an S3 notification sent to ingest, say):
// nothing of it is written.
var ErrNotSQSBatch = errors.New("not an SQS batch")

var errDeferred = errors.New("an earlier message of its FIFO group was not stored")

// HandleRaw is the Lambda entry point: it takes the raw event, so that an
// event of another shape is refused (ErrNotSQSBatch) instead of being
// decoded into an empty or half-filled SQS batch.
func (h *Handler) HandleRaw(ctx context.Context, raw json.RawMessage) (events.SQSEventResponse, error) {
	var ev events.SQSEvent
	if err := json.Unmarshal(raw, &ev); err != nil {
		h.log.ErrorContext(ctx, "event refused", "error_kind", "not_sqs_batch")
		return events.SQSEventResponse{}, fmt.Errorf("%w: the event does not decode as one", ErrNotSQSBatch)
	}
	return h.Handle(ctx, ev)
}

// CheckEvent reports why ev is not a batch from an SQS event source
// mapping, or nil: it has records, each from "aws:sqs" with a message id
// and an SQS queue ARN. The error names fields, never values.
func CheckEvent(ev events.SQSEvent) error {
	if len(ev.Records) == 0 {
		return fmt.Errorf("%w: no Records", ErrNotSQSBatch)
	}
	for i, r := range ev.Records {
		switch {
		case r.EventSource != "aws:sqs":
			return fmt.Errorf("%w: record %d: eventSource is not aws:sqs", ErrNotSQSBatch, i)
		case r.MessageId == "":
			return fmt.Errorf("%w: record %d: no messageId", ErrNotSQSBatch, i)
		case !isQueueARN(r.EventSourceARN):
			return fmt.Errorf("%w: record %d: eventSourceARN is not an SQS queue ARN", ErrNotSQSBatch, i)
		}
	}
	return nil
}

// isQueueARN reports whether arn has the shape arn:<partition>:sqs:<region>:<account>:<queue>.
func isQueueARN(arn string) bool {
	p := strings.Split(arn, ":")
	if len(p) != 6 || p[0] != "arn" || p[1] == "" || p[2] != "sqs" || p[3] == "" || p[4] == "" || p[5] == "" || len(p[5]) > 80 {
		return false
	}
	for _, c := range p[4] {
		if c < '0' || c > '9' {
			return false
		}
	}
	return !strings.ContainsAny(p[5], "#/ ")
}

// Handle stores every message of the batch and returns the ids of those not
// durably stored. It never fails the whole batch for one message; it
// refuses, writing nothing, an event that is not an SQS batch.
//
// Messages are stored concurrently, except on a FIFO queue: there each
// message group's messages are stored one after the other in batch order
// (groups run concurrently), each stamped after the one before it, and a
// group stops at its first failure: the rest of it is returned unattempted,
// so the group is redelivered, and recorded, in order.
func (h *Handler) Handle(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
	if err := CheckEvent(ev); err != nil {
		h.log.ErrorContext(ctx, "event refused", "error_kind", "not_sqs_batch")
		return events.SQSEventResponse{}, err
	}
	if h.dlqs != nil {
		for i, r := range ev.Records {
			if !h.dlqs[r.EventSourceARN] {
				h.log.ErrorContext(ctx, "event refused", "error_kind", "unknown_dlq", "event_source", r.EventSourceARN)
				return events.SQSEventResponse{}, fmt.Errorf("%w: record %d", ErrUnknownDLQ, i)
			}
		}
	}
	results := make([]result, len(ev.Records))
	ls := lanes(ev)
	// Every lane runs whatever becomes of ctx: a lane left out would leave
	// its messages' results empty, which reads as stored.
	fanout.Run(context.WithoutCancel(ctx), len(ls), h.concurrency, func(_ context.Context, l int) error {
		lane := ls[l]
		var after time.Time
		for k, i := range lane {
			rec := ev.Records[i]
			m := ToMessage(rec)
			if k > 0 && results[lane[k-1]].err != nil {
				results[i] = result{msg: m, err: errDeferred, deferred: true}
				h.log.WarnContext(ctx, "message deferred: an earlier message of its FIFO group was not stored",
					"message_id", rec.MessageId, "event_source", rec.EventSourceARN)
				continue
			}
			m.After = after
			results[i] = h.one(ctx, rec, m)
			after = results[i].outcome.At
		}
		return nil
	})

	var resp events.SQSEventResponse
	for i, r := range results {
		if r.err != nil {
			resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: ev.Records[i].MessageId})
		}
	}
	h.emit(results)
	return resp, nil
}

// lanes splits a batch into runs of record indexes stored one after the
// other: one per message group of a FIFO queue, in batch order; one per
// message otherwise.
func lanes(ev events.SQSEvent) [][]int {
	type group struct{ queue, id string }
	var out [][]int
	byGroup := map[group]int{}
	for i, r := range ev.Records {
		if !strings.HasSuffix(r.EventSourceARN, ".fifo") {
			out = append(out, []int{i})
			continue
		}
		g := group{r.EventSourceARN, r.Attributes["MessageGroupId"]}
		j, ok := byGroup[g]
		if !ok {
			j = len(out)
			byGroup[g] = j
			out = append(out, nil)
		}
		out[j] = append(out[j], i)
	}
	return out
}

func (h *Handler) one(ctx context.Context, rec events.SQSMessage, m Message) (res result) {
	res.msg = m
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
	attrs := []any{
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
	}
	if res.outcome.Route != RouteConfigured {
		// Quarantined all the same: reported, so that someone adds the
		// source (or fixes its ARN).
		attrs = append(attrs, "route", res.outcome.Route)
	}
	if p := r.Predecessor; p != nil && res.outcome.Result == ResultCreated {
		attrs = append(attrs, "predecessor", quarantine.LogRef(p.ID), "predecessor_reason", p.Reason)
	}
	h.log.InfoContext(ctx, "message quarantined", attrs...)
	if p := r.Predecessor; p != nil && p.Reason == quarantine.LinkSealMismatch && res.outcome.Result == ResultCreated {
		h.log.ErrorContext(ctx, "record fails its seal; set aside, the arrival is stored in a successor",
			"record", quarantine.LogRef(p.ID), "successor", quarantine.LogRef(r.DLQID), "error_kind", "seal_mismatch")
	}
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
		case r.deferred:
			bump(sourceOf(r.msg), "Deferred")
		case r.err != nil:
			bump(sourceOf(r.msg), "StoreFailures")
		case r.outcome.Result == ResultDuplicate:
			bump(r.outcome.Record.Source, "Duplicates")
		default:
			quarantined[key{r.outcome.Record.Source, string(r.outcome.Record.FailureClass)}]++
			bump(r.outcome.Record.Source, "Arrivals")
		}
		switch {
		case r.err != nil:
		case r.outcome.Route == RouteUnconfigured:
			bump(r.outcome.Record.Source, "Unconfigured")
		case r.outcome.Route == RouteUnrouted:
			bump(r.outcome.Record.Source, "Unrouted")
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
func sourceOf(m Message) string {
	if m.SourceARN != "" {
		return ARNResource(m.SourceARN)
	}
	return ARNResource(m.DLQARN)
}

// ToMessage converts an aws-lambda-go SQS message into the core's Message,
// keeping every attribute. A string attribute that is not valid UTF-8 keeps
// its bytes as a binary value so nothing is lost to re-encoding.
func ToMessage(rec events.SQSMessage) Message {
	m := Message{
		MessageID:      rec.MessageId,
		Body:           []byte(rec.Body),
		DLQARN:         rec.EventSourceARN,
		SourceARN:      rec.Attributes["DeadLetterQueueSourceArn"],
		TraceHeader:    rec.Attributes["AWSTraceHeader"],
		MessageGroupID: rec.Attributes["MessageGroupId"],
		SequenceNumber: rec.Attributes["SequenceNumber"],
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

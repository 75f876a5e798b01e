package redrive

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
)

// DefaultSettleMargin is the ingest lag a settle window allows beyond the
// source queue's own redelivery time: the DLQ event source's batching
// window, an ingest invocation, and redeliveries of a failed ingest after
// the DLQ visibility timeout. With the template's defaults that is
// 1 s + 30 s + 2 × 180 s = 391 s; ten minutes leaves room.
const DefaultSettleMargin = 10 * time.Minute

// MinSettleWindow is the shortest settle window that cannot resolve a
// replay before it can come back, given the source queue's attributes (as
// GetQueueAttributes returns them): a replay is first delivered after the
// queue's DelaySeconds; one the consumer keeps failing is received
// maxReceiveCount times, each time hidden for the visibility timeout,
// before SQS moves it to the DLQ, and ingest then takes up to margin to
// record it. A queue without a redrive policy dead-letters only through
// its consumer, after one receive.
func MinSettleWindow(attrs map[string]string, margin time.Duration) (time.Duration, error) {
	v, ok := attrs[string(sqstypes.QueueAttributeNameVisibilityTimeout)]
	if !ok {
		return 0, errors.New("no VisibilityTimeout attribute")
	}
	vis, err := strconv.Atoi(v)
	if err != nil || vis < 0 {
		return 0, fmt.Errorf("VisibilityTimeout %q is not a number of seconds", v)
	}
	delay := 0
	if d, ok := attrs[string(sqstypes.QueueAttributeNameDelaySeconds)]; ok {
		if delay, err = strconv.Atoi(d); err != nil || delay < 0 {
			return 0, fmt.Errorf("DelaySeconds %q is not a number of seconds", d)
		}
	}
	receives := 1
	if raw := attrs[string(sqstypes.QueueAttributeNameRedrivePolicy)]; raw != "" {
		// maxReceiveCount is a number, or a string holding one, depending
		// on how the policy was set.
		var p struct {
			MaxReceiveCount json.RawMessage `json:"maxReceiveCount"`
		}
		if err := json.Unmarshal([]byte(raw), &p); err != nil {
			return 0, fmt.Errorf("RedrivePolicy is not JSON: %w", err)
		}
		s := string(p.MaxReceiveCount)
		if uq, err := strconv.Unquote(s); err == nil {
			s = uq
		}
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			return 0, fmt.Errorf("RedrivePolicy maxReceiveCount %s is not a positive number", p.MaxReceiveCount)
		}
		receives = n
	}
	return time.Duration(delay+receives*vis)*time.Second + margin, nil
}

// settleWindow is the window this run settles with: the configured one, or
// longer when the source queue's redrive policy and visibility timeout,
// read now, say a replay can take longer to come back. It never returns a
// window shorter than the configured one, and returns an error (settle
// nothing) when the attributes cannot be read.
func (r *run) settleWindow(ctx context.Context) (time.Duration, error) {
	return r.settleWindowOf(ctx, r.src)
}

// settleWindowOf is settleWindow for the queue of src (a record replayed
// into another queue comes back through that queue's DLQ, as late as that
// queue's attributes allow), read once a run.
func (r *run) settleWindowOf(ctx context.Context, src *quarantine.Source) (time.Duration, error) {
	if w, ok := r.windows[src.Name]; ok {
		return w, nil
	}
	url, err := r.queueOf(ctx, src)
	if err != nil {
		return 0, err
	}
	out, err := r.s.sqs.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(url),
		AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameRedrivePolicy, sqstypes.QueueAttributeNameVisibilityTimeout,
			sqstypes.QueueAttributeNameDelaySeconds}})
	if err != nil {
		return 0, fmt.Errorf("source queue attributes: %w", err)
	}
	derived, err := MinSettleWindow(out.Attributes, r.s.cfg.SettleMargin)
	if err != nil {
		return 0, fmt.Errorf("source queue attributes: %w", err)
	}
	if r.windows == nil {
		r.windows = map[string]time.Duration{}
	}
	r.windows[src.Name] = max(r.s.cfg.SettleWindow, src.SettleWindow, derived)
	return r.windows[src.Name], nil
}

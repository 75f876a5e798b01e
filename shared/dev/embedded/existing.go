package embedded

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
)

// ExistingQueue is a queue the stack does not create: a user's queue from
// before the stack, which Start creates before the template's resources
// (outside the template) and the template's parameters register.
type ExistingQueue struct {
	// Name is the queue's whole name (".fifo" for a FIFO queue).
	Name string
	FIFO bool
	// DLQ, when set, is the queue its redrive policy points at: another
	// existing queue's Name (set when the queue is created, as the user
	// set it up long ago), or the logical id of one of the template's
	// queues ("DeadLetterQueue"), set once the stack's resources exist:
	// the documented way to attach an old queue to the stack's DLQ.
	DLQ string
	// MaxReceiveCount is the redrive policy's (default 3), Visibility the
	// queue's visibility timeout in seconds (default 30).
	MaxReceiveCount, Visibility int
	// Tags are the queue's tags (dlq-quarantine:source=<stack> grants a
	// source to the redrive role with TaggedSourceAccess).
	Tags map[string]string
}

// createExisting creates the existing queues, before the template's
// resources: first those whose redrive policy it does not set now (none,
// or the template's DLQ, which attachExisting sets), then those whose DLQ
// is another existing queue. Each goes into Names, QueueURLs and
// QueueARNs under its name.
func (s *Stack) createExisting(ctx context.Context, qs []ExistingQueue) error {
	for _, pass := range []bool{false, true} {
		for _, q := range qs {
			if now := q.DLQ != "" && !s.isTemplateQueue(q.DLQ); now != pass {
				continue
			}
			attrs := map[string]string{"VisibilityTimeout": strconv.Itoa(cmp.Or(q.Visibility, 30)), "MessageRetentionPeriod": "1209600"}
			if q.FIFO {
				attrs["FifoQueue"] = "true"
			}
			if pass {
				arn, ok := s.QueueARNs[q.DLQ]
				if !ok {
					return fmt.Errorf("existing queue %s: its DLQ %s is neither an existing queue nor one of the template's", q.Name, q.DLQ)
				}
				attrs["RedrivePolicy"] = redrivePolicy(arn, q.MaxReceiveCount)
			}
			if err := s.existingQueue(ctx, q.Name, attrs); err != nil {
				return err
			}
			if len(q.Tags) > 0 {
				if _, err := s.Clients.SQS.TagQueue(ctx, &sqs.TagQueueInput{QueueUrl: aws.String(s.QueueURLs[q.Name]), Tags: q.Tags}); err != nil {
					return fmt.Errorf("existing queue %s: %w", q.Name, err)
				}
			}
		}
	}
	return nil
}

// attachExisting points the redrive policy of each existing queue whose
// DLQ is one of the template's at that queue: what an operator does to
// attach an old queue once the stack is deployed.
func (s *Stack) attachExisting(ctx context.Context, qs []ExistingQueue) error {
	for _, q := range qs {
		if !s.isTemplateQueue(q.DLQ) {
			continue
		}
		if _, err := s.Clients.SQS.SetQueueAttributes(ctx, &sqs.SetQueueAttributesInput{
			QueueUrl:   aws.String(s.QueueURLs[q.Name]),
			Attributes: map[string]string{"RedrivePolicy": redrivePolicy(s.QueueARNs[q.DLQ], q.MaxReceiveCount)},
		}); err != nil {
			return fmt.Errorf("attach existing queue %s to %s: %w", q.Name, s.Names[q.DLQ], err)
		}
	}
	return nil
}

func (s *Stack) isTemplateQueue(id string) bool {
	_, ok := s.Template.GetAllSQSQueueResources()[id]
	return ok
}

// existingQueue creates (or, on a persistent stack, updates) one existing
// queue and records its URL and ARN.
func (s *Stack) existingQueue(ctx context.Context, name string, attrs map[string]string) error {
	url, arn, err := s.createQueueARN(ctx, name, attrs)
	if err != nil {
		return fmt.Errorf("existing queue %s: %w", name, err)
	}
	s.Names[name], s.QueueURLs[name], s.QueueARNs[name] = name, url, arn
	return nil
}

func redrivePolicy(dlqARN string, maxReceives int) string {
	b, _ := json.Marshal(map[string]any{"deadLetterTargetArn": dlqARN, "maxReceiveCount": cmp.Or(maxReceives, 3)})
	return string(b)
}

// QueueURLByARN returns the URL of the stack's queue (the template's or an
// existing one) with the given ARN.
func (s *Stack) QueueURLByARN(arn string) (string, bool) {
	for id, a := range s.QueueARNs {
		if a == arn {
			return s.QueueURLs[id], true
		}
	}
	return "", false
}

// LocalSources are the sources of the local stack (the demo, `dlqlocal
// local`, the tests that run several sources), besides the template's
// example source queue (SourceQueue, standard) and its DLQ:
//
//   - SharedSource, a standard queue that existed before the stack,
//     attached to the stack's DLQ: it shares the DLQ with the example
//     source, and ingest routes each message by its
//     DeadLetterQueueSourceArn;
//   - FIFOSource with its own FIFO DLQ (FIFODLQ), an existing pair
//     attached as the template's ExtraSourceQueueArn and ExtraDLQArn.
//
// Both are registered through the template's parameters. WithLocalSources
// adds them to a stack's options.
const (
	SharedSource = "returns"
	FIFOSource   = "ledger.fifo"
	FIFODLQ      = "ledger-dlq.fifo"
)

// WithLocalSources returns o with the local stack's existing queues
// (LocalSources) and the parameters that register them; a parameter o
// already sets is kept. It gives o a random stack name when it has none
// (the queue names start with it). Their redrive policies take the
// template's MaxReceiveCount and SourceVisibilityTimeoutSeconds from
// o.Params (default 3 and 30 s).
func WithLocalSources(o Options) Options {
	if o.StackName == "" {
		o.StackName = RandomName("dlqq")
	}
	maxReceives, _ := paramInt(o.Params, "MaxReceiveCount")
	visibility, _ := paramInt(o.Params, "SourceVisibilityTimeoutSeconds")
	shared, fifo, fifoDLQ := o.StackName+"-"+SharedSource, o.StackName+"-"+FIFOSource, o.StackName+"-"+FIFODLQ
	o.Existing = append(o.Existing,
		ExistingQueue{Name: shared, DLQ: "DeadLetterQueue", MaxReceiveCount: maxReceives, Visibility: visibility},
		ExistingQueue{Name: fifoDLQ, FIFO: true, Visibility: visibility},
		ExistingQueue{Name: fifo, FIFO: true, DLQ: fifoDLQ, MaxReceiveCount: maxReceives, Visibility: visibility},
	)
	arn := func(name string) string { return fmt.Sprintf("arn:aws:sqs:%s:%s:%s", Region, Account, name) }
	params := maps.Clone(o.Params)
	if params == nil {
		params = map[string]any{}
	}
	// Their settings (ExtraSources: arn and dlq come from the registration,
	// the shared source's dlq being the stack's), the registered queue
	// (SourceQueueArns) and the attached pair (ExtraSourceQueueArn,
	// ExtraDLQArn).
	settings := map[string]any{"idempotency_pointer": "/event_id", "schema": "inventory-movement.v1"}
	extra, _ := json.Marshal(map[string]any{shared: settings, fifo: settings})
	for k, v := range map[string]any{
		"ExtraSources":        string(extra),
		"SourceQueueArns":     arn(shared),
		"ExtraDLQArn":         arn(fifoDLQ),
		"ExtraSourceQueueArn": arn(fifo),
	} {
		if _, ok := params[k]; !ok {
			params[k] = v
		}
	}
	o.Params = params
	return o
}

// paramInt reads an integer parameter given as a number or a string.
func paramInt(params map[string]any, name string) (int, bool) {
	switch v := params[name].(type) {
	case int:
		return v, true
	case float64:
		return int(v), true
	case string:
		n, err := strconv.Atoi(v)
		return n, err == nil
	}
	return 0, false
}

package embedded_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/dlqquarantine/dlqq/shared/dev/embedded"
)

// The local stack's sources: the example source and an existing standard
// queue attached to the stack's DLQ (shared), and an existing FIFO pair
// registered as the attached DLQ; ingest takes batches from both, and
// from the stack's FIFO DLQ.
func TestLocalSourcesAreExistingQueuesAttachedToTheStack(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := embedded.ForTest(t, embedded.WithLocalSources(embedded.Options{NoS3: true, Params: map[string]any{"MaxReceiveCount": 4}}))
	name := func(s string) string { return st.Env.StackName + "-" + s }
	for _, c := range []struct {
		queue, dlq string
		fifo       bool
	}{
		{name(embedded.SharedSource), st.QueueARNs["DeadLetterQueue"], false},
		{name(embedded.FIFOSource), st.QueueARNs[name(embedded.FIFODLQ)], true},
		{name(embedded.FIFODLQ), "", true},
	} {
		url, ok := st.QueueURLs[c.queue]
		if !ok {
			t.Errorf("no existing queue %s: %v", c.queue, st.QueueURLs)
			continue
		}
		if url2, ok := st.QueueURLByARN(st.QueueARNs[c.queue]); !ok || url2 != url {
			t.Errorf("QueueURLByARN(%s) = %q, %v; want %q", st.QueueARNs[c.queue], url2, ok, url)
		}
		a, err := st.Clients.SQS.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(url), AttributeNames: []sqstypes.QueueAttributeName{"All"}})
		if err != nil {
			t.Fatal(err)
		}
		var rp struct {
			DeadLetterTargetArn string `json:"deadLetterTargetArn"`
			MaxReceiveCount     int    `json:"maxReceiveCount"`
		}
		if raw := a.Attributes["RedrivePolicy"]; raw != "" {
			if err := json.Unmarshal([]byte(raw), &rp); err != nil {
				t.Fatal(err)
			}
		}
		if rp.DeadLetterTargetArn != c.dlq || (c.dlq != "" && rp.MaxReceiveCount != 4) {
			t.Errorf("%s: redrive policy %+v, want DLQ %q after 4 receives", c.queue, rp, c.dlq)
		}
		if fifo := a.Attributes["FifoQueue"] == "true"; fifo != c.fifo {
			t.Errorf("%s: FIFO %v, want %v", c.queue, fifo, c.fifo)
		}
	}
	fn, err := st.Template.GetServerlessFunctionWithName("IngestFunction")
	if err != nil {
		t.Fatal(err)
	}
	dlqs := strings.Split(fn.Environment.Variables["DLQ_ARNS"], ",")
	if len(dlqs) != 3 || dlqs[0] != st.QueueARNs["DeadLetterQueue"] || dlqs[1] != st.QueueARNs["FifoDeadLetterQueue"] || dlqs[2] != st.QueueARNs[name(embedded.FIFODLQ)] {
		t.Errorf("ingest takes batches from %q, want the stack's two DLQs and the attached FIFO DLQ", dlqs)
	}
}

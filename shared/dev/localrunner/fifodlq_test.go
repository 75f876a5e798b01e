package localrunner_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/dlqquarantine/dlqq/shared/adapter/dynamostore"
	"github.com/dlqquarantine/dlqq/shared/dev/embedded"
	"github.com/dlqquarantine/dlqq/shared/dev/localrunner"
	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
)

// Any number of FIFO sources share the stack's FIFO DLQ: two existing FIFO
// queues, registered by their ARNs alone (SourceQueueArns) and pointed at
// FifoDeadLetterQueue, dead-letter there beside the local stack's
// standard sources and its attached FIFO pair; ingest takes them from the
// FIFO DLQ's own mapping and seals each message as a record of its own
// source, its message group kept, each group in the order it was sent.
func TestFIFOSourcesShareTheStacksFIFODLQ(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	o := embedded.WithLocalSources(embedded.Options{NoS3: true, Params: map[string]any{"MaxReceiveCount": 1, "SourceVisibilityTimeoutSeconds": 1}})
	fifos := []string{o.StackName + "-payments.fifo", o.StackName + "-refunds.fifo"}
	arns := []string{fmt.Sprint(o.Params["SourceQueueArns"])}
	for _, name := range fifos {
		o.Existing = append(o.Existing, embedded.ExistingQueue{Name: name, FIFO: true, DLQ: "FifoDeadLetterQueue", MaxReceiveCount: 1, Visibility: 1})
		arns = append(arns, fmt.Sprintf("arn:aws:sqs:%s:%s:%s", embedded.Region, embedded.Account, name))
	}
	o.Params["SourceQueueArns"] = strings.Join(arns, ",")
	st := embedded.ForTest(t, o)
	fns, err := localrunner.NewFunctions(st, st.Clients, slog.New(slog.NewTextHandler(io.Discard, nil)), io.Discard)
	if err != nil {
		t.Fatal(err) // every function's init takes the FIFO sources (their DLQ the stack's FIFO DLQ)
	}
	fifoDLQ := st.QueueARNs["FifoDeadLetterQueue"]
	if !strings.HasSuffix(fifoDLQ, ":"+st.Env.StackName+"-dlq.fifo") {
		t.Fatalf("the stack's FIFO DLQ is %q", fifoDLQ)
	}
	var mapping *localrunner.Mapping
	for i, m := range fns.Mappings {
		if m.QueueARN == fifoDLQ {
			mapping = &fns.Mappings[i]
		}
	}
	if mapping == nil || mapping.Window != 0 || !mapping.ReportBatchItemFailures {
		t.Fatalf("no ingest mapping on the FIFO DLQ without a batching window: %+v", fns.Mappings)
	}
	for _, name := range fifos {
		if c, ok := fns.IngestConfig.Sources[name]; !ok || c.DLQ != st.Env.StackName+"-dlq.fifo" {
			t.Fatalf("source %s: %+v, %v; want the stack's FIFO DLQ", name, c, ok)
		}
	}

	lister := dynamostore.NewLister(st.Clients.DynamoDB, st.Names["QuarantineTable"])
	store := dynamostore.New(st.Clients.DynamoDB, st.Names["QuarantineTable"])
	listed := func() map[string][]*quarantine.Record {
		out := map[string][]*quarantine.Record{}
		for _, name := range fifos {
			ids, err := quarantine.ListIDs(ctx, lister, quarantine.ListQuery{Status: quarantine.StatusQuarantined, Source: name})
			if err != nil {
				t.Fatal(err)
			}
			for _, id := range ids {
				r, err := store.Get(ctx, id)
				if err != nil {
					t.Fatal(err)
				}
				out[name] = append(out[name], r)
			}
		}
		return out
	}
	poller := &localrunner.Poller{SQS: st.Clients.SQS, Mapping: *mapping, Handler: fns.Ingest.Handle}

	// Two groups per source, three messages each. kumo moves the messages
	// whose receives ran out in no particular order (docs/emulators.md):
	// SQS moves a group's in order, so each round sends every group's next
	// message only once the previous round is quarantined.
	type sent struct {
		source, group string
		n             int
	}
	want := map[string]sent{}
	var got map[string][]*quarantine.Record
	for i := range 3 {
		for _, name := range fifos {
			for _, g := range []string{"g1", "g2"} {
				id := fmt.Sprintf("%s-%s-%d", strings.TrimSuffix(strings.TrimPrefix(name, o.StackName+"-"), ".fifo"), g, i)
				body := `{"event_id":"` + id + `"}`
				if _, err := st.Clients.SQS.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(st.QueueURLs[name]),
					MessageBody: aws.String(body), MessageGroupId: aws.String(g), MessageDeduplicationId: aws.String(id)}); err != nil {
					t.Fatal(err)
				}
				want[quarantine.BodySHA256([]byte(body))] = sent{name, g, i}
			}
		}
		for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
			// Each source's consumer fails what it receives; the next
			// receive after the visibility timeout moves it.
			for _, name := range fifos {
				if _, err := st.Clients.SQS.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(st.QueueURLs[name]), MaxNumberOfMessages: 10}); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := poller.PollOnce(ctx); err != nil {
				t.Fatal(err)
			}
			if got = listed(); len(got[fifos[0]])+len(got[fifos[1]]) == len(want) {
				break
			}
		}
	}
	seen := map[string]bool{}
	for _, name := range fifos {
		last := map[string]int{}
		for _, r := range got[name] {
			if err := quarantine.Verify(r); err != nil {
				t.Errorf("%s: %v", r.DLQID, err)
			}
			w, ok := want[r.BodySHA256]
			if !ok || w.source != name || r.MessageGroupID != w.group || r.Source != name || r.DLQARN != fifoDLQ {
				t.Errorf("record %s: source %s, group %q, DLQ %s; sent as %+v", r.DLQID, r.Source, r.MessageGroupID, r.DLQARN, w)
				continue
			}
			seen[r.BodySHA256] = true
			// The listing is oldest first: a group's messages in the order
			// they were sent.
			if prev, ok := last[w.group]; ok && w.n < prev {
				t.Errorf("%s: group %s listed message %d after %d", name, w.group, w.n, prev)
			}
			last[w.group] = w.n
		}
	}
	if len(seen) != len(want) {
		var missing []string
		for sum, w := range want {
			if !seen[sum] {
				missing = append(missing, fmt.Sprintf("%s %s #%d", w.source, w.group, w.n))
			}
		}
		slices.Sort(missing)
		t.Fatalf("not quarantined as their sources' records: %v", missing)
	}
}

package localrunner_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/dlqquarantine/dlqq/shared/adapter/dynamostore"
	"github.com/dlqquarantine/dlqq/shared/dev/embedded"
	"github.com/dlqquarantine/dlqq/shared/dev/localrunner"
	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
	"github.com/dlqquarantine/dlqq/shared/domain/sources"
	"github.com/dlqquarantine/dlqq/shared/usecase/redrive"
)

// Any number of sources in one deployment: 300 queues (one in ten FIFO)
// that existed before the stack, dead-lettering into its two DLQs, listed
// in the sources file alone and granted by their tag (TaggedSourceAccess).
// Every function starts on the template's environment, which holds the
// file's name and no source of it; ingest seals each dead-lettered
// message as a record of its own source (never "unconfigured"); redrive
// replays it into that queue; a source whose queue lost its tag is refused
// before anything is claimed.
func TestAnyNumberOfSourcesFromTheSourcesFile(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const n = 300
	stackName := embedded.RandomName("dlqq")
	name := func(i int) string {
		if i%10 == 0 {
			return fmt.Sprintf("%s-src-%03d.fifo", stackName, i)
		}
		return fmt.Sprintf("%s-src-%03d", stackName, i)
	}
	const untagged = 1
	file := map[string]sources.Config{}
	var existing []embedded.ExistingQueue
	for i := range n {
		q := embedded.ExistingQueue{Name: name(i), FIFO: i%10 == 0, DLQ: "DeadLetterQueue", MaxReceiveCount: 1, Visibility: 1,
			Tags: map[string]string{sources.SourceTagKey: stackName}}
		if q.FIFO {
			q.DLQ = "FifoDeadLetterQueue"
		}
		if i == untagged {
			q.Tags = map[string]string{"team": "pharmacy"}
		}
		existing = append(existing, q)
		file[q.Name] = sources.Config{ARN: fmt.Sprintf("arn:aws:sqs:%s:%s:%s", embedded.Region, embedded.Account, q.Name), RedriveCap: 2}
	}
	raw, err := json.Marshal(file)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "sources.json")
	if err := os.WriteFile(path, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	st := embedded.ForTest(t, embedded.Options{StackName: stackName, NoS3: true, SourcesFile: path, Existing: existing,
		Params: map[string]any{"TaggedSourceAccess": "Enabled"}})
	for _, id := range []string{"IngestFunction", "RedriveFunction", "OperatorFunction", "MetricsFunction"} {
		fn, err := st.Template.GetServerlessFunctionWithName(id)
		if err != nil {
			t.Fatal(err)
		}
		size := 0
		for k, v := range fn.Environment.Variables {
			size += len(k) + len(v)
			if strings.Contains(v, "-src-") {
				t.Errorf("%s's %s holds a source of the file", id, k)
			}
		}
		if size > 4096 {
			t.Errorf("%s's environment is %d bytes", id, size)
		}
	}
	fns, err := localrunner.NewFunctions(st, st.Clients, slog.New(slog.NewTextHandler(io.Discard, nil)), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if got := len(fns.IngestConfig.Sources); got != n+1 {
		t.Fatalf("ingest has %d sources, want the file's %d and the stack's own", got, n)
	}

	// Dead-letter one message of three sources, the untagged one among them.
	picked := []int{untagged, 150, 290}
	for _, i := range picked {
		in := &sqs.SendMessageInput{QueueUrl: aws.String(st.QueueURLs[name(i)]), MessageBody: aws.String(fmt.Sprintf(`{"event_id":"ev-%d"}`, i))}
		if i%10 == 0 {
			in.MessageGroupId, in.MessageDeduplicationId = aws.String("g"), aws.String("d")
		}
		if _, err := st.Clients.SQS.SendMessage(ctx, in); err != nil {
			t.Fatal(err)
		}
	}
	store := dynamostore.New(st.Clients.DynamoDB, st.Names["QuarantineTable"])
	lister := dynamostore.NewLister(st.Clients.DynamoDB, st.Names["QuarantineTable"])
	listed := func(i int) []string {
		ids, err := quarantine.ListIDs(ctx, lister, quarantine.ListQuery{Status: quarantine.StatusQuarantined, Source: name(i)})
		if err != nil {
			t.Fatal(err)
		}
		return ids
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		for _, i := range picked {
			if _, err := st.Clients.SQS.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(st.QueueURLs[name(i)])}); err != nil {
				t.Fatal(err)
			}
		}
		for _, m := range fns.Mappings {
			if _, err := (&localrunner.Poller{SQS: st.Clients.SQS, Mapping: m, Handler: fns.Ingest.Handle}).PollOnce(ctx); err != nil {
				t.Fatal(err)
			}
		}
		done := true
		for _, i := range picked {
			done = done && len(listed(i)) == 1
		}
		if done {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the dead-lettered messages did not reach their records")
		}
	}
	for _, i := range picked {
		r, err := store.Get(ctx, listed(i)[0])
		if err != nil {
			t.Fatal(err)
		}
		if r.Source != name(i) || r.RedriveCap != 2 || strings.Contains(r.Attempts[0].Reason, "no configuration") {
			t.Fatalf("source %s: record %s of source %s, cap %d, first entry %q", name(i), r.DLQID, r.Source, r.RedriveCap, r.Attempts[0].Reason)
		}
	}

	// A FIFO record is replayed once the status index has settled around
	// it (redrive.IndexSettleGuard).
	time.Sleep(redrive.IndexSettleGuard)
	for _, i := range picked[1:] {
		rep, err := fns.Redrive.Run(ctx, redrive.Request{Source: name(i), MaxMessages: 10, RequestedBy: "ops@example.com"})
		if err != nil || rep.Redriven.Count != 1 {
			t.Fatalf("source %s: %s, %v", name(i), rep.Summary(), err)
		}
		out, err := st.Clients.SQS.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(st.QueueURLs[name(i)]), WaitTimeSeconds: 2})
		if err != nil || len(out.Messages) != 1 || aws.ToString(out.Messages[0].Body) != fmt.Sprintf(`{"event_id":"ev-%d"}`, i) {
			t.Fatalf("source %s's queue after the replay: %+v, %v", name(i), out, err)
		}
	}
	_, err = fns.Redrive.Run(ctx, redrive.Request{Source: name(untagged), MaxMessages: 10, RequestedBy: "ops@example.com"})
	if !errors.Is(err, redrive.ErrSourceUntagged) {
		t.Fatalf("the untagged source: %v", err)
	}
	if r, err := store.Get(ctx, listed(untagged)[0]); err != nil || r.Version != 1 {
		t.Fatalf("the untagged source's record: %+v, %v", r, err)
	}
}

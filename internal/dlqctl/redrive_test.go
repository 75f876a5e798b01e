package dlqctl_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/dlqquarantine/dlqq/shared/adapter/dynamostore"
	"github.com/dlqquarantine/dlqq/shared/dev/embedded"
	"github.com/dlqquarantine/dlqq/shared/dev/lambdatest"
	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
	"github.com/dlqquarantine/dlqq/shared/domain/sources"
	"github.com/dlqquarantine/dlqq/shared/usecase/ingest"
)

// dlqctl redrive without --yes changes nothing; with --yes it drives the
// real redrive function (its bootstrap on kumo's Runtime API) end to end.
func TestRedriveDrivesTheRealFunction(t *testing.T) {
	ctx := context.Background()
	st := embedded.ForTest(t, embedded.Options{})
	fn, _ := st.Template.GetServerlessFunctionWithName("RedriveFunction")
	cfg, err := sources.Parse(fn.Environment.Variables["SOURCES"])
	if err != nil {
		t.Fatal(err)
	}
	srcs, _ := sources.Build(cfg)
	source := st.Names["SourceQueue"]
	store := dynamostore.New(st.Clients.DynamoDB, st.Names["QuarantineTable"])
	q := ingest.NewQuarantiner(store, nil, nil, ingest.QuarantinerConfig{Sources: srcs})
	var ids []string
	for i := range 12 {
		body := `{"event_id":"e` + string(rune('a'+i)) + `","ndc":"12345-678-90","lot":"L","quantity_delta":1,"schedule":"CII","facility":"F","occurred_at":"2026-11-29T09:00:00Z"}`
		out, err := q.Quarantine(ctx, ingest.Message{MessageID: "m" + string(rune('a'+i)), Body: []byte(body), SourceARN: srcs[source].ARN})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, out.Record.DLQID)
		time.Sleep(time.Millisecond) // distinct first_seen (docs/emulators.md)
	}
	bin, err := lambdatest.Build(ctx, "redrive", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	env, err := lambdatest.Env(st, "RedriveFunction")
	if err != nil {
		t.Fatal(err)
	}
	name := embedded.RandomName("redrive")
	lf, err := lambdatest.Start(ctx, st, name, bin, env, 60*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer lf.Close()

	f := &fixture{st: st, store: store}
	seals := func() string {
		var b strings.Builder
		for _, id := range ids {
			r, _ := store.Get(ctx, id)
			b.WriteString(r.Seal)
		}
		return b.String()
	}
	depth := func() string {
		out, _ := st.Clients.SQS.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(st.QueueURLs["SourceQueue"]),
			AttributeNames: []sqstypes.QueueAttributeName{"ApproximateNumberOfMessages"}})
		return out.Attributes["ApproximateNumberOfMessages"]
	}
	before := seals()
	out, errOut, code := f.runAt(t, time.Now(), "redrive", "--function", name, "--source", source, "--max", "10", "--batch-size", "4")
	if code != 0 || !strings.Contains(errOut, "would redrive 10") || !strings.Contains(errOut, "pass --yes") {
		t.Fatalf("dry run (exit %d): %s %s", code, out, errOut)
	}
	if seals() != before || depth() != "0" {
		t.Fatal("redrive without --yes changed something")
	}
	out, errOut, code = f.runAt(t, time.Now(), "redrive", "--function", name, "--source", source, "--max", "10", "--batch-size", "4", "--yes")
	if code != 0 || !strings.Contains(out, "redriven 10") || !strings.Contains(errOut, "progress: 10/10") {
		t.Fatalf("redrive --yes (exit %d): %s %s", code, out, errOut)
	}
	if depth() != "10" {
		t.Fatalf("source queue holds %s messages, want 10", depth())
	}
	if _, errOut, code := f.runAt(t, time.Now(), "redrive", "--function", "no-such-function", "--source", source, "--yes"); code != 1 || !strings.Contains(errOut, "not found") {
		t.Fatalf("missing function: %d %s", code, errOut)
	}

	// dlqctl fix: through the same function, so through the same gate.
	bad := `{"event_id":"fx","ndc":"NDC?12","lot":"LOT-SECRET-7","quantity_delta":1,"schedule":"CII","facility":"F","occurred_at":"2026-11-29T09:00:00Z"}`
	m, err := q.Quarantine(ctx, ingest.Message{MessageID: "mfx", Body: []byte(bad), SourceARN: srcs[source].ARN})
	if err != nil {
		t.Fatal(err)
	}
	id := m.Record.DLQID
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	stillBad := write("still-bad.json", strings.Replace(bad, "NDC?12", "12", 1))
	if _, errOut, code := f.runAt(t, time.Now(), "fix", id, "--function", name, "--payload-file", stillBad, "--reason", "typo"); code != 1 || !strings.Contains(errOut, "fails the current schema") {
		t.Fatalf("fix with an invalid payload (exit %d): %s", code, errOut)
	}
	if r, _ := store.Get(ctx, id); r.Version != m.Record.Version {
		t.Fatal("a refused fix changed the record")
	}
	if _, errOut, code := f.runAt(t, time.Now(), "fix", id, "--function", name, "--payload-file", stillBad); code != 2 || !strings.Contains(errOut, "--reason") {
		t.Fatalf("fix without --reason (exit %d): %s", code, errOut)
	}
	good := strings.Replace(bad, "NDC?12", "12345-678-90", 1)
	out, errOut, code = f.runAt(t, time.Now(), "fix", id, "--function", name, "--payload-file", write("good.json", good), "--reason", "NDC typo")
	if code != 0 || !strings.Contains(out, "correction 1 of "+id+" stored by alice") {
		t.Fatalf("fix (exit %d): %s %s", code, out, errOut)
	}
	r, _ := store.Get(ctx, id)
	if r.Body != bad || len(r.Corrections) != 1 || r.Corrections[0].Body != good || quarantine.Verify(r) != nil {
		t.Fatal("the fix did not store the correction beside the original")
	}
	out, errOut, code = f.runAt(t, time.Now(), "show", id, "--diff")
	if code != 0 || !strings.Contains(out, "replace  /ndc\n") || !strings.Contains(out, "1 correction(s)") || strings.Contains(out, "12345-678-90") || strings.Contains(out, "LOT-SECRET-7") {
		t.Fatalf("show --diff (exit %d), want paths without values:\n%s %s", code, out, errOut)
	}
	out, _, code = f.runAt(t, time.Now(), "show", id, "--diff", "--payload")
	if code != 0 || !strings.Contains(out, `replace  /ndc = "12345-678-90"`) || !strings.Contains(out, "correction 1:\n"+good) {
		t.Fatalf("show --diff --payload (exit %d):\n%s", code, out)
	}
}

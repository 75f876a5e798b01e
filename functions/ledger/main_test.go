package main_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"

	"github.com/dlqquarantine/dlqq/shared/adapter/s3store"
	"github.com/dlqquarantine/dlqq/shared/dev/embedded"
	"github.com/dlqquarantine/dlqq/shared/dev/lambdatest"
	dl "github.com/dlqquarantine/dlqq/shared/domain/ledger"
)

// The real stream bootstrap, configured from the template: the digest
// schedule's input (events/ledger-digest.json) and the baseline's are
// refused, and so is the stream sample (events/ledger-stream.json), from
// another table's stream; none of them writes anything. The same batch
// from this stack's stream is ledgered as one segment of its shard.
func TestBootstrapLedgersTheStreamAndRefusesActions(t *testing.T) {
	ctx := context.Background()
	st := embedded.ForTest(t, embedded.Options{})
	f := lambdatest.ForTest(t, st, "ledger", "LedgerFunction", 60*time.Second)
	getenv := lambdatest.Getenv(t, st, "LedgerFunction")
	objects := s3store.LedgerObjects{API: st.Clients.S3, Bucket: getenv("LEDGER_BUCKET")}
	// The digest's and the baseline's events belong to the digest
	// function (functions/digest): the stream function refuses them.
	for _, ev := range [][]byte{lambdatest.Sample(t, "ledger-digest.json"), []byte(`{"action":"baseline"}`)} {
		out, err := f.Invoke(ctx, ev)
		if err != nil {
			t.Fatal(err)
		}
		if out.FunctionError == nil || !strings.Contains(string(out.Payload), "event refused") || !strings.Contains(string(out.Payload), "digest function") {
			t.Fatalf("%s: %v %s", ev, aws.ToString(out.FunctionError), out.Payload)
		}
	}
	if keys, err := objects.List(ctx, "ledger/", ""); err != nil || len(keys) != 0 {
		t.Fatalf("a refused action wrote %v (%v)", keys, err)
	}

	sample := lambdatest.Sample(t, "ledger-stream.json")
	var ev events.DynamoDBTimeWindowEvent
	if err := json.Unmarshal(sample, &ev); err != nil || ev.ShardID == "" || len(ev.Records) != 1 || ev.Records[0].EventName != "INSERT" {
		t.Fatalf("sample %+v: %v", ev, err)
	}
	out, err := f.Invoke(ctx, sample)
	if err != nil {
		t.Fatal(err)
	}
	if out.FunctionError == nil || !strings.Contains(string(out.Payload), "not the ledger's stream") {
		t.Fatalf("the sample from another stream: %v %s", aws.ToString(out.FunctionError), out.Payload)
	}
	if keys, err := objects.List(ctx, dl.SegmentPrefix, ""); err != nil || len(keys) != 0 {
		t.Fatalf("a refused batch wrote %v (%v)", keys, err)
	}

	// The same change as this stack's stream delivers it (on its shard).
	ev.EventSourceARN = getenv("STREAM_ARN")
	desc, err := st.Clients.DynamoDBStreams.DescribeStream(ctx, &dynamodbstreams.DescribeStreamInput{StreamArn: aws.String(ev.EventSourceARN)})
	if err != nil || len(desc.StreamDescription.Shards) == 0 {
		t.Fatalf("describe the stack's stream: %v", err)
	}
	ev.ShardID = aws.ToString(desc.StreamDescription.Shards[0].ShardId)
	for i := range ev.Records {
		ev.Records[i].EventSourceArn = ev.EventSourceARN
	}
	raw, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	var resp events.DynamoDBTimeWindowEventResponse
	if out := f.MustInvoke(t, raw); json.Unmarshal(out, &resp) != nil || resp.State == nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("stream response %s", out)
	}
	keys, err := objects.List(ctx, dl.SegmentPrefix, "")
	if err != nil || len(keys) != 1 || !strings.HasPrefix(keys[0], dl.SegmentPrefix+ev.ShardID+"/") {
		t.Fatalf("segments %v (%v)", keys, err)
	}
	body, err := objects.Get(ctx, keys[0])
	if err != nil {
		t.Fatal(err)
	}
	seg, err := dl.ParseSegment(body)
	if err != nil || len(seg.Entries) != 1 || seg.Entries[0].Key != "dlqq-source#inv-000101" || seg.Entries[0].Event != dl.EventInsert || seg.Prev != nil {
		t.Fatalf("segment %s: %+v %v", keys[0], seg, err)
	}
	if strings.Contains(f.Output(), "PHARM-EAST-1") {
		t.Fatal("a payload value reached the ledger's logs")
	}
}

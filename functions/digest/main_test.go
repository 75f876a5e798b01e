package main_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/dlqquarantine/dlqq/shared/adapter/s3store"
	"github.com/dlqquarantine/dlqq/shared/dev/embedded"
	"github.com/dlqquarantine/dlqq/shared/dev/lambdatest"
	"github.com/dlqquarantine/dlqq/shared/dev/localrunner"
	dl "github.com/dlqquarantine/dlqq/shared/domain/ledger"
	"github.com/dlqquarantine/dlqq/shared/usecase/ledger"
)

// bucketVersions counts every object version and delete marker in the
// bucket, whatever its prefix.
func bucketVersions(t *testing.T, st *embedded.Stack, bucket string) int {
	t.Helper()
	n := 0
	p := s3.NewListObjectVersionsPaginator(st.Clients.S3, &s3.ListObjectVersionsInput{Bucket: aws.String(bucket)})
	for p.HasMorePages() {
		page, err := p.NextPage(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		n += len(page.Versions) + len(page.DeleteMarkers)
	}
	return n
}

// forgedInput is the Input an insider allowed events:PutTargets on the
// digest schedule would give its target: a batch as the stream mapping
// delivers it, naming this stack's stream and one of its shards, with a
// record version the table never held.
func forgedInput(streamARN, shard string) []byte {
	return fmt.Appendf(nil, `{"Records":[{"eventID":"f00d","eventName":"INSERT","eventVersion":"1.1","eventSource":"aws:dynamodb","awsRegion":"us-east-1",`+
		`"dynamodb":{"ApproximateCreationDateTime":1796138709,"Keys":{"dlq_id":{"S":"dlqq-source#forged-1"}},`+
		`"NewImage":{"dlq_id":{"S":"dlqq-source#forged-1"},"version":{"N":"1"},"seal":{"S":"00"},"status":{"S":"RESOLVED"}},`+
		`"SequenceNumber":"4100000000000000999900","SizeBytes":120,"StreamViewType":"NEW_AND_OLD_IMAGES"},"eventSourceARN":%q}],`+
		`"shardId":%q,"eventSourceARN":%q,"window":{"start":"2026-12-01T10:00:00Z","end":"2026-12-01T10:01:00Z"},"state":{},`+
		`"isFinalInvokeForWindow":false,"isWindowTerminatedEarly":false}`, streamARN, shard, streamARN)
}

// The real digest bootstrap, configured from the template, invoked
// through the Lambda Invoke API as EventBridge and an operator invoke it:
// a forged stream batch (the schedule target's Input an insider would
// set, with this stack's stream and shard) is refused and the ledger
// bucket gains no object; a stream batch alone, a shard id alone, and a
// digest beside records are refused too; then the schedule's input
// (events/ledger-digest.json) signs digest 1, which verifies with the
// key's public part, and the function writes no segment.
func TestBootstrapDigestsAndRefusesStreamBatches(t *testing.T) {
	ctx := context.Background()
	st := embedded.ForTest(t, embedded.Options{})
	getenv := lambdatest.Getenv(t, st, "DigestFunction")
	streamFn, streamARN, bucket := getenv("STREAM_FUNCTION_NAME"), getenv("STREAM_ARN"), getenv("LEDGER_BUCKET")
	if streamFn != st.Env.StackName+"-ledger" || streamARN == "" || bucket == "" {
		t.Fatalf("the template gives the digest function STREAM_FUNCTION_NAME %q, STREAM_ARN %q, LEDGER_BUCKET %q", streamFn, streamARN, bucket)
	}
	f := lambdatest.ForTest(t, st, "digest", "DigestFunction", 60*time.Second)
	// The stream function's mapping, as the template declares it (the dev
	// kit's; kumo never polls it): the digest records it, enabled.
	if _, err := localrunner.NewLedgerMapping(ctx, st.Clients.Lambda, streamFn, streamARN, true); err != nil {
		t.Fatal(err)
	}
	desc, err := st.Clients.DynamoDBStreams.DescribeStream(ctx, &dynamodbstreams.DescribeStreamInput{StreamArn: aws.String(streamARN)})
	if err != nil || len(desc.StreamDescription.Shards) == 0 {
		t.Fatalf("describe the stack's stream: %v", err)
	}
	shard := aws.ToString(desc.StreamDescription.Shards[0].ShardId)
	forged := forgedInput(streamARN, shard)
	var probe map[string]json.RawMessage
	if err := json.Unmarshal(forged, &probe); err != nil || probe["Records"] == nil || probe["shardId"] == nil {
		t.Fatalf("the forged input %s: %v", forged, err)
	}

	before := bucketVersions(t, st, bucket)
	for what, ev := range map[string][]byte{
		"the forged schedule target":      forged,
		"a shard id alone":                fmt.Appendf(nil, `{"shardId":%q}`, shard),
		"a digest beside the forged rows": append([]byte(`{"action":"digest",`), forged[1:]...),
		"records alone":                   append(append([]byte(`{"Records":`), probe["Records"]...), '}'),
	} {
		out, err := f.Invoke(ctx, ev)
		if err != nil {
			t.Fatal(err)
		}
		if out.FunctionError == nil || !strings.Contains(string(out.Payload), "event refused") || !strings.Contains(string(out.Payload), "never takes a stream batch") {
			t.Fatalf("%s: %v %s\n%s", what, aws.ToString(out.FunctionError), out.Payload, f.Output())
		}
		if after := bucketVersions(t, st, bucket); after != before {
			t.Fatalf("%s: the bucket went from %d to %d objects", what, before, after)
		}
	}
	if strings.Contains(f.Output(), "forged-1") {
		t.Fatal("a refused event's values reached the digest function's logs")
	}

	var rep ledger.DigestReport
	if out := f.MustInvoke(t, lambdatest.Sample(t, "ledger-digest.json")); json.Unmarshal(out, &rep) != nil || rep.N != 1 || !rep.Written {
		t.Fatalf("digest report %s", out)
	}
	objects := s3store.LedgerObjects{API: st.Clients.S3, Bucket: bucket}
	pub, err := st.Clients.KMS.GetPublicKey(ctx, &kms.GetPublicKeyInput{KeyId: aws.String(getenv("SIGNING_KEY_ID"))})
	if err != nil {
		t.Fatal(err)
	}
	in := dl.Input{Digests: map[string][]byte{}, Segments: map[string][]byte{}, PublicKeyDER: pub.PublicKey, Now: time.Now()}
	if in.Digests[dl.DigestKey(1)], err = objects.Get(ctx, dl.DigestKey(1)); err != nil {
		t.Fatal(err)
	}
	if res := dl.Verify(in); !res.OK() || res.LastDigest != 1 {
		t.Fatalf("digest 1 does not verify: %+v", res)
	}
	d, err := dl.ParseDigest(in.Digests[dl.DigestKey(1)])
	if err != nil || d.Mapping == nil || len(d.Mapping.Mappings) != 1 || d.Mapping.Mappings[0].State != dl.MappingEnabled {
		t.Fatalf("digest 1 records the stream function's mapping as %+v (%v)", d.Mapping, err)
	}
	if keys, err := objects.List(ctx, dl.SegmentPrefix, ""); err != nil || len(keys) != 0 {
		t.Fatalf("the digest function wrote segments %v (%v)", keys, err)
	}
}

// Without the stream function's name the digest function fails its init
// and never serves.
func TestBootstrapNeedsTheStreamFunctionsName(t *testing.T) {
	ctx := context.Background()
	st := embedded.ForTest(t, embedded.Options{NoS3: true})
	bin, err := lambdatest.Build(ctx, "digest", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	env, err := lambdatest.Env(st, "DigestFunction")
	if err != nil {
		t.Fatal(err)
	}
	var without []string
	for _, kv := range env {
		if !strings.HasPrefix(kv, "STREAM_FUNCTION_NAME=") {
			without = append(without, kv)
		}
	}
	f, err := lambdatest.Start(ctx, st, embedded.RandomName("digest"), bin, without, 10*time.Second)
	if err == nil {
		f.Close()
		t.Fatal("the digest function served without STREAM_FUNCTION_NAME")
	}
	if !strings.Contains(err.Error(), "digest init failed") || !strings.Contains(err.Error(), "STREAM_FUNCTION_NAME is required") {
		t.Fatalf("init error %v", err)
	}
}

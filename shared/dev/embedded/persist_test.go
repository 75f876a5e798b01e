package embedded

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	streamtypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	kmstypes "github.com/aws/aws-sdk-go-v2/service/kms/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
)

// persistPhase selects the helper process's part in TestStatePersistsAcrossRestarts.
const persistPhase = "DLQQ_EMBEDDED_PERSIST_PHASE"

// A persistent stack started twice, in two processes, finds the queue
// message, the table item, the S3 object and the KMS key (its ciphertext
// decrypts) written by the first one just before it closed. Each process
// starts without kumo's variables and re-executes itself (Reexec).
func TestStatePersistsAcrossRestarts(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	phase := func(name string, env ...string) string {
		t.Helper()
		cmd := exec.Command(os.Args[0], "-test.run=^TestPersistHelper$", "-test.count=1")
		cmd.Env = append(append(os.Environ(), env...), persistPhase+"="+name, "DLQQ_EMBEDDED_PERSIST_DIR="+dir)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			t.Fatalf("phase %s: %v\n%s", name, err, out.String())
		}
		return out.String()
	}
	phase("write")
	if _, err := os.Stat(filepath.Join(dir, "kumo", "sqs.json")); err != nil {
		t.Fatalf("no kumo snapshot after the first run: %v", err)
	}
	// A wrong KUMO_DATA_DIR in the environment is replaced.
	if out := phase("read", "KUMO_DATA_DIR="+t.TempDir()); !strings.Contains(out, "read back: message, item, object, key, stream, writer key") {
		t.Fatalf("second run:\n%s", out)
	}
	// Without the dev kit's HMAC key material, the persisted writer keys
	// could make no MAC: Start refuses the data dir, saying so.
	if err := os.Remove(filepath.Join(dir, "kumo", hmacFileName)); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestPersistHelper$", "-test.count=1")
	cmd.Env = append(os.Environ(), persistPhase+"=read", "DLQQ_EMBEDDED_PERSIST_DIR="+dir)
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "cannot make MACs (remove the data dir to start afresh)") {
		t.Fatalf("a restart without the HMAC key material: %v\n%s", err, out)
	}
}

// TestPersistHelper is the helper process of TestStatePersistsAcrossRestarts.
func TestPersistHelper(t *testing.T) {
	which := os.Getenv(persistPhase)
	if which == "" {
		return // not the helper process: nothing to do
	}
	// Only Close's flush may save the writes: no periodic flush between
	// the writes and Close.
	flushEvery = 1 << 40
	dir := os.Getenv("DLQQ_EMBEDDED_PERSIST_DIR")
	if persistReady(dir) != nil {
		t.Fatal(Reexec(dir)) // returns only on failure
	}
	ctx := context.Background()
	st, err := Start(ctx, Options{StackName: "persist", DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	table, bucket, key := st.Names["QuarantineTable"], st.Names["PayloadBucket"], st.Names["QuarantineKey"]
	itemKey := map[string]ddbtypes.AttributeValue{"dlq_id": &ddbtypes.AttributeValueMemberS{Value: "persisted-1"}}
	cipherFile := filepath.Join(os.Getenv("DLQQ_EMBEDDED_PERSIST_DIR"), "ciphertext")
	kmsc := kms.NewFromConfig(st.AWS)
	switch which {
	case "write":
		if _, err := st.Clients.SQS.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(st.QueueURLs["SourceQueue"]), MessageBody: aws.String("persisted message")}); err != nil {
			t.Fatal(err)
		}
		if _, err := st.Clients.DynamoDB.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: map[string]ddbtypes.AttributeValue{
			"dlq_id": itemKey["dlq_id"], "note": &ddbtypes.AttributeValueMemberS{Value: "persisted item"},
		}}); err != nil {
			t.Fatal(err)
		}
		if _, err := st.Clients.S3.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String("k"), Body: strings.NewReader("persisted object")}); err != nil {
			t.Fatal(err)
		}
		enc, err := kmsc.Encrypt(ctx, &kms.EncryptInput{KeyId: aws.String(key), Plaintext: []byte("persisted secret")})
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(cipherFile, enc.CiphertextBlob, 0o600); err != nil {
			t.Fatal(err)
		}
		seq, err := lastStreamSeq(ctx, st, "persisted-1")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(cipherFile+".seq", []byte(seq), 0o600); err != nil {
			t.Fatal(err)
		}
		mac, err := kmsc.GenerateMac(ctx, &kms.GenerateMacInput{KeyId: aws.String(st.KeyARNs["IngestWriterKey"]), Message: []byte("persisted root"), MacAlgorithm: kmstypes.MacAlgorithmSpecHmacSha256})
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(cipherFile+".mac", mac.Mac, 0o600); err != nil {
			t.Fatal(err)
		}
		st.Close()
	case "read":
		defer st.Close()
		var problems []error
		msg, err := st.Clients.SQS.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(st.QueueURLs["SourceQueue"]), MaxNumberOfMessages: 10})
		if err != nil || len(msg.Messages) != 1 || aws.ToString(msg.Messages[0].Body) != "persisted message" {
			problems = append(problems, fmt.Errorf("message: %v, %+v", err, msg))
		}
		item, err := st.Clients.DynamoDB.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), Key: itemKey, ConsistentRead: aws.Bool(true)})
		if err != nil || item.Item["note"] == nil || item.Item["note"].(*ddbtypes.AttributeValueMemberS).Value != "persisted item" {
			problems = append(problems, fmt.Errorf("item: %v, %+v", err, item))
		}
		obj, err := st.Clients.S3.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String("k")})
		if err != nil {
			problems = append(problems, fmt.Errorf("object: %w", err))
		} else if b, _ := io.ReadAll(obj.Body); string(b) != "persisted object" {
			problems = append(problems, fmt.Errorf("object holds %q", b))
		}
		blob, err := os.ReadFile(cipherFile)
		if err != nil {
			t.Fatal(err)
		}
		dec, err := kmsc.Decrypt(ctx, &kms.DecryptInput{KeyId: aws.String(key), CiphertextBlob: blob})
		if err != nil || string(dec.Plaintext) != "persisted secret" {
			problems = append(problems, fmt.Errorf("key: %v", err))
		}
		// The restored table still streams, with sequence numbers past the
		// first run's (the ledger skips what it has seen).
		if _, err := st.Clients.DynamoDB.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: map[string]ddbtypes.AttributeValue{
			"dlq_id": &ddbtypes.AttributeValueMemberS{Value: "persisted-2"},
		}}); err != nil {
			t.Fatal(err)
		}
		before, _ := os.ReadFile(cipherFile + ".seq")
		if seq, err := lastStreamSeq(ctx, st, "persisted-2"); err != nil {
			problems = append(problems, fmt.Errorf("stream: %w", err))
		} else if a, ok1 := new(big.Int).SetString(string(before), 10); !ok1 {
			problems = append(problems, fmt.Errorf("stream: the first run's sequence number %q", before))
		} else if b, ok2 := new(big.Int).SetString(seq, 10); !ok2 || b.Cmp(a) <= 0 {
			problems = append(problems, fmt.Errorf("stream: the change after the restart has sequence number %s, not past %s", seq, before))
		}
		// The writer key made its MAC in the first run: the same key (by
		// its alias) verifies it.
		mac, err := os.ReadFile(cipherFile + ".mac")
		if err != nil {
			t.Fatal(err)
		}
		if v, err := kmsc.VerifyMac(ctx, &kms.VerifyMacInput{KeyId: aws.String(st.Names["IngestWriterKey"]), Message: []byte("persisted root"), Mac: mac, MacAlgorithm: kmstypes.MacAlgorithmSpecHmacSha256}); err != nil || !v.MacValid {
			problems = append(problems, fmt.Errorf("writer key: %+v, %v", v, err))
		}
		if err := errors.Join(problems...); err != nil {
			t.Fatal(err)
		}
		fmt.Println("read back: message, item, object, key, stream, writer key")
	case "inflight-write":
		// Two messages; one received and released (visibility 0), as a
		// consumer that rejects it does.
		if err := st.ReleaseOneOfTwo(ctx, st.QueueURLs["SourceQueue"]); err != nil {
			t.Fatal(err)
		}
		n, err := st.InFlight(ctx)
		if err != nil {
			t.Fatal(err)
		}
		st.Close()
		fmt.Printf("in flight: %+v\n", n)
	case "inflight-read":
		defer st.Close()
		got, err := st.Clients.SQS.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(st.QueueURLs["SourceQueue"]), MaxNumberOfMessages: 10})
		if err != nil {
			t.Fatal(err)
		}
		fmt.Printf("after the restart: %d messages\n", len(got.Messages))
	}
}

// A message released (visibility 0) and not received again is in flight
// for kumo, which does not snapshot in-flight messages: InFlight counts it
// before Close, and the restarted stack has only the other one. (Should
// kumo start keeping them, this test says so: the warning would be wrong.)
func TestInFlightMessagesAreCountedAndNotKept(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	phase := func(name string) string {
		t.Helper()
		cmd := exec.Command(os.Args[0], "-test.run=^TestPersistHelper$", "-test.count=1")
		cmd.Env = append(os.Environ(), persistPhase+"="+name, "DLQQ_EMBEDDED_PERSIST_DIR="+dir)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			t.Fatalf("phase %s: %v\n%s", name, err, out.String())
		}
		return out.String()
	}
	if out := phase("inflight-write"); !strings.Contains(out, "in flight: [{Name:persist-source N:1}]") {
		t.Fatalf("first run:\n%s", out)
	}
	if out := phase("inflight-read"); !strings.Contains(out, "after the restart: 1 messages") {
		t.Fatalf("second run:\n%s", out)
	}
}

// Without PersistEnviron in the process's environment, Start refuses a
// data dir, saying what is missing.
func TestDataDirNeedsThePersistEnvironment(t *testing.T) {
	dir := t.TempDir()
	_, err := Start(context.Background(), Options{NoS3: true, DataDir: dir})
	if err == nil || !strings.Contains(err.Error(), "KUMO_DATA_DIR") || !strings.Contains(err.Error(), "embedded.Reexec") {
		t.Fatalf("Start with a data dir = %v", err)
	}
	if err := persistReady(dir); err == nil {
		t.Fatal("persistReady without the environment")
	}
}

// A table kept from an earlier start must have the template's keys and
// indexes; anything else is refused, naming the difference.
func TestSameTableRefusesADifferentSchema(t *testing.T) {
	key := func(name string, kt ddbtypes.KeyType) ddbtypes.KeySchemaElement {
		return ddbtypes.KeySchemaElement{AttributeName: aws.String(name), KeyType: kt}
	}
	in := &dynamodb.CreateTableInput{
		KeySchema: []ddbtypes.KeySchemaElement{key("dlq_id", ddbtypes.KeyTypeHash)},
		GlobalSecondaryIndexes: []ddbtypes.GlobalSecondaryIndex{{IndexName: aws.String("by-status"),
			KeySchema: []ddbtypes.KeySchemaElement{key("status", ddbtypes.KeyTypeHash)}, Projection: &ddbtypes.Projection{ProjectionType: ddbtypes.ProjectionTypeAll}}},
	}
	same := &ddbtypes.TableDescription{KeySchema: in.KeySchema, GlobalSecondaryIndexes: []ddbtypes.GlobalSecondaryIndexDescription{{IndexName: aws.String("by-status"),
		KeySchema: in.GlobalSecondaryIndexes[0].KeySchema, Projection: &ddbtypes.Projection{ProjectionType: ddbtypes.ProjectionTypeAll}}}}
	if err := sameTable(in, same); err != nil {
		t.Fatal(err)
	}
	otherKey := *same
	otherKey.KeySchema = []ddbtypes.KeySchemaElement{key("id", ddbtypes.KeyTypeHash)}
	if err := sameTable(in, &otherKey); err == nil || !strings.Contains(err.Error(), `key schema is "id:HASH"`) {
		t.Fatalf("other key: %v", err)
	}
	noIndex := *same
	noIndex.GlobalSecondaryIndexes = nil
	if err := sameTable(in, &noIndex); err == nil || !strings.Contains(err.Error(), "indexes are") {
		t.Fatalf("no index: %v", err)
	}
}

// lastStreamSeq is the sequence number of the newest change to the item
// with key id in the quarantine table's stream.
func lastStreamSeq(ctx context.Context, st *Stack, id string) (string, error) {
	arn := st.StreamARNs["QuarantineTable"]
	d, err := st.Clients.DynamoDBStreams.DescribeStream(ctx, &dynamodbstreams.DescribeStreamInput{StreamArn: aws.String(arn)})
	if err != nil {
		return "", err
	}
	last := ""
	for _, sh := range d.StreamDescription.Shards {
		it, err := st.Clients.DynamoDBStreams.GetShardIterator(ctx, &dynamodbstreams.GetShardIteratorInput{StreamArn: aws.String(arn), ShardId: sh.ShardId, ShardIteratorType: streamtypes.ShardIteratorTypeTrimHorizon})
		if err != nil {
			return "", err
		}
		for iter := it.ShardIterator; iter != nil; {
			out, err := st.Clients.DynamoDBStreams.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: iter})
			if err != nil {
				return "", err
			}
			for _, r := range out.Records {
				if k, ok := r.Dynamodb.Keys["dlq_id"].(*streamtypes.AttributeValueMemberS); ok && k.Value == id {
					last = aws.ToString(r.Dynamodb.SequenceNumber)
				}
			}
			if len(out.Records) == 0 {
				break
			}
			iter = out.NextShardIterator
		}
	}
	if last == "" {
		return "", fmt.Errorf("no change to %s in the stream", id)
	}
	return last, nil
}

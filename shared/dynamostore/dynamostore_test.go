package dynamostore_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/dlqquarantine/dlqq/shared/dynamostore"
	"github.com/dlqquarantine/dlqq/shared/embedded"
	"github.com/dlqquarantine/dlqq/shared/quarantine"
	"github.com/dlqquarantine/dlqq/shared/s3payload"
	"github.com/dlqquarantine/dlqq/shared/storetest"
)

var stack *embedded.Stack

func TestMain(m *testing.M) {
	st, err := embedded.Start(context.Background(), embedded.Options{})
	if err != nil {
		panic(err)
	}
	stack = st
	code := m.Run()
	st.Close()
	os.Exit(code)
}

func TestStoreContract(t *testing.T) {
	storetest.RunStore(t, dynamostore.New(stack.Clients.DynamoDB, stack.Names["QuarantineTable"]))
}

func TestPayloadsContract(t *testing.T) {
	bucket := stack.Names["PayloadBucket"]
	p := s3payload.New(stack.Clients.S3, bucket, stack.Names["QuarantineKey"])
	storetest.RunPayloads(t, p, func(t *testing.T, ref quarantine.ObjectRef, data []byte) {
		if _, err := stack.Clients.S3.PutObject(context.Background(), &s3.PutObjectInput{
			Bucket: aws.String(ref.Bucket), Key: aws.String(ref.Key), Body: bytes.NewReader(data),
		}); err != nil {
			t.Fatal(err)
		}
	})
}

func TestItemSizeGuard(t *testing.T) {
	t.Parallel()
	s := dynamostore.New(stack.Clients.DynamoDB, stack.Names["QuarantineTable"])
	r := storetest.Record(t, storetest.UniqueID("big"))
	r.Body = string(bytes.Repeat([]byte("x"), dynamostore.MaxItemBytes))
	if err := quarantine.SealRecord(r); err != nil {
		t.Fatal(err)
	}
	if err := s.Create(context.Background(), r); !errors.Is(err, quarantine.ErrItemTooLarge) {
		t.Fatalf("oversized create = %v", err)
	}
}

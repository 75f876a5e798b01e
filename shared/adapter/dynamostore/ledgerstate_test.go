package dynamostore_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"

	"github.com/dlqquarantine/dlqq/shared/adapter/dynamostore"
	"github.com/dlqquarantine/dlqq/shared/domain/ledger"
)

func TestLedgerStateConditions(t *testing.T) {
	ctx := context.Background()
	s := dynamostore.LedgerState{API: stack.Clients.DynamoDB, Table: stack.Names["QuarantineTable"]}
	shard := fmt.Sprintf("shardId-%d", time.Now().UnixNano())
	if _, ok, err := s.Head(ctx, shard); ok || err != nil {
		t.Fatalf("a head before any: %v %v", ok, err)
	}
	t1 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	h := ledger.ChainHead{Shard: shard, LastSeq: "0001", SegmentKey: "k1", SegmentSHA256: "s1", Segments: 1, UpdatedAt: t1}
	if err := s.AdvanceHead(ctx, h, "", t1); err != nil {
		t.Fatal(err)
	}
	if err := s.AdvanceHead(ctx, h, "", t1); !errors.Is(err, ledger.ErrConflict) {
		t.Fatalf("a second first head: %v, want ErrConflict", err)
	}
	h2 := ledger.ChainHead{Shard: shard, LastSeq: "0002", SegmentKey: "k2", SegmentSHA256: "s2", Segments: 2, UpdatedAt: t1}
	if err := s.AdvanceHead(ctx, h2, "k0", t1.Add(time.Hour)); !errors.Is(err, ledger.ErrConflict) {
		t.Fatalf("advance from the wrong segment: %v", err)
	}
	if err := s.AdvanceHead(ctx, h2, "k1", t1.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	got, ok, err := s.Head(ctx, shard)
	if err != nil || !ok || got.LastSeq != "0002" || got.Segments != 2 || !got.PendingSince.Equal(t1) {
		t.Fatalf("head %+v %v %v; want seq 0002, pending since the first change", got, ok, err)
	}
	if err := s.MarkAnchored(ctx, shard, "k1", "0001"); !errors.Is(err, ledger.ErrConflict) {
		t.Fatalf("anchoring a moved head: %v", err)
	}
	// A late segment moves the head and keeps its last_seq: the segment
	// key is the condition, of the advance and of the anchoring.
	h3 := ledger.ChainHead{Shard: shard, LastSeq: "0002", SegmentKey: "k0000", SegmentSHA256: "s3", Segments: 3, UpdatedAt: t1}
	if err := s.AdvanceHead(ctx, h3, "k1", t1); !errors.Is(err, ledger.ErrConflict) {
		t.Fatalf("a late advance from a stale segment with the same last_seq: %v", err)
	}
	if err := s.AdvanceHead(ctx, h3, "k2", t1); err != nil {
		t.Fatal(err)
	}
	if err := s.MarkAnchored(ctx, shard, "k2", "0002"); !errors.Is(err, ledger.ErrConflict) {
		t.Fatalf("anchoring a head a late segment moved (same last_seq): %v", err)
	}
	if err := s.MarkAnchored(ctx, shard, "k0000", "0002"); err != nil {
		t.Fatal(err)
	}
	got, _, _ = s.Head(ctx, shard)
	if !got.PendingSince.IsZero() || got.AnchoredSeq != "0002" {
		t.Fatalf("head %+v, want anchored", got)
	}
	heads, err := s.Heads(ctx, []string{shard, shard + "-none"})
	if err != nil || len(heads) != 1 || heads[shard].SegmentKey != "k0000" {
		t.Fatalf("Heads = %+v, %v", heads, err)
	}

	d := ledger.DigestHead{N: 1, Key: ledger.DigestKey(1), SHA256: "h", Signature: "sig", At: t1}
	if _, ok, err := s.DigestHead(ctx); ok || err != nil {
		// The table is shared by the package's tests; only this one writes the digest head.
		t.Fatalf("a digest head before any: %v %v", ok, err)
	}
	if err := s.PutDigestHead(ctx, d, 0); err != nil {
		t.Fatal(err)
	}
	if err := s.PutDigestHead(ctx, d, 0); !errors.Is(err, ledger.ErrConflict) {
		t.Fatalf("a second digest 1: %v", err)
	}
	d2 := d
	d2.N, d2.Key = 2, ledger.DigestKey(2)
	if err := s.PutDigestHead(ctx, d2, 1); err != nil {
		t.Fatal(err)
	}
	if got, ok, err := s.DigestHead(ctx); err != nil || !ok || got != d2 {
		t.Fatalf("digest head %+v %v %v, want %+v", got, ok, err, d2)
	}
}

func TestLedgerItemRoundTripsThroughDynamoDB(t *testing.T) {
	ctx := context.Background()
	table := stack.Names["QuarantineTable"]
	it := ledger.Item{"dlq_id": ledger.Str("src#roundtrip"), "n": ledger.Num("1.5"), "ss": ledger.StrSet("b", "a"), "l": ledger.List(ledger.Null(), ledger.Bool(false)),
		"m": ledger.Map(map[string]ledger.Value{"b": ledger.Bin([]byte{0, 1})}), "bs": ledger.BinSet([]byte{2}, []byte{1}), "ns": ledger.NumSet("3", "2")}
	av, err := dynamostore.SDKItem(it)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := stack.Clients.DynamoDB.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: av}); err != nil {
		t.Fatal(err)
	}
	out, err := stack.Clients.DynamoDB.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), Key: map[string]types.AttributeValue{"dlq_id": av["dlq_id"]}, ConsistentRead: aws.Bool(true)})
	if err != nil {
		t.Fatal(err)
	}
	back, err := dynamostore.LedgerItem(out.Item)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := it.Canonical()
	b, _ := back.Canonical()
	if string(a) != string(b) {
		t.Fatalf("read back\n%s\nwrote\n%s", b, a)
	}
}

func TestStreamShardsListsTheTablesStream(t *testing.T) {
	arn := stack.StreamARNs["QuarantineTable"]
	if arn == "" {
		t.Fatal("the embedded table has no stream")
	}
	pages := 0
	api := describeCounter{c: dynamodbstreams.NewFromConfig(stack.AWS), pages: &pages}
	ids, err := dynamostore.StreamShards{API: api, StreamARN: arn}.Shards(context.Background())
	if err != nil || len(ids) == 0 || pages == 0 {
		t.Fatalf("shards %v, %v", ids, err)
	}
}

type describeCounter struct {
	c     *dynamodbstreams.Client
	pages *int
}

func (d describeCounter) DescribeStream(ctx context.Context, in *dynamodbstreams.DescribeStreamInput, opts ...func(*dynamodbstreams.Options)) (*dynamodbstreams.DescribeStreamOutput, error) {
	*d.pages++
	return d.c.DescribeStream(ctx, in, opts...)
}

package wire_test

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/dlqquarantine/dlqq/shared/adapter/dynamostore"
	"github.com/dlqquarantine/dlqq/shared/dev/storetest"
	dl "github.com/dlqquarantine/dlqq/shared/domain/ledger"
)

// rewriteHead writes a shard's head item directly, as a function role (or
// an administrator, or a table restore) could: the fields the ledger
// signs, set to h's.
func (l *ledgerStack) rewriteHead(h dl.Head) {
	l.t.Helper()
	pad, err := dl.PadSeq(h.LastSeq)
	if err != nil {
		l.t.Fatal(err)
	}
	_, err = l.st.Clients.DynamoDB.UpdateItem(context.Background(), &dynamodb.UpdateItemInput{TableName: aws.String(l.table),
		Key:              map[string]types.AttributeValue{"dlq_id": &types.AttributeValueMemberS{Value: dynamostore.LedgerHeadKey(h.Shard)}},
		UpdateExpression: aws.String("SET #k = :k, #h = :h, #n = :n, #l = :l"),
		ExpressionAttributeNames: map[string]string{"#k": dynamostore.LedgerSegmentKeyAttr, "#h": dynamostore.LedgerSegmentSHA256Attr,
			"#n": dynamostore.LedgerSegmentsAttr, "#l": dynamostore.LedgerLastSeqAttr},
		ExpressionAttributeValues: map[string]types.AttributeValue{":k": &types.AttributeValueMemberS{Value: h.SegmentKey},
			":h": &types.AttributeValueMemberS{Value: h.SegmentSHA256}, ":n": &types.AttributeValueMemberN{Value: strconv.FormatInt(h.Segments, 10)},
			":l": &types.AttributeValueMemberS{Value: pad}},
	})
	if err != nil {
		l.t.Fatal(err)
	}
}

func (l *ledgerStack) parsedDigest(n int64) dl.Digest {
	l.t.Helper()
	raw, err := l.objects.Get(context.Background(), dl.DigestKey(n))
	if err != nil {
		l.t.Fatal(err)
	}
	d, err := dl.ParseDigest(raw)
	if err != nil {
		l.t.Fatal(err)
	}
	return d
}

// The shard heads of a digest that have a chain.
func chained(d dl.Digest) map[string]dl.Head {
	out := map[string]dl.Head{}
	for _, h := range d.Shards {
		if h.SegmentKey != "" {
			out[h.Shard] = h
		}
	}
	return out
}

// A head item rewritten by a direct table write on the real stack (its
// hash zeroed, then rolled back to the shard's first segment, behind the
// signed digest) is never signed: the next digests keep the signed head
// and list the rewritten one as unproven, Verify stays clean, and the
// stream handler's next batch follows the real chain (no fork) and
// rewrites the head, which the digest after it signs.
func TestLedgerUnprovenHeadsAreNotSignedOnTheStack(t *testing.T) {
	l := startLedger(t)
	ctx := context.Background()
	for range 4 {
		l.put(storetest.Record(t, storetest.UniqueID("h")), 0)
	}
	l.drain()
	l.digest()
	d1 := chained(l.parsedDigest(1))
	var shard string
	var signed dl.Head
	for id, h := range d1 {
		if h.Segments >= 2 {
			shard, signed = id, h
		}
	}
	if shard == "" {
		t.Fatalf("digest 1 %+v: no shard with two segments", d1)
	}
	raw, err := l.objects.Get(ctx, signed.SegmentKey)
	if err != nil {
		t.Fatal(err)
	}
	seg, err := dl.ParseSegment(raw)
	if err != nil || seg.Prev == nil {
		t.Fatalf("the signed head's segment %+v, %v", seg, err)
	}

	zeroed := signed
	zeroed.SegmentSHA256 = strings.Repeat("0", 64)
	first, err := l.objects.Get(ctx, seg.Prev.Key)
	if err != nil {
		t.Fatal(err)
	}
	firstSeg, err := dl.ParseSegment(first)
	if err != nil {
		t.Fatal(err)
	}
	rolledBack := dl.Head{Shard: shard, SegmentKey: seg.Prev.Key, SegmentSHA256: seg.Prev.SHA256, Segments: signed.Segments - 1, LastSeq: firstSeg.LastSeq}
	for i, bad := range []dl.Head{zeroed, rolledBack} {
		l.rewriteHead(bad)
		n := int64(2 + i)
		if rep := l.digest(); !rep.Written || rep.N != n || rep.Unproven != 1 {
			t.Fatalf("digest %+v, want digest %d with one unproven head", rep, n)
		}
		d := l.parsedDigest(n)
		if got := chained(d)[shard]; got != signed {
			t.Fatalf("digest %d signs %+v for %s, want the signed head %+v kept", n, got, shard, signed)
		}
		if len(d.Unproven) != 1 || d.Unproven[0].Shard != shard || d.Unproven[0].SegmentKey != bad.SegmentKey || d.Unproven[0].SegmentSHA256 != bad.SegmentSHA256 {
			t.Fatalf("digest %d lists %+v as unproven, want %+v", n, d.Unproven, bad)
		}
		// Verify names each signed record of a rejected head
		// (head-unproven) and nothing else: no evidence is lost.
		if res := l.verify(); !onlyHeadUnproven(res, 2, n) || res.LastDigest != n {
			t.Fatalf("verify after digest %d: %+v", n, res)
		}
	}

	// The stream handler's next batches on that shard follow the real
	// chain: the new records' segments come after the signed head.
	for range 4 {
		l.put(storetest.Record(t, storetest.UniqueID("h")), 0)
	}
	l.drain()
	if rep := l.digest(); !rep.Written || rep.Unproven != 0 {
		t.Fatalf("digest %+v, want every head proven", rep)
	}
	res := l.verify()
	if !onlyHeadUnproven(res, 2, 3) || res.Items != 8 || res.Entries != 8 || res.Unanchored != 0 {
		t.Fatalf("verify: %+v", res)
	}
	if got := chained(l.parsedDigest(4))[shard]; got.Segments <= signed.Segments {
		t.Fatalf("digest 4's head of %s: %+v, want new segments after %+v", shard, got, signed)
	}
}

// onlyHeadUnproven reports whether res names exactly digests from..to as
// head-unproven and nothing else.
func onlyHeadUnproven(res dl.Result, from, to int64) bool {
	if len(res.Problems) != int(to-from+1) {
		return false
	}
	for n := from; n <= to; n++ {
		if !res.Has(dl.KindHeadUnproven, dl.DigestKey(n)) {
			return false
		}
	}
	return true
}

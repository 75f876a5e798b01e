package dynamostore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/dlqquarantine/dlqq/shared/domain/ledger"
	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
)

// LedgerStateAPI is what LedgerState needs of the DynamoDB client.
type LedgerStateAPI interface {
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
	BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error)
}

// LedgerState holds the ledger's items in the quarantine table (design
// §2): the shard chains' heads and the digest chain's head. Every read is
// consistent; every write is one conditional UpdateItem.
type LedgerState struct {
	API   LedgerStateAPI
	Table string
	// Pause waits between BatchGetItem rounds for unprocessed keys (nil:
	// a short backoff).
	Pause func(ctx context.Context, round int) error
}

// ledgerBatchGetMax is BatchGetItem's limit of keys per call.
const ledgerBatchGetMax = 100

// ledgerUnprocessedRounds bounds the retries of keys BatchGetItem left.
const ledgerUnprocessedRounds = 8

func (s LedgerState) get(ctx context.Context, key string) (map[string]types.AttributeValue, error) {
	out, err := s.API.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(s.Table), Key: itemKey(key), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return nil, fmt.Errorf("get %s: %w", key, err)
	}
	return out.Item, nil
}

func ledgerAttrS(item map[string]types.AttributeValue, name string) string {
	if v, ok := item[name].(*types.AttributeValueMemberS); ok {
		return v.Value
	}
	return ""
}

func ledgerAttrN(item map[string]types.AttributeValue, name string) (int64, error) {
	v, ok := item[name].(*types.AttributeValueMemberN)
	if !ok {
		return 0, fmt.Errorf("attribute %s is not a number", name)
	}
	return strconv.ParseInt(v.Value, 10, 64)
}

func ledgerAttrTime(item map[string]types.AttributeValue, name string) (time.Time, error) {
	s := ledgerAttrS(item, name)
	if s == "" {
		return time.Time{}, nil
	}
	return time.Parse(time.RFC3339Nano, s)
}

func ledgerHead(shard string, item map[string]types.AttributeValue) (ledger.ChainHead, error) {
	h := ledger.ChainHead{Shard: shard, LastSeq: ledgerAttrS(item, LedgerLastSeqAttr), SegmentKey: ledgerAttrS(item, LedgerSegmentKeyAttr),
		SegmentSHA256: ledgerAttrS(item, LedgerSegmentSHA256Attr), AnchoredSeq: ledgerAttrS(item, LedgerAnchoredSeqAttr)}
	var errs [3]error
	h.Segments, errs[0] = ledgerAttrN(item, LedgerSegmentsAttr)
	h.PendingSince, errs[1] = ledgerAttrTime(item, LedgerPendingSinceAttr)
	h.UpdatedAt, errs[2] = ledgerAttrTime(item, LedgerUpdatedAtAttr)
	if err := errors.Join(errs[:]...); err != nil || h.LastSeq == "" || h.SegmentKey == "" {
		return h, fmt.Errorf("ledger head of shard %s is malformed: %v", shard, err)
	}
	if _, ok := item[LedgerHeadCanaryAttr]; ok { // absent until a canary lands on the chain
		var err error
		if h.Canary, err = ledgerAttrN(item, LedgerHeadCanaryAttr); err != nil {
			return h, fmt.Errorf("ledger head of shard %s is malformed: %v", shard, err)
		}
	}
	return h, nil
}

// Head reads a shard's head (false when there is none).
func (s LedgerState) Head(ctx context.Context, shard string) (ledger.ChainHead, bool, error) {
	item, err := s.get(ctx, LedgerHeadKey(shard))
	if err != nil || item == nil {
		return ledger.ChainHead{}, false, err
	}
	h, err := ledgerHead(shard, item)
	return h, err == nil, err
}

// Heads reads the heads of shards with consistent BatchGetItem calls;
// shards without a head are absent from the answer.
func (s LedgerState) Heads(ctx context.Context, shards []string) (map[string]ledger.ChainHead, error) {
	out := map[string]ledger.ChainHead{}
	for len(shards) > 0 {
		n := min(len(shards), ledgerBatchGetMax)
		keys := make([]map[string]types.AttributeValue, n)
		for i, sh := range shards[:n] {
			keys[i] = itemKey(LedgerHeadKey(sh))
		}
		shards = shards[n:]
		req := map[string]types.KeysAndAttributes{s.Table: {Keys: keys, ConsistentRead: aws.Bool(true)}}
		for round := 0; len(req) > 0; round++ {
			if round > 0 {
				if round > ledgerUnprocessedRounds {
					return nil, errors.New("read ledger heads: keys left unprocessed after retries")
				}
				if err := s.pause(ctx, round); err != nil {
					return nil, err
				}
			}
			res, err := s.API.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: req})
			if err != nil {
				return nil, fmt.Errorf("read ledger heads: %w", err)
			}
			for _, item := range res.Responses[s.Table] {
				key := ledgerAttrS(item, KeyAttr)
				shard := key[min(len(key), len(LedgerHeadPrefix)):]
				h, err := ledgerHead(shard, item)
				if err != nil {
					return nil, err
				}
				out[shard] = h
			}
			req = res.UnprocessedKeys
		}
	}
	return out, nil
}

func (s LedgerState) pause(ctx context.Context, round int) error {
	if s.Pause != nil {
		return s.Pause(ctx, round)
	}
	return quarantine.Sleep(ctx, time.Duration(round*round)*20*time.Millisecond)
}

func ledgerConflict(err error, what string) error {
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return fmt.Errorf("%s: %w", what, ledger.ErrConflict)
	}
	return fmt.Errorf("%s: %w", what, err)
}

func ledgerStr(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }

// AdvanceHead writes h if the head's segment_key is still prevSegmentKey
// ("" : no head yet), keeping an existing pending_since and setting
// pendingSince otherwise (ledger.ErrConflict when the condition fails).
func (s LedgerState) AdvanceHead(ctx context.Context, h ledger.ChainHead, prevSegmentKey string, pendingSince time.Time) error {
	in := &dynamodb.UpdateItemInput{
		TableName: aws.String(s.Table), Key: itemKey(LedgerHeadKey(h.Shard)),
		UpdateExpression: aws.String("SET #l = :l, #k = :k, #h = :h, #n = :n, #u = :u, #p = if_not_exists(#p, :p)"),
		ExpressionAttributeNames: map[string]string{"#l": LedgerLastSeqAttr, "#k": LedgerSegmentKeyAttr, "#h": LedgerSegmentSHA256Attr,
			"#n": LedgerSegmentsAttr, "#u": LedgerUpdatedAtAttr, "#p": LedgerPendingSinceAttr},
		ExpressionAttributeValues: map[string]types.AttributeValue{":l": ledgerStr(h.LastSeq), ":k": ledgerStr(h.SegmentKey), ":h": ledgerStr(h.SegmentSHA256),
			":n": &types.AttributeValueMemberN{Value: strconv.FormatInt(h.Segments, 10)}, ":u": ledgerStr(h.UpdatedAt.UTC().Format(time.RFC3339Nano)),
			":p": ledgerStr(pendingSince.UTC().Format(time.RFC3339Nano))},
		ConditionExpression: aws.String("attribute_not_exists(#k)"),
	}
	if h.Canary > 0 { // canary.go
		*in.UpdateExpression += ", #c = :c"
		in.ExpressionAttributeNames["#c"] = LedgerHeadCanaryAttr
		in.ExpressionAttributeValues[":c"] = &types.AttributeValueMemberN{Value: strconv.FormatInt(h.Canary, 10)}
	}
	if prevSegmentKey != "" {
		in.ConditionExpression = aws.String("#k = :prev")
		in.ExpressionAttributeValues[":prev"] = ledgerStr(prevSegmentKey)
	}
	if _, err := s.API.UpdateItem(ctx, in); err != nil {
		return ledgerConflict(err, "advance ledger head of shard "+h.Shard)
	}
	return nil
}

// MarkAnchored sets anchored_seq to lastSeq and removes pending_since if
// the head's segment_key is still segmentKey (ledger.ErrConflict
// otherwise: a segment of late changes keeps last_seq, not the key).
func (s LedgerState) MarkAnchored(ctx context.Context, shard, segmentKey, lastSeq string) error {
	_, err := s.API.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(s.Table), Key: itemKey(LedgerHeadKey(shard)),
		UpdateExpression:          aws.String("SET #a = :l REMOVE #p"),
		ConditionExpression:       aws.String("#k = :k"),
		ExpressionAttributeNames:  map[string]string{"#a": LedgerAnchoredSeqAttr, "#p": LedgerPendingSinceAttr, "#k": LedgerSegmentKeyAttr},
		ExpressionAttributeValues: map[string]types.AttributeValue{":l": ledgerStr(lastSeq), ":k": ledgerStr(segmentKey)},
	})
	if err != nil {
		return ledgerConflict(err, "mark ledger head of shard "+shard+" anchored")
	}
	return nil
}

// DigestHead reads the digest chain's head (false: no digest yet).
func (s LedgerState) DigestHead(ctx context.Context) (ledger.DigestHead, bool, error) {
	item, err := s.get(ctx, LedgerDigestKey)
	if err != nil || item == nil {
		return ledger.DigestHead{}, false, err
	}
	d := ledger.DigestHead{Key: ledgerAttrS(item, LedgerDigestKeyAttr), SHA256: ledgerAttrS(item, LedgerDigestSHA256Attr), Signature: ledgerAttrS(item, LedgerDigestSignatureAttr)}
	var errs [2]error
	d.N, errs[0] = ledgerAttrN(item, LedgerDigestNAttr)
	d.At, errs[1] = ledgerAttrTime(item, LedgerDigestAtAttr)
	if err := errors.Join(errs[:]...); err != nil || d.Key == "" || d.N < 1 {
		return d, false, fmt.Errorf("ledger digest head is malformed: %v", err)
	}
	return d, true, nil
}

// PutDigestHead writes d if the head's n is still prevN (0: none yet;
// ledger.ErrConflict otherwise).
func (s LedgerState) PutDigestHead(ctx context.Context, d ledger.DigestHead, prevN int64) error {
	in := &dynamodb.UpdateItemInput{
		TableName: aws.String(s.Table), Key: itemKey(LedgerDigestKey),
		UpdateExpression: aws.String("SET #n = :n, #k = :k, #h = :h, #s = :s, #a = :a"),
		ExpressionAttributeNames: map[string]string{"#n": LedgerDigestNAttr, "#k": LedgerDigestKeyAttr, "#h": LedgerDigestSHA256Attr,
			"#s": LedgerDigestSignatureAttr, "#a": LedgerDigestAtAttr},
		ExpressionAttributeValues: map[string]types.AttributeValue{":n": &types.AttributeValueMemberN{Value: strconv.FormatInt(d.N, 10)},
			":k": ledgerStr(d.Key), ":h": ledgerStr(d.SHA256), ":s": ledgerStr(d.Signature), ":a": ledgerStr(d.At.UTC().Format(time.RFC3339Nano))},
		ConditionExpression: aws.String("attribute_not_exists(#n)"),
	}
	if prevN != 0 {
		in.ConditionExpression = aws.String("#n = :prev")
		in.ExpressionAttributeValues[":prev"] = &types.AttributeValueMemberN{Value: strconv.FormatInt(prevN, 10)}
	}
	if _, err := s.API.UpdateItem(ctx, in); err != nil {
		return ledgerConflict(err, "update ledger digest head")
	}
	return nil
}

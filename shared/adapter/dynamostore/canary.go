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
)

// The ledger's canary (issue 25; usecase/ledger pipeline.go): one item,
// ledger.CanaryKey, that each digest run updates so that a change goes
// through the stream to the ledger. Only the ledger role writes it (the
// template's NeverWriteTheLedgersState denies #cny# to every other role).
// The stream handler ledgers its changes; the chain head it lands on
// records the newest number (LedgerHeadCanaryAttr).
const (
	// LedgerHeadCanaryAttr is a head's highest canary number.
	LedgerHeadCanaryAttr = "canary"
	// CanarySinceAttr is when the oldest canary not yet arrived was
	// written.
	CanarySinceAttr = "canary_since"
)

// Canaries reads and writes the canary item with consistent reads and
// one conditional UpdateItem per write.
type Canaries struct {
	API   LedgerStateAPI
	Table string
}

// Canary reads the canary item (false: none yet).
func (c Canaries) Canary(ctx context.Context) (ledger.CanaryItem, bool, error) {
	out, err := c.API.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(c.Table), Key: itemKey(ledger.CanaryKey), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return ledger.CanaryItem{}, false, fmt.Errorf("get %s: %w", ledger.CanaryKey, err)
	}
	if out.Item == nil {
		return ledger.CanaryItem{}, false, nil
	}
	var it ledger.CanaryItem
	var errs [3]error
	it.N, errs[0] = ledgerAttrN(out.Item, ledger.CanaryNAttr)
	it.At, errs[1] = ledgerAttrTime(out.Item, ledger.CanaryAtAttr)
	it.Since, errs[2] = ledgerAttrTime(out.Item, CanarySinceAttr)
	if err := errors.Join(errs[:]...); err != nil || it.N < 1 {
		return it, false, fmt.Errorf("the ledger's canary item is malformed: %v", err)
	}
	return it, true, nil
}

// WriteCanary writes it if the item's number is still prevN (0: no item
// yet; ledger.ErrConflict otherwise).
func (c Canaries) WriteCanary(ctx context.Context, it ledger.CanaryItem, prevN int64) error {
	in := &dynamodb.UpdateItemInput{
		TableName: aws.String(c.Table), Key: itemKey(ledger.CanaryKey),
		UpdateExpression:         aws.String("SET #n = :n, #a = :a, #s = :s"),
		ExpressionAttributeNames: map[string]string{"#n": ledger.CanaryNAttr, "#a": ledger.CanaryAtAttr, "#s": CanarySinceAttr},
		ExpressionAttributeValues: map[string]types.AttributeValue{":n": &types.AttributeValueMemberN{Value: strconv.FormatInt(it.N, 10)},
			":a": ledgerStr(it.At.UTC().Format(time.RFC3339Nano)), ":s": ledgerStr(it.Since.UTC().Format(time.RFC3339Nano))},
		ConditionExpression: aws.String("attribute_not_exists(#n)"),
	}
	if prevN != 0 {
		in.ConditionExpression = aws.String("#n = :prev")
		in.ExpressionAttributeValues[":prev"] = &types.AttributeValueMemberN{Value: strconv.FormatInt(prevN, 10)}
	}
	if _, err := c.API.UpdateItem(ctx, in); err != nil {
		return ledgerConflict(err, "write the ledger's canary")
	}
	return nil
}

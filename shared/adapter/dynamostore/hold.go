package dynamostore

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
)

// Hold implements quarantine.Store: one UpdateItem that sets the hold
// attributes on the record item, only while it still holds h.Version and
// no hold. Nothing else of the item is written; the hold is counted from
// the stream (Counts: a change that only adds the hold).
func (s *Store) Hold(ctx context.Context, h quarantine.IntegrityHold) error {
	reason := h.Reason
	if reason == "" {
		reason = quarantine.HoldReason(nil)
	}
	cond := expression.AttributeExists(expression.Name(KeyAttr)).
		And(expression.AttributeNotExists(expression.Name(HoldAttr)))
	if h.Version >= 0 {
		// (A negative version holds an item whose version does not decode.)
		cond = cond.And(expression.Name(VersionAttr).Equal(expression.Value(h.Version)))
	}
	upd := expression.Set(expression.Name(HoldAttr), expression.Value(reason)).
		Set(expression.Name(HoldAtAttr), expression.Value(quarantine.At(h.At).String()))
	expr, err := expression.NewBuilder().WithCondition(cond).WithUpdate(upd).Build()
	if err != nil {
		return fmt.Errorf("build hold: %w", err)
	}
	_, err = s.api.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(s.table), Key: itemKey(h.ID),
		// One line: kumo drops the clauses after a newline (docs/emulators.md).
		UpdateExpression:    aws.String(strings.ReplaceAll(aws.ToString(expr.Update()), "\n", " ")),
		ConditionExpression: expr.Condition(), ExpressionAttributeNames: expr.Names(), ExpressionAttributeValues: expr.Values(),
	})
	// The SDK's retry of a hold whose answer was lost fails the condition
	// (the hold is there): the read-back below finds it held.
	if err = asConditionFailed(err); !errors.Is(err, errConditionFailed) {
		if err != nil {
			return fmt.Errorf("hold %s: %w", h.ID, err)
		}
		return nil
	}
	// Why did the condition fail? Gone, already held, or another version.
	out, err := s.api.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String(s.table), ConsistentRead: aws.Bool(true),
		Key:                      itemKey(h.ID),
		ProjectionExpression:     aws.String("#v, #h"),
		ExpressionAttributeNames: map[string]string{"#v": VersionAttr, "#h": HoldAttr},
	})
	switch {
	case err != nil:
		return fmt.Errorf("hold %s: %w", h.ID, err)
	case len(out.Item) == 0:
		return fmt.Errorf("hold %s: %w", h.ID, quarantine.ErrNotFound)
	case out.Item[HoldAttr] != nil:
		return nil // held already: once is enough (and one change counts it)
	}
	return quarantine.ErrVersionConflict
}

// HoldOf returns the integrity hold an item carries, if any.
func HoldOf(item map[string]types.AttributeValue) (quarantine.IntegrityHold, bool) {
	reason, ok := item[HoldAttr].(*types.AttributeValueMemberS)
	if !ok {
		return quarantine.IntegrityHold{}, false
	}
	h := quarantine.IntegrityHold{Reason: reason.Value}
	if k, ok := item[KeyAttr].(*types.AttributeValueMemberS); ok {
		h.ID = k.Value
	}
	if v, ok := item[VersionAttr].(*types.AttributeValueMemberN); ok {
		fmt.Sscan(v.Value, &h.Version)
	}
	if at, ok := item[HoldAtAttr].(*types.AttributeValueMemberS); ok {
		var t quarantine.Time
		if t.UnmarshalText([]byte(at.Value)) == nil {
			h.At = t.Time
		}
	}
	return h, true
}

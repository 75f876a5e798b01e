package dynamostore

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/dlqquarantine/dlqq/shared/domain/ledger"
)

// ledgerScanAPI is what ScanLedgered needs beyond LedgerStateAPI (the SDK
// client has it).
type ledgerScanAPI interface {
	Scan(ctx context.Context, in *dynamodb.ScanInput, opts ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error)
}

// ScanLedgered scans the table with consistent reads from after the key
// after ("" from the start), calling page with each page's ledgered items
// (records and policies) and the key to go on after ("" on the last page,
// which is always called). It implements the ledger's TableScanner for
// the baseline.
func (s LedgerState) ScanLedgered(ctx context.Context, after string, page func(items []ledger.Item, resume string) error) error {
	api, ok := s.API.(ledgerScanAPI)
	if !ok {
		return errors.New("the ledger state's DynamoDB client cannot Scan")
	}
	in := &dynamodb.ScanInput{TableName: aws.String(s.Table), ConsistentRead: aws.Bool(true)}
	if after != "" {
		in.ExclusiveStartKey = itemKey(after)
	}
	for {
		out, err := api.Scan(ctx, in)
		if err != nil {
			return fmt.Errorf("scan %s: %w", s.Table, err)
		}
		var items []ledger.Item
		for _, raw := range out.Items {
			key, _ := raw[KeyAttr].(*types.AttributeValueMemberS)
			if key == nil || !ledger.Ledgered(key.Value) {
				continue
			}
			it, err := LedgerItem(raw)
			if err != nil {
				return fmt.Errorf("item %s: %w", key.Value, err)
			}
			items = append(items, it)
		}
		resume := ""
		if len(out.LastEvaluatedKey) > 0 {
			k, ok := out.LastEvaluatedKey[KeyAttr].(*types.AttributeValueMemberS)
			if !ok || k.Value == "" {
				return errors.New("scan: a LastEvaluatedKey without its dlq_id")
			}
			resume = k.Value
		}
		if err := page(items, resume); err != nil {
			return err
		}
		if resume == "" {
			return nil
		}
		in.ExclusiveStartKey = out.LastEvaluatedKey
	}
}

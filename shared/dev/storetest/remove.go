package storetest

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// RemoveSource deletes a test's records of source from table (every item
// whose key starts "<source>#") and the source's index marker
// ("#src#<source>"), so that later work on the same emulator does not
// read them: kumo's Scan and Query read the whole table, so a table that
// only grows slows every later listing, which DynamoDB's Query does not.
func RemoveSource(ctx context.Context, api *dynamodb.Client, table, source string) error {
	if source == "" || strings.Contains(source, "#") {
		// "" or a name with '#' would match other sources' records, the
		// counters and the ledger's state.
		return fmt.Errorf("remove source %q: not a source name", source)
	}
	p := dynamodb.NewScanPaginator(api, &dynamodb.ScanInput{
		TableName:                 aws.String(table),
		FilterExpression:          aws.String("begins_with(dlq_id, :p) OR dlq_id = :m"),
		ProjectionExpression:      aws.String("dlq_id"),
		ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{":p": &ddbtypes.AttributeValueMemberS{Value: source + "#"}, ":m": &ddbtypes.AttributeValueMemberS{Value: "#src#" + source}},
	})
	var keys []map[string]ddbtypes.AttributeValue
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return fmt.Errorf("remove source %s: %w", source, err)
		}
		for _, item := range page.Items {
			keys = append(keys, map[string]ddbtypes.AttributeValue{"dlq_id": item["dlq_id"]})
		}
	}
	for len(keys) > 0 {
		n := min(25, len(keys)) // BatchWriteItem's most
		var reqs []ddbtypes.WriteRequest
		for _, k := range keys[:n] {
			reqs = append(reqs, ddbtypes.WriteRequest{DeleteRequest: &ddbtypes.DeleteRequest{Key: k}})
		}
		keys = keys[n:]
		out, err := api.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: map[string][]ddbtypes.WriteRequest{table: reqs}})
		if err != nil {
			return fmt.Errorf("remove source %s: %w", source, err)
		}
		if left := out.UnprocessedItems[table]; len(left) > 0 {
			for _, r := range left {
				keys = append(keys, r.DeleteRequest.Key)
			}
			time.Sleep(50 * time.Millisecond) // throttled: back off a little
		}
	}
	return nil
}

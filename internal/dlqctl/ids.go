package dlqctl

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/dlqquarantine/dlqq/shared/adapter/dynamostore"
	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
)

// maxPrefixMatches is how many records an ambiguous prefix names before
// the search stops.
const maxPrefixMatches = 5

// resolveID turns what the user typed into a record id: the id itself
// when such a record exists, else the one record whose id starts with it
// (a table's short id, with or without its ellipsis). It refuses a prefix
// that matches several records, naming some of them.
func (a *App) resolveID(ctx context.Context, typed string) (string, error) {
	store, _, _, err := a.store(ctx)
	if err != nil {
		return "", err
	}
	if _, err := store.Get(ctx, typed); err == nil {
		return typed, nil
	} else if !errors.Is(err, quarantine.ErrNotFound) {
		return "", describe(err, a.Table)
	}
	prefix := strings.TrimSuffix(strings.TrimSuffix(typed, "…"), "...")
	if prefix == "" {
		return "", fmt.Errorf("no record %q in table %s", typed, a.Table)
	}
	matches, err := a.idsWithPrefix(ctx, prefix)
	if err != nil {
		return "", err
	}
	switch len(matches) {
	case 0:
		return "", fmt.Errorf("no record %q in table %s", typed, a.Table)
	case 1:
		return matches[0], nil
	}
	more := ""
	if len(matches) >= maxPrefixMatches {
		more = " and maybe more"
	}
	return "", &UsageError{fmt.Errorf("%q is ambiguous: it begins the ids %s%s; give more of the id", typed, strings.Join(matches, ", "), more)}
}

// idsWithPrefix scans the table for record ids starting with prefix (a
// forensic read, as verify's; show calls it only when no record has
// exactly the id typed), up to maxPrefixMatches.
func (a *App) idsWithPrefix(ctx context.Context, prefix string) ([]string, error) {
	c, err := a.connect(ctx)
	if err != nil {
		return nil, err
	}
	p := dynamodb.NewScanPaginator(c.DynamoDB, &dynamodb.ScanInput{
		TableName:                 aws.String(a.Table),
		FilterExpression:          aws.String("begins_with(dlq_id, :p)"),
		ProjectionExpression:      aws.String("dlq_id"),
		ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{":p": &ddbtypes.AttributeValueMemberS{Value: prefix}},
	})
	var out []string
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, describe(err, a.Table)
		}
		for _, item := range page.Items {
			k, ok := item["dlq_id"].(*ddbtypes.AttributeValueMemberS)
			if !ok || !dynamostore.IsRecordKey(k.Value) || !strings.HasPrefix(k.Value, prefix) {
				continue
			}
			if out = append(out, k.Value); len(out) >= maxPrefixMatches {
				return out, nil
			}
		}
	}
	return out, nil
}

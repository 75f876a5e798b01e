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

// idPrefix reports whether typed is a prefix, the form ls and buckets
// print: it ends with an ellipsis ("…" or "..."). prefix is typed without it.
func idPrefix(typed string) (prefix string, ok bool) {
	for _, e := range []string{"…", "..."} {
		if p, found := strings.CutSuffix(typed, e); found {
			return p, true
		}
	}
	return typed, false
}

// resolveID turns what the user typed into a record id. An id without an
// ellipsis is taken exactly: a typo names no record, never another one. An
// id ending with an ellipsis ("…" or "...": a table's short id) is a
// prefix, resolved to the one record whose id starts with it, and the id
// it matched is said on stderr; a prefix that matches several records is
// refused, naming some of them.
func (a *App) resolveID(ctx context.Context, typed string) (string, error) {
	prefix, isPrefix := idPrefix(typed)
	if !isPrefix {
		store, _, _, err := a.store(ctx)
		if err != nil {
			return "", err
		}
		if _, err := store.Get(ctx, typed); errors.Is(err, quarantine.ErrNotFound) {
			return "", fmt.Errorf("no record %q in table %s; for a prefix end it with …", typed, a.Table)
		} else if err != nil {
			return "", describe(err, a.Table)
		}
		return typed, nil
	}
	if prefix == "" {
		return "", &UsageError{fmt.Errorf("%q: give the start of an id before the ellipsis", typed)}
	}
	matches, err := a.idsWithPrefix(ctx, prefix)
	if err != nil {
		return "", err
	}
	switch len(matches) {
	case 0:
		return "", fmt.Errorf("no record id in table %s begins with %q", a.Table, prefix)
	case 1:
		fmt.Fprintf(a.Err, "matched %s\n", matches[0])
		return matches[0], nil
	}
	more := ""
	if len(matches) >= maxPrefixMatches {
		more = " and maybe more"
	}
	return "", &UsageError{fmt.Errorf("%q is ambiguous: it begins the ids %s%s; give more of the id", typed, strings.Join(matches, ", "), more)}
}

// idsWithPrefix scans the table for record ids starting with prefix (a
// forensic read, as verify's; show calls it only for an id typed with an
// ellipsis), up to maxPrefixMatches.
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

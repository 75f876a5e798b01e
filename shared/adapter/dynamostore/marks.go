package dynamostore

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
)

// The metrics function's marks (quarantine.MetricMarks): one item per
// source, #mtr#<source>, that the metrics role alone writes (the
// template's OnlyMetricsWritesItsMarksPolicy denies #mtr# to every other
// function role; operators and auditors write no table item at all). No
// record, counter or ledger state: the ledger ignores it (ledger.Ledgered).
const (
	marksKeyPrefix = "#mtr#"
	marksHeldAttr  = "held"
	marksPoisAttr  = "poisoned" // a map: hour (bucketLayout) → count
	marksRevAttr   = "rev"
	marksAtAttr    = "at"
)

// MarksKey is the table key of a source's metrics marks.
func MarksKey(source string) string { return marksKeyPrefix + source }

// ReadMetricMarks reads a source's marks with a consistent read (Rev 0:
// none stored yet). Marks that do not read are quarantine.ErrMarksMalformed,
// with the stored revision when it reads.
func (s *Store) ReadMetricMarks(ctx context.Context, source string) (quarantine.MetricMarks, error) {
	out, err := s.api.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(s.table), Key: itemKey(MarksKey(source)), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return quarantine.MetricMarks{}, fmt.Errorf("read metrics marks: %w", err)
	}
	if out.Item == nil {
		return quarantine.MetricMarks{}, nil
	}
	m := quarantine.MetricMarks{Poisoned: map[time.Time]int64{}}
	var errs []error
	num := func(av types.AttributeValue, what string) int64 {
		n, ok := av.(*types.AttributeValueMemberN)
		if !ok {
			errs = append(errs, fmt.Errorf("%s is not a number", what))
			return 0
		}
		v, err := strconv.ParseInt(n.Value, 10, 64)
		if err != nil || v < 0 {
			errs = append(errs, fmt.Errorf("%s %q is not a count", what, n.Value))
		}
		return v
	}
	m.Held = num(out.Item[marksHeldAttr], marksHeldAttr)
	m.Rev = num(out.Item[marksRevAttr], marksRevAttr)
	if pm, ok := out.Item[marksPoisAttr].(*types.AttributeValueMemberM); ok {
		for k, av := range pm.Value {
			h, err := time.Parse(bucketLayout, k)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: hour %q", marksPoisAttr, k))
				continue
			}
			m.Poisoned[h] = num(av, marksPoisAttr+" "+k)
		}
	} else {
		errs = append(errs, fmt.Errorf("%s is not a map", marksPoisAttr))
	}
	if m.Rev < 1 {
		errs = append(errs, errors.New("no revision"))
	}
	if err := errors.Join(errs...); err != nil {
		// Only the revision, so that the marks can be written over.
		return quarantine.MetricMarks{Rev: m.Rev}, fmt.Errorf("%w: %s: %w", quarantine.ErrMarksMalformed, source, err)
	}
	return m, nil
}

// WriteMetricMarks stores m as revision prevRev+1 if the stored marks are
// still at prevRev (0: none yet); quarantine.ErrMarksMoved otherwise.
func (s *Store) WriteMetricMarks(ctx context.Context, source string, prevRev int64, m quarantine.MetricMarks, at time.Time) error {
	pois := map[string]types.AttributeValue{}
	for _, h := range slices.SortedFunc(maps.Keys(m.Poisoned), time.Time.Compare) {
		pois[h.UTC().Format(bucketLayout)] = &types.AttributeValueMemberN{Value: strconv.FormatInt(m.Poisoned[h], 10)}
	}
	in := &dynamodb.PutItemInput{
		TableName: aws.String(s.table),
		Item: map[string]types.AttributeValue{
			KeyAttr:       &types.AttributeValueMemberS{Value: MarksKey(source)},
			marksHeldAttr: &types.AttributeValueMemberN{Value: strconv.FormatInt(m.Held, 10)},
			marksPoisAttr: &types.AttributeValueMemberM{Value: pois},
			marksRevAttr:  &types.AttributeValueMemberN{Value: strconv.FormatInt(prevRev+1, 10)},
			marksAtAttr:   &types.AttributeValueMemberS{Value: at.UTC().Format(time.RFC3339Nano)},
		},
		ExpressionAttributeNames: map[string]string{"#r": marksRevAttr},
		// Revision 0: no marks, or marks without a revision that reads
		// (ErrMarksMalformed), which are written over.
		ConditionExpression:       aws.String("attribute_not_exists(#r) OR NOT attribute_type(#r, :n)"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":n": &types.AttributeValueMemberS{Value: "N"}},
	}
	if prevRev != 0 {
		in.ConditionExpression = aws.String("#r = :prev")
		in.ExpressionAttributeValues = map[string]types.AttributeValue{":prev": &types.AttributeValueMemberN{Value: strconv.FormatInt(prevRev, 10)}}
	}
	if _, err := s.api.PutItem(ctx, in); err != nil {
		var ccf *types.ConditionalCheckFailedException
		if errors.As(err, &ccf) {
			return fmt.Errorf("write metrics marks of %s: %w", source, quarantine.ErrMarksMoved)
		}
		return fmt.Errorf("write metrics marks of %s: %w", source, err)
	}
	return nil
}

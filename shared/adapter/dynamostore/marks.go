package dynamostore

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
)

// The metrics function's marks (quarantine.MetricMarks): one item per
// source, #mtr#<source>, that the metrics role alone writes, with these
// attributes only (the template's WriteItsMarks and
// OnlyMetricsWritesItsMarksPolicy; operators and auditors write no table
// item at all). No record, counter or ledger state: the ledger ignores it
// (ledger.Ledgered), and it carries no index key.
const (
	marksKeyPrefix = "#mtr#"
	marksHeldAttr  = "held"
	marksPoisAttr  = "poisoned" // a map: hour (bucketLayout) → count
	marksRevAttr   = "rev"
	marksAtAttr    = "at"
)

// MarksAttributes are every attribute a marks item has.
var MarksAttributes = []string{KeyAttr, marksHeldAttr, marksPoisAttr, marksRevAttr, marksAtAttr}

// MarksKey is the table key of a source's metrics marks.
func MarksKey(source string) string { return marksKeyPrefix + source }

// revToken is the opaque revision of a stored rev attribute: its type and
// value as stored, so that a write can be conditioned on exactly what was
// read, whatever it is ("" : none; "X": a type other than N or S).
func revToken(av types.AttributeValue) string {
	switch v := av.(type) {
	case nil:
		return ""
	case *types.AttributeValueMemberN:
		return "N:" + v.Value
	case *types.AttributeValueMemberS:
		return "S:" + v.Value
	}
	return "X"
}

// ReadMetricMarks reads a source's marks with a consistent read (Rev "":
// none stored yet). Marks that do not read are quarantine.ErrMarksMalformed,
// with the stored revision, so that they can be written over.
func (s *Store) ReadMetricMarks(ctx context.Context, source string) (quarantine.MetricMarks, error) {
	out, err := s.api.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(s.table), Key: itemKey(MarksKey(source)), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return quarantine.MetricMarks{}, fmt.Errorf("read metrics marks: %w", err)
	}
	if out.Item == nil {
		return quarantine.MetricMarks{}, nil
	}
	m := quarantine.MetricMarks{Poisoned: map[time.Time]int64{}, Rev: revToken(out.Item[marksRevAttr])}
	var errs []error
	// A count may be below 0: a mark follows its counter down
	// (metrics.ErrMarksAhead), also one written behind the ledger.
	num := func(av types.AttributeValue, what string) int64 {
		n, ok := av.(*types.AttributeValueMemberN)
		if !ok {
			errs = append(errs, fmt.Errorf("%s is not a number", what))
			return 0
		}
		v, err := strconv.ParseInt(n.Value, 10, 64)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s is not a whole number", what))
		}
		return v
	}
	m.Held = num(out.Item[marksHeldAttr], marksHeldAttr)
	if rev := num(out.Item[marksRevAttr], marksRevAttr); rev < 1 || rev == math.MaxInt64 {
		errs = append(errs, errors.New("the revision is not a number from 1 below the largest"))
	}
	if pm, ok := out.Item[marksPoisAttr].(*types.AttributeValueMemberM); ok {
		for k, av := range pm.Value {
			h, err := time.Parse(bucketLayout, k)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: an hour that does not read", marksPoisAttr))
				continue
			}
			m.Poisoned[h] = num(av, marksPoisAttr)
		}
	} else {
		errs = append(errs, fmt.Errorf("%s is not a map", marksPoisAttr))
	}
	if at, ok := out.Item[marksAtAttr].(*types.AttributeValueMemberS); !ok {
		errs = append(errs, fmt.Errorf("%s is not a string", marksAtAttr))
	} else if m.At, err = time.Parse(time.RFC3339Nano, at.Value); err != nil {
		errs = append(errs, fmt.Errorf("%s is not a time", marksAtAttr))
	}
	if len(errs) > 0 {
		// The reasons name attributes, never their stored values.
		return quarantine.MetricMarks{Rev: m.Rev}, fmt.Errorf("%w: %s: %w", quarantine.ErrMarksMalformed, source, errors.Join(errs...))
	}
	return m, nil
}

// WriteMetricMarks stores m if the stored revision is still prevRev (""
// none; quarantine.ErrMarksMoved otherwise), as the next revision: one
// more than a revision that reads, 1 over one that does not.
func (s *Store) WriteMetricMarks(ctx context.Context, source, prevRev string, m quarantine.MetricMarks) error {
	pois := map[string]types.AttributeValue{}
	for _, h := range slices.SortedFunc(maps.Keys(m.Poisoned), time.Time.Compare) {
		pois[h.UTC().Format(bucketLayout)] = &types.AttributeValueMemberN{Value: strconv.FormatInt(m.Poisoned[h], 10)}
	}
	next := int64(1)
	if v, ok := strings.CutPrefix(prevRev, "N:"); ok {
		if n, err := strconv.ParseInt(v, 10, 64); err == nil && n >= 1 && n < math.MaxInt64 {
			next = n + 1
		}
	}
	in := &dynamodb.PutItemInput{
		TableName: aws.String(s.table),
		Item: map[string]types.AttributeValue{
			KeyAttr:       &types.AttributeValueMemberS{Value: MarksKey(source)},
			marksHeldAttr: &types.AttributeValueMemberN{Value: strconv.FormatInt(m.Held, 10)},
			marksPoisAttr: &types.AttributeValueMemberM{Value: pois},
			marksRevAttr:  &types.AttributeValueMemberN{Value: strconv.FormatInt(next, 10)},
			marksAtAttr:   &types.AttributeValueMemberS{Value: m.At.UTC().Format(time.RFC3339Nano)},
		},
		ExpressionAttributeNames: map[string]string{"#r": marksRevAttr},
	}
	switch t, v, _ := strings.Cut(prevRev, ":"); {
	case prevRev == "":
		in.ConditionExpression = aws.String("attribute_not_exists(#r)")
	case t == "N":
		in.ConditionExpression = aws.String("#r = :prev")
		in.ExpressionAttributeValues = map[string]types.AttributeValue{":prev": &types.AttributeValueMemberN{Value: v}}
	case t == "S" && v == "":
		// No empty string as an expression value: the empty one by its
		// type and size.
		in.ConditionExpression = aws.String("attribute_type(#r, :s) AND size(#r) = :z")
		in.ExpressionAttributeValues = map[string]types.AttributeValue{":s": &types.AttributeValueMemberS{Value: "S"}, ":z": &types.AttributeValueMemberN{Value: "0"}}
	case t == "S":
		in.ConditionExpression = aws.String("#r = :prev")
		in.ExpressionAttributeValues = map[string]types.AttributeValue{":prev": &types.AttributeValueMemberS{Value: v}}
	default: // a revision of another type
		in.ConditionExpression = aws.String("attribute_exists(#r) AND NOT attribute_type(#r, :n) AND NOT attribute_type(#r, :s)")
		in.ExpressionAttributeValues = map[string]types.AttributeValue{":n": &types.AttributeValueMemberS{Value: "N"}, ":s": &types.AttributeValueMemberS{Value: "S"}}
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

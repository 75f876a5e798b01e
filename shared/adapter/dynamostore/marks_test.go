package dynamostore_test

import (
	"context"
	"errors"
	"maps"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/dlqquarantine/dlqq/shared/adapter/dynamostore"
	"github.com/dlqquarantine/dlqq/shared/dev/embedded"
	"github.com/dlqquarantine/dlqq/shared/domain/ledger"
	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
)

// The metrics marks round-trip; a write over a revision that moved is
// refused (ErrMarksMoved), also the retry of a write that was applied and
// whose answer was lost; a malformed item is an error, not zero marks (which
// would publish every hold as new again, loud but wrong); the item is no
// record and not ledgered.
func TestMetricMarks(t *testing.T) {
	ctx := context.Background()
	table := stack.Names["QuarantineTable"]
	s := dynamostore.New(stack.Clients.DynamoDB, table)
	src := embedded.RandomName("marks")
	m, err := s.ReadMetricMarks(ctx, src)
	if err != nil || m.Rev != 0 || m.Held != 0 || len(m.Poisoned) != 0 {
		t.Fatalf("no marks yet: %+v, %v", m, err)
	}
	h := time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)
	want := quarantine.MetricMarks{Held: 3, Poisoned: map[time.Time]int64{h: 2, h.Add(-time.Hour): 0}}
	if err := s.WriteMetricMarks(ctx, src, 0, want, h); err != nil {
		t.Fatal(err)
	}
	got, err := s.ReadMetricMarks(ctx, src)
	if err != nil || got.Rev != 1 || got.Held != 3 || !maps.Equal(got.Poisoned, want.Poisoned) {
		t.Fatalf("read back %+v, %v; wrote %+v", got, err, want)
	}
	// The retry of a write applied once: refused, the marks as written.
	for _, prev := range []int64{0, 2} {
		if err := s.WriteMetricMarks(ctx, src, prev, quarantine.MetricMarks{Held: 9}, h); !errors.Is(err, quarantine.ErrMarksMoved) {
			t.Errorf("a write over revision %d, stored 1: %v, want ErrMarksMoved", prev, err)
		}
	}
	want.Held = 4
	if err := s.WriteMetricMarks(ctx, src, 1, want, h); err != nil {
		t.Fatal(err)
	}
	if got, err := s.ReadMetricMarks(ctx, src); err != nil || got.Rev != 2 || got.Held != 4 {
		t.Fatalf("second revision %+v, %v", got, err)
	}
	if ledger.Ledgered(dynamostore.MarksKey(src)) || dynamostore.IsRecordKey(dynamostore.MarksKey(src)) {
		t.Errorf("%s is ledgered or a record key", dynamostore.MarksKey(src))
	}
	for name, item := range map[string]map[string]ddbtypes.AttributeValue{
		"held not a number": {"held": &ddbtypes.AttributeValueMemberS{Value: "3"}, "rev": &ddbtypes.AttributeValueMemberN{Value: "1"}, "poisoned": &ddbtypes.AttributeValueMemberM{}},
		"negative held":     {"held": &ddbtypes.AttributeValueMemberN{Value: "-1"}, "rev": &ddbtypes.AttributeValueMemberN{Value: "1"}, "poisoned": &ddbtypes.AttributeValueMemberM{}},
		"no revision":       {"held": &ddbtypes.AttributeValueMemberN{Value: "1"}, "poisoned": &ddbtypes.AttributeValueMemberM{}},
		"no poison map":     {"held": &ddbtypes.AttributeValueMemberN{Value: "1"}, "rev": &ddbtypes.AttributeValueMemberN{Value: "1"}},
		"a bad hour": {"held": &ddbtypes.AttributeValueMemberN{Value: "1"}, "rev": &ddbtypes.AttributeValueMemberN{Value: "1"},
			"poisoned": &ddbtypes.AttributeValueMemberM{Value: map[string]ddbtypes.AttributeValue{"yesterday": &ddbtypes.AttributeValueMemberN{Value: "1"}}}},
	} {
		item[dynamostore.KeyAttr] = &ddbtypes.AttributeValueMemberS{Value: dynamostore.MarksKey(src)}
		if _, err := stack.Clients.DynamoDB.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: item}); err != nil {
			t.Fatal(err)
		}
		if m, err := s.ReadMetricMarks(ctx, src); !errors.Is(err, quarantine.ErrMarksMalformed) {
			t.Errorf("%s: read %+v, %v; want ErrMarksMalformed", name, m, err)
		}
	}
	// Malformed marks are written over at the revision they read with (0
	// when it does not read), and only then.
	for _, rev := range []ddbtypes.AttributeValue{&ddbtypes.AttributeValueMemberS{Value: "7"}, &ddbtypes.AttributeValueMemberN{Value: "7"}} {
		if _, err := stack.Clients.DynamoDB.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: map[string]ddbtypes.AttributeValue{
			dynamostore.KeyAttr: &ddbtypes.AttributeValueMemberS{Value: dynamostore.MarksKey(src)}, "rev": rev}}); err != nil {
			t.Fatal(err)
		}
		m, err := s.ReadMetricMarks(ctx, src)
		if !errors.Is(err, quarantine.ErrMarksMalformed) {
			t.Fatalf("rev %v: %v", rev, err)
		}
		if other := 7 - m.Rev; s.WriteMetricMarks(ctx, src, other, want, h) == nil {
			t.Errorf("rev %v: written over at revision %d", rev, other)
		}
		if err := s.WriteMetricMarks(ctx, src, m.Rev, want, h); err != nil {
			t.Errorf("rev %v: not written over at the revision read (%d): %v", rev, m.Rev, err)
		}
	}
}

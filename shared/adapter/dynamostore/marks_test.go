package dynamostore_test

import (
	"context"
	"errors"
	"maps"
	"slices"
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

// The metrics marks round-trip with only their own attributes; a write
// over a revision that moved is refused (ErrMarksMoved), also the retry of
// a write that was applied and whose answer was lost; the item is no
// record and not ledgered.
func TestMetricMarks(t *testing.T) {
	ctx := context.Background()
	table := stack.Names["QuarantineTable"]
	s := dynamostore.New(stack.Clients.DynamoDB, table)
	src := embedded.RandomName("marks")
	m, err := s.ReadMetricMarks(ctx, src)
	if err != nil || m.Rev != "" || m.Held != 0 || len(m.Poisoned) != 0 || !m.At.IsZero() {
		t.Fatalf("no marks yet: %+v, %v", m, err)
	}
	h := time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)
	want := quarantine.MetricMarks{Held: 3, Poisoned: map[time.Time]int64{h: 2, h.Add(-time.Hour): 0}, At: h.Add(90 * time.Second)}
	if err := s.WriteMetricMarks(ctx, src, "", want); err != nil {
		t.Fatal(err)
	}
	got, err := s.ReadMetricMarks(ctx, src)
	if err != nil || got.Rev == "" || got.Held != 3 || !maps.Equal(got.Poisoned, want.Poisoned) || !got.At.Equal(want.At) {
		t.Fatalf("read back %+v, %v; wrote %+v", got, err, want)
	}
	out, err := stack.Clients.DynamoDB.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), Key: map[string]ddbtypes.AttributeValue{dynamostore.KeyAttr: &ddbtypes.AttributeValueMemberS{Value: dynamostore.MarksKey(src)}}})
	if err != nil {
		t.Fatal(err)
	}
	for name := range out.Item {
		if !slices.Contains(dynamostore.MarksAttributes, name) {
			t.Errorf("the marks item has %s, not among MarksAttributes %v (the metrics role may write those only)", name, dynamostore.MarksAttributes)
		}
	}
	// The retry of a write applied once: refused, the marks as written.
	for _, prev := range []string{"", "N:2", "S:" + got.Rev} {
		if err := s.WriteMetricMarks(ctx, src, prev, quarantine.MetricMarks{Held: 9}); !errors.Is(err, quarantine.ErrMarksMoved) {
			t.Errorf("a write over revision %q, stored %q: %v, want ErrMarksMoved", prev, got.Rev, err)
		}
	}
	want.Held = 4
	if err := s.WriteMetricMarks(ctx, src, got.Rev, want); err != nil {
		t.Fatal(err)
	}
	if again, err := s.ReadMetricMarks(ctx, src); err != nil || again.Rev == got.Rev || again.Held != 4 {
		t.Fatalf("second revision %+v, %v (first %q)", again, err, got.Rev)
	}
	// A count below 0 is a count: a mark follows its counter down, also
	// one written behind the ledger below 0, and reads back.
	below := quarantine.MetricMarks{Held: -5, Poisoned: map[time.Time]int64{h: -1}, At: h}
	if err := s.WriteMetricMarks(ctx, src, "N:2", below); err != nil {
		t.Fatal(err)
	}
	if m, err := s.ReadMetricMarks(ctx, src); err != nil || m.Held != -5 || m.Poisoned[h] != -1 {
		t.Errorf("marks below 0: %+v, %v", m, err)
	}
	if ledger.Ledgered(dynamostore.MarksKey(src)) || dynamostore.IsRecordKey(dynamostore.MarksKey(src)) {
		t.Errorf("%s is ledgered or a record key", dynamostore.MarksKey(src))
	}
}

// Marks that do not read are ErrMarksMalformed, not zero marks (which
// would publish every hold as new again, loud but wrong, forever): and
// they are written over at the revision they read with, whatever it
// holds (a number that is no revision, a string, another type, none), and
// only at that revision.
func TestMalformedMetricMarksAreWrittenOver(t *testing.T) {
	ctx := context.Background()
	table := stack.Names["QuarantineTable"]
	s := dynamostore.New(stack.Clients.DynamoDB, table)
	n := func(v string) ddbtypes.AttributeValue { return &ddbtypes.AttributeValueMemberN{Value: v} }
	str := func(v string) ddbtypes.AttributeValue { return &ddbtypes.AttributeValueMemberS{Value: v} }
	good := func() map[string]ddbtypes.AttributeValue {
		return map[string]ddbtypes.AttributeValue{"held": n("1"), "rev": n("3"), "at": str("2026-12-07T10:00:00Z"),
			"poisoned": &ddbtypes.AttributeValueMemberM{Value: map[string]ddbtypes.AttributeValue{"2026-12-07T10:00": n("1")}}}
	}
	with := func(name string, v ddbtypes.AttributeValue) map[string]ddbtypes.AttributeValue {
		it := good()
		if v == nil {
			delete(it, name)
		} else {
			it[name] = v
		}
		return it
	}
	for name, item := range map[string]map[string]ddbtypes.AttributeValue{
		"held not a number": with("held", str("3")),
		"held not whole":    with("held", n("1.5")),
		"no revision":       with("rev", nil),
		"revision 0":        with("rev", n("0")),
		"revision -1":       with("rev", n("-1")),
		"revision 1.5":      with("rev", n("1.5")),
		"revision too big":  with("rev", n("99999999999999999999")),
		"largest revision":  with("rev", n("9223372036854775807")),
		"revision a string": with("rev", str("3")),
		"revision empty":    with("rev", str("")),
		"revision a bool":   with("rev", &ddbtypes.AttributeValueMemberBOOL{Value: true}),
		"no poison map":     with("poisoned", nil),
		"a bad hour":        with("poisoned", &ddbtypes.AttributeValueMemberM{Value: map[string]ddbtypes.AttributeValue{"yesterday": n("1")}}),
		"no time":           with("at", nil),
		"a bad time":        with("at", str("noon")),
	} {
		src := embedded.RandomName("marks")
		item[dynamostore.KeyAttr] = str(dynamostore.MarksKey(src))
		if _, err := stack.Clients.DynamoDB.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: item}); err != nil {
			t.Fatal(err)
		}
		m, err := s.ReadMetricMarks(ctx, src)
		if !errors.Is(err, quarantine.ErrMarksMalformed) {
			t.Errorf("%s: read %+v, %v; want ErrMarksMalformed", name, m, err)
			continue
		}
		for _, other := range []string{"", "N:3", "N:0", "S:x", "S:", "X"} {
			if other != m.Rev && s.WriteMetricMarks(ctx, src, other, quarantine.MetricMarks{Held: 7}) == nil {
				t.Errorf("%s: written over at revision %q, read %q", name, other, m.Rev)
			}
		}
		if err := s.WriteMetricMarks(ctx, src, m.Rev, quarantine.MetricMarks{Held: 2, At: time.Now()}); err != nil {
			t.Errorf("%s: not written over at the revision read (%q): %v", name, m.Rev, err)
			continue
		}
		if m, err := s.ReadMetricMarks(ctx, src); err != nil || m.Held != 2 {
			t.Errorf("%s: after the write over: %+v, %v", name, m, err)
		}
	}
}

package dynamostore_test

import (
	"context"
	"errors"
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

// The sweeper's payload intents round-trip with only their own
// attributes, come due oldest first once older than the time asked, at
// most the limit, and are gone once dropped; one that does not read (or
// sits under another record version's key) comes back Malformed, never
// as an intent. No record listing and no ledger sees them.
func TestPayloadIntents(t *testing.T) {
	ctx := context.Background()
	table := stack.Names["QuarantineTable"]
	s := dynamostore.New(stack.Clients.DynamoDB, table)
	src := embedded.RandomName("intents")
	at := time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)
	var wrote []quarantine.PayloadIntent
	for i, key := range []string{"k1", "k2", "k3"} {
		in := testIntent(src, key, int64(4+i), at.Add(time.Duration(i)*time.Minute))
		rev, err := s.RecordPayloadIntent(ctx, in)
		if err != nil || rev == "" {
			t.Fatal(rev, err)
		}
		in.Key, in.Rev = quarantine.PayloadIntentKey(in.ID, in.Version), rev
		wrote = append(wrote, in)
	}
	mine := func(before time.Time, limit int) []quarantine.PayloadIntent {
		t.Helper()
		all, err := s.DuePayloadIntents(ctx, before, limit)
		if err != nil {
			t.Fatal(err)
		}
		var out []quarantine.PayloadIntent
		for _, in := range all {
			if in.Source == src || in.Malformed != "" {
				out = append(out, in)
			}
		}
		return out
	}
	got := mine(at.Add(2*time.Minute), 10)
	if len(got) != 2 || got[0].Key != wrote[0].Key || got[1].Key != wrote[1].Key {
		t.Fatalf("due before the third: %+v, want the first two, oldest first", got)
	}
	if !got[0].At.Equal(wrote[0].At.Time) || got[0].Archive != wrote[0].Archive || !slices.Equal(got[0].Refs, wrote[0].Refs) || got[0].Version != 4 || got[0].Rev != wrote[0].Rev {
		t.Fatalf("read back %+v, wrote %+v", got[0], wrote[0])
	}
	if got := mine(at.Add(time.Hour), 1); len(got) != 1 || got[0].Key != wrote[0].Key {
		t.Fatalf("limit 1: %+v", got)
	}
	for name := range rawItem(t, table, wrote[0].Key) {
		if !slices.Contains(dynamostore.PayloadIntentAttributes, name) {
			t.Errorf("the intent item has %s, not among PayloadIntentAttributes %v", name, dynamostore.PayloadIntentAttributes)
		}
	}
	if ledger.Ledgered(wrote[0].Key) || dynamostore.IsRecordKey(wrote[0].Key) {
		t.Errorf("%s is ledgered or a record key", wrote[0].Key)
	}
	// Replaced at the revision read (narrowed to what is left): replaced,
	// not added; at a revision no longer stored (another run recorded the
	// same version's intent since): refused, and so is the drop.
	narrowed := wrote[1]
	narrowed.Refs = []quarantine.ObjectRef{{Bucket: "payloads", Key: "attributes/" + src + "/x/k2", SHA256: "01", Size: 1}}
	rev, err := s.ReplacePayloadIntent(ctx, narrowed)
	if err != nil {
		t.Fatal(err)
	}
	if got := mine(at.Add(time.Hour), 10); len(got) != 3 || !slices.Equal(got[1].Refs, narrowed.Refs) || got[1].Rev != rev {
		t.Fatalf("after narrowing: %+v", got)
	}
	if _, err := s.ReplacePayloadIntent(ctx, narrowed); !errors.Is(err, quarantine.ErrIntentMoved) {
		t.Fatalf("a replace at a revision replaced since: %v", err)
	}
	if err := s.DropPayloadIntent(ctx, wrote[1]); !errors.Is(err, quarantine.ErrIntentMoved) {
		t.Fatalf("a drop at a revision replaced since: %v", err)
	}
	// Postponed past the time asked (the index may still say otherwise):
	// not due.
	later := wrote[2]
	later.At = quarantine.At(at.Add(time.Hour))
	if wrote[2].Rev, err = s.ReplacePayloadIntent(ctx, later); err != nil {
		t.Fatal(err)
	}
	if got := mine(at.Add(30*time.Minute), 10); len(got) != 2 {
		t.Fatalf("due before the postponed one's time: %+v", got)
	}
	wrote[1].Rev = rev
	for _, in := range wrote[:2] {
		if err := s.DropPayloadIntent(ctx, in); err != nil {
			t.Fatal(err)
		}
	}
	if got := mine(at.Add(2*time.Hour), 10); len(got) != 1 || got[0].Key != wrote[2].Key {
		t.Fatalf("after dropping two: %+v", got)
	}
	if err := s.DropPayloadIntent(ctx, wrote[2]); err != nil {
		t.Fatal(err)
	}
	// Items under the intents' keys that are no intent of theirs.
	raw := func(key, intent string) {
		item := map[string]ddbtypes.AttributeValue{
			dynamostore.KeyAttr: &ddbtypes.AttributeValueMemberS{Value: key},
			"status":            &ddbtypes.AttributeValueMemberS{Value: dynamostore.PayloadIntentPartition},
			"status_key":        &ddbtypes.AttributeValueMemberS{Value: dynamostore.PayloadIntentPartition},
			"first_seen":        &ddbtypes.AttributeValueMemberS{Value: quarantine.At(at.Add(-time.Hour)).String()},
		}
		if intent != "" {
			item["intent"] = &ddbtypes.AttributeValueMemberS{Value: intent}
		}
		if _, err := stack.Clients.DynamoDB.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: item}); err != nil {
			t.Fatal(err)
		}
	}
	other := quarantine.PayloadIntentKey(quarantine.RecordID(src, "k9"), 2)
	bad := map[string]string{
		quarantine.PayloadIntentKey(quarantine.RecordID(src, "m1"), 1): "",
		quarantine.PayloadIntentKey(quarantine.RecordID(src, "m2"), 1): "{not json",
		quarantine.PayloadIntentKey(quarantine.RecordID(src, "m3"), 1): `{"id":"` + quarantine.RecordID(src, "m3") + `","version":1,"archive":{"bucket":"a","key":"k"},"refs":[]}`,
		quarantine.PayloadIntentKey(quarantine.RecordID(src, "m4"), 1): `{"id":"` + quarantine.RecordID(src, "m4") + `","version":1,"archive":{"bucket":"","key":""},"refs":[{"bucket":"p","key":"k"}]}`,
		other: `{"id":"` + quarantine.RecordID(src, "k1") + `","version":4,"archive":{"bucket":"a","key":"k"},"refs":[{"bucket":"p","key":"k"}]}`,
	}
	for key, intent := range bad {
		raw(key, intent)
	}
	// A record writer's item in the partition: not read, not reported.
	raw(quarantine.RecordID(src, "posing"), `{"id":"x"}`)
	got = mine(at.Add(time.Hour), 100)
	malformed := 0
	for _, in := range got {
		if in.Malformed == "" {
			continue
		}
		if _, ok := bad[in.Key]; !ok {
			continue // another test's
		}
		malformed++
		if in.ID != "" || len(in.Refs) != 0 {
			t.Errorf("%s: malformed (%s) yet read as an intent: %+v", in.Key, in.Malformed, in)
		}
	}
	if malformed != len(bad) {
		t.Fatalf("%d of %d malformed intents reported: %+v", malformed, len(bad), got)
	}
	for _, in := range got {
		if in.Key == quarantine.RecordID(src, "posing") {
			t.Errorf("an item that is not an intent read as one: %+v", in)
		}
	}
	bad[quarantine.RecordID(src, "posing")] = ""
	for key := range bad {
		if err := s.DropPayloadIntent(ctx, quarantine.PayloadIntent{Key: key}); err != nil {
			t.Fatal(err)
		}
	}
	// No listing of records holds them.
	lister := dynamostore.NewLister(stack.Clients.DynamoDB, table)
	for _, st := range []quarantine.Status{quarantine.StatusQuarantined, quarantine.StatusParked, quarantine.StatusArchived} {
		page, err := lister.List(ctx, quarantine.ListQuery{Status: st, Source: src, Limit: 100})
		if err != nil || len(page.IDs) != 0 {
			t.Errorf("%s listing of %s: %v %v", st, src, page.IDs, err)
		}
	}
}

// laggingIndex is DynamoDB as it may answer right after an intent was
// postponed: the index still lists it as of its old time (a GSI is
// eventually consistent), and a read that is not strongly consistent
// still returns the old item. The emulator's index and reads are current
// at once.
type laggingIndex struct {
	dynamostore.API
	key string
	old map[string]ddbtypes.AttributeValue
}

func (l *laggingIndex) Query(ctx context.Context, in *dynamodb.QueryInput, opts ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	out, err := l.API.Query(ctx, in, opts...)
	if err == nil && aws.ToString(in.IndexName) != "" {
		for _, v := range in.ExpressionAttributeValues {
			if s, ok := v.(*ddbtypes.AttributeValueMemberS); ok && s.Value == dynamostore.PayloadIntentPartition {
				out.Items = append(out.Items, map[string]ddbtypes.AttributeValue{dynamostore.KeyAttr: &ddbtypes.AttributeValueMemberS{Value: l.key}})
			}
		}
	}
	return out, err
}

func (l *laggingIndex) GetItem(ctx context.Context, in *dynamodb.GetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	if k, ok := in.Key[dynamostore.KeyAttr].(*ddbtypes.AttributeValueMemberS); ok && k.Value == l.key && !aws.ToBool(in.ConsistentRead) {
		return &dynamodb.GetItemOutput{Item: l.old}, nil
	}
	return l.API.GetItem(ctx, in, opts...)
}

// An intent postponed since the index was read is not due: its time is
// read again, strongly consistent, from the item itself.
func TestAPostponedIntentIsNotDueOnAStaleIndex(t *testing.T) {
	ctx := context.Background()
	table := stack.Names["QuarantineTable"]
	s := dynamostore.New(stack.Clients.DynamoDB, table)
	src := embedded.RandomName("lag")
	at := time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)
	in := testIntent(src, "k", 2, at)
	rev, err := s.RecordPayloadIntent(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	key := quarantine.PayloadIntentKey(in.ID, in.Version)
	old := rawItem(t, table, key)
	in.Rev, in.At = rev, quarantine.At(at.Add(time.Hour))
	if _, err := s.ReplacePayloadIntent(ctx, in); err != nil {
		t.Fatal(err)
	}
	lagging := dynamostore.New(&laggingIndex{API: stack.Clients.DynamoDB, key: key, old: old}, table)
	due, err := lagging.DuePayloadIntents(ctx, at.Add(30*time.Minute), 10)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range due {
		if d.Key == key {
			t.Fatalf("postponed to %s, yet due before %s: %+v", in.At, at.Add(30*time.Minute), d)
		}
	}
	if err := s.DropPayloadIntent(ctx, quarantine.PayloadIntent{Key: key}); err != nil {
		t.Fatal(err)
	}
}

// testIntent is an intent of record key of src at version, written at at.
func testIntent(src, key string, version int64, at time.Time) quarantine.PayloadIntent {
	return quarantine.PayloadIntent{ID: quarantine.RecordID(src, key), Source: src, Version: version, At: quarantine.At(at),
		Archive: quarantine.ArchiveObject{Bucket: "archive", Key: "records/" + key, VersionID: "v1"},
		Refs:    []quarantine.ObjectRef{{Bucket: "payloads", Key: "bodies/" + src + "/x/" + key, VersionID: "p1", SHA256: "00", Size: 3}}}
}

// rawItem is the item stored under key, as DynamoDB holds it.
func rawItem(t *testing.T, table, key string) map[string]ddbtypes.AttributeValue {
	t.Helper()
	out, err := stack.Clients.DynamoDB.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: aws.String(table),
		Key: map[string]ddbtypes.AttributeValue{dynamostore.KeyAttr: &ddbtypes.AttributeValueMemberS{Value: key}}})
	if err != nil || out.Item == nil {
		t.Fatal(out, err)
	}
	return out.Item
}

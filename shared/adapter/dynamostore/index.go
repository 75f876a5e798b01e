package dynamostore

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"

	"github.com/dlqquarantine/dlqq/shared/domain/ledger"
	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
)

// The move from the status index (IndexByStatus) to the source index
// (IndexBySource). Items written before this release lack status_key, so
// the source index does not hold them: on a table that still has the
// status index, readers keep reading it until Backfill has given every
// item its status_key and written the index's state item
// (indexStateKey). A table without the status index (a stack created by
// this release, with LegacyStatusIndex=drop) has only items written with
// their status_key, and its readers read the source index from the start.
// The state item sits in both indexes' "#idx" partition; readers look for
// it in the status index's (ReadsSourceIndex), with the one Query
// permission they have. Writers write status_key from this release on,
// whichever index is read.
const (
	indexStatePartition = "#idx"
	indexStateKey       = indexStatePartition + "#" + IndexBySource
	// indexRecheck is how long a reader trusts "not yet complete".
	indexRecheck = time.Minute
)

// indexState says which index a reader lists with: IndexBySource once the
// backfill is complete or on a table without IndexByStatus (for good:
// neither goes back), IndexByStatus before. Safe for concurrent use.
type indexState struct {
	api   QueryAPI
	table string

	mu      sync.Mutex
	done    bool
	checked time.Time
}

func newIndexState(api QueryAPI, table string) *indexState {
	return &indexState{api: api, table: table}
}

// bySource reports whether listings read IndexBySource (ReadsSourceIndex).
func (s *indexState) bySource(ctx context.Context) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done || (!s.checked.IsZero() && time.Since(s.checked) < indexRecheck) {
		return s.done, nil
	}
	found, err := ReadsSourceIndex(ctx, s.api, s.table)
	if err != nil {
		return false, err
	}
	s.done, s.checked = found, time.Now()
	return s.done, nil
}

// ReadsSourceIndex reports whether table's listings read IndexBySource:
// the index state is in the status index's "#idx" partition (the backfill
// is complete), or the table has no status index (DynamoDB answers a
// Query on it with a ValidationException naming the index: a stack made
// with LegacyStatusIndex=drop, whose items all carry their status_key).
// It reads the source index only when the status index fails otherwise
// (being deleted, in step 3 of the move, when the source index has long
// been ACTIVE): on a stack moving over, the source index may still be
// backfilling (DynamoDB refuses a Query on it), and the status index is
// there and complete.
func ReadsSourceIndex(ctx context.Context, api QueryAPI, table string) (bool, error) {
	found := false
	isState := func(item map[string]types.AttributeValue) error {
		if k, ok := item[KeyAttr].(*types.AttributeValueMemberS); ok && k.Value == indexStateKey {
			found = true
		}
		return nil
	}
	err := queryIndex(ctx, api, table, IndexByStatus, statusAttr, indexStatePartition, isState)
	if noSuchIndex(err, IndexByStatus) {
		return true, nil
	}
	if err != nil {
		if err2 := queryIndex(ctx, api, table, IndexBySource, IndexKeyAttr, indexStatePartition, isState); err2 == nil && found {
			return true, nil
		}
		return false, fmt.Errorf("index state: %w", err)
	}
	return found, nil
}

// noSuchIndex reports whether err is DynamoDB's answer to a Query on an
// index the table does not have: a ValidationException "The table does not
// have the specified index: <index>".
func noSuchIndex(err error, index string) bool {
	var api smithy.APIError
	return errors.As(err, &api) && api.ErrorCode() == "ValidationException" &&
		strings.Contains(api.ErrorMessage(), "does not have the specified index") && strings.Contains(api.ErrorMessage(), index)
}

// queryPartition hands each item of one non-record partition (a source's
// counters, policies or approvals, the source markers) to each, page by
// page, from the index that listings read.
func queryPartition(ctx context.Context, api QueryAPI, table string, idx *indexState, partition string, each func(map[string]types.AttributeValue) error) error {
	index, keyAttr, err := idx.listed(ctx)
	if err != nil {
		return err
	}
	return queryIndex(ctx, api, table, index, keyAttr, partition, each)
}

// listed is the index that listings read and its partition key attribute.
func (s *indexState) listed(ctx context.Context) (index, keyAttr string, err error) {
	v3, err := s.bySource(ctx)
	switch {
	case err != nil:
		return "", "", err
	case v3:
		return IndexBySource, IndexKeyAttr, nil
	}
	return IndexByStatus, statusAttr, nil
}

// queryIndex hands each item of one partition of index (partition key
// attribute keyAttr) to each, page by page.
func queryIndex(ctx context.Context, api QueryAPI, table, index, keyAttr, partition string, each func(map[string]types.AttributeValue) error) error {
	expr, err := expression.NewBuilder().WithKeyCondition(expression.Key(keyAttr).Equal(expression.Value(partition))).Build()
	if err != nil {
		return err
	}
	p := dynamodb.NewQueryPaginator(api, &dynamodb.QueryInput{
		TableName: aws.String(table), IndexName: aws.String(index),
		KeyConditionExpression: expr.KeyCondition(), ExpressionAttributeNames: expr.Names(), ExpressionAttributeValues: expr.Values(),
	})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return err
		}
		for _, item := range page.Items {
			if err := each(item); err != nil {
				return err
			}
		}
	}
	return nil
}

// IndexKeyOf is the status_key that a ledgered item's own fields derive:
// for a record its source, status and key (RecordPartition), for a
// policy, approval or counter its status (its partition); "" for an item
// that has neither. It is the ledger.Input.IndexKey that dlqctl verify
// passes.
func IndexKeyOf(it ledger.Item) string {
	key := it.S(KeyAttr)
	if IsRecordKey(key) {
		src, st := it.S(sourceAttr), it.S(statusAttr)
		if src == "" || st == "" {
			return ""
		}
		return recordIndexKey(src, quarantine.Status(st), key)
	}
	return it.S(statusAttr)
}

// markSource writes source's marker once per Store (a conditional put that
// an existing marker refuses), before the source's first record that this
// Store creates: the cross-source listings find a source by its marker.
func (s *Store) markSource(ctx context.Context, source string, firstSeen quarantine.Time) error {
	if _, ok := s.marked.Load(source); ok {
		return nil
	}
	err := putSourceMarker(ctx, s.api, s.table, source, firstSeen)
	if err != nil {
		return fmt.Errorf("mark source %s: %w", source, err)
	}
	s.marked.Store(source, true)
	return nil
}

// putSourceMarker creates source's marker unless it exists as it should:
// a marker someone rewrote (another partition or source, which would hide
// the source from the listings across sources) is written again.
func putSourceMarker(ctx context.Context, api interface {
	PutItem(ctx context.Context, in *dynamodb.PutItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
}, table, source string, firstSeen quarantine.Time) error {
	_, err := api.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: aws.String(table),
		Item: map[string]types.AttributeValue{
			KeyAttr:       &types.AttributeValueMemberS{Value: sourceMarkerKey(source)},
			statusAttr:    &types.AttributeValueMemberS{Value: SourcePartition},
			IndexKeyAttr:  &types.AttributeValueMemberS{Value: SourcePartition},
			firstSeenAttr: &types.AttributeValueMemberS{Value: firstSeen.String()},
			sourceAttr:    &types.AttributeValueMemberS{Value: source},
		},
		ConditionExpression:      aws.String("attribute_not_exists(#k) OR #sk <> :p OR #st <> :p OR #src <> :s"),
		ExpressionAttributeNames: map[string]string{"#k": KeyAttr, "#sk": IndexKeyAttr, "#st": statusAttr, "#src": sourceAttr},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":p": &types.AttributeValueMemberS{Value: SourcePartition}, ":s": &types.AttributeValueMemberS{Value: source}},
	})
	if conditionFailed(err) {
		return nil // marked already, as it should be
	}
	return err
}

// ListSources implements quarantine.SourceLister: the sources whose
// markers the table holds, in name order. A marker counts only if its key
// is the marker of the source it names.
func (l *Lister) ListSources(ctx context.Context) ([]string, error) {
	var out []string
	err := queryPartition(ctx, l.api, l.table, l.idx, SourcePartition, func(item map[string]types.AttributeValue) error {
		k, _ := item[KeyAttr].(*types.AttributeValueMemberS)
		src, _ := item[sourceAttr].(*types.AttributeValueMemberS)
		if k != nil && src != nil && src.Value != "" && k.Value == sourceMarkerKey(src.Value) {
			out = append(out, src.Value)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list sources: %w", err)
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// BackfillAPI is the part of the DynamoDB client Backfill uses.
type BackfillAPI interface {
	DescribeTable(ctx context.Context, in *dynamodb.DescribeTableInput, opts ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error)
	Scan(ctx context.Context, in *dynamodb.ScanInput, opts ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error)
	UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
	PutItem(ctx context.Context, in *dynamodb.PutItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
}

// BackfillReport is what one Backfill did.
type BackfillReport struct {
	// Scanned counts the items read, Updated the items given their
	// status_key, Skipped the items changed under the backfill (a newer
	// version carries its own status_key; a later pass reads it again).
	Scanned, Updated, Skipped int
	// Sources are the sources whose markers the backfill wrote (or found).
	Sources []string
	// Passes counts the full scans; Complete says the last pass found
	// every item with its status_key and the index state was written.
	Passes   int
	Complete bool
}

// maxBackfillPasses bounds the scans of one Backfill.
const maxBackfillPasses = 5

// Backfill gives every item of table that has a status (records,
// counters, policies, approvals) the status_key its fields derive, and
// every source with records its marker, then writes the index state that
// moves the readers to IndexBySource. It scans until a full pass finds
// nothing to do (at most maxBackfillPasses). Each item is one UpdateItem
// that only adds status_key, on the condition that the item still has the
// version, status and source it was read with and no status_key: a record
// keeps its version, its seal and its writer proof, and the ledger takes
// the change as the one same-version change besides an integrity hold
// (ledger.Input.IndexKey). Run it after every function runs this release
// (an older function writes items without status_key). It is safe to run
// again and to interrupt.
func Backfill(ctx context.Context, api BackfillAPI, table string) (BackfillReport, error) {
	var rep BackfillReport
	// CloudFormation completes the update that adds the source index while
	// DynamoDB still builds it; the state moves every reader to it, so it
	// is written only once the index answers queries.
	d, err := api.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)})
	if err != nil {
		return rep, fmt.Errorf("describe %s: %w", table, err)
	}
	if err := sourceIndexReady(d.Table); err != nil {
		return rep, err
	}
	sources := map[string]bool{}
	clean := false
	for !clean && rep.Passes < maxBackfillPasses {
		rep.Passes++
		clean = true
		in := &dynamodb.ScanInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true)}
		for {
			out, err := api.Scan(ctx, in)
			if err != nil {
				return rep, fmt.Errorf("scan %s: %w", table, err)
			}
			for _, item := range out.Items {
				rep.Scanned++
				did, err := backfillItem(ctx, api, table, item, sources)
				if err != nil {
					return rep, err
				}
				switch did {
				case backfilled:
					rep.Updated++
				case changedUnder:
					rep.Skipped++
				}
				clean = clean && did == nothingToDo
			}
			if len(out.LastEvaluatedKey) == 0 {
				break
			}
			in.ExclusiveStartKey = out.LastEvaluatedKey
		}
	}
	rep.Sources = slices.Sorted(maps.Keys(sources))
	if !clean {
		return rep, nil // the last pass still found items to do: not complete
	}
	_, err = api.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: aws.String(table),
		Item: map[string]types.AttributeValue{
			KeyAttr:       &types.AttributeValueMemberS{Value: indexStateKey},
			statusAttr:    &types.AttributeValueMemberS{Value: indexStatePartition},
			IndexKeyAttr:  &types.AttributeValueMemberS{Value: indexStatePartition},
			firstSeenAttr: &types.AttributeValueMemberS{Value: quarantine.At(time.Now()).String()},
		},
	})
	if err != nil {
		return rep, fmt.Errorf("write the index state: %w", err)
	}
	rep.Complete = true
	return rep, nil
}

// sourceIndexReady says why t's source index cannot be read yet: missing,
// or not ACTIVE (CREATING: DynamoDB refuses queries on an index it is
// still backfilling).
func sourceIndexReady(t *types.TableDescription) error {
	if t != nil {
		for _, g := range t.GlobalSecondaryIndexes {
			if aws.ToString(g.IndexName) != IndexBySource {
				continue
			}
			if g.IndexStatus != "" && g.IndexStatus != types.IndexStatusActive {
				return fmt.Errorf("index %s is %s: run the backfill again once it is ACTIVE (aws dynamodb describe-table)", IndexBySource, g.IndexStatus)
			}
			return nil
		}
	}
	return fmt.Errorf("the table has no index %s: deploy this release first", IndexBySource)
}

// What backfillItem did with an item.
type backfillOutcome int

const (
	nothingToDo  backfillOutcome = iota
	backfilled                   // given its status_key
	changedUnder                 // changed since the scan: the next pass reads it again
)

// backfillItem gives one scanned item its status_key (and its source its
// marker).
func backfillItem(ctx context.Context, api BackfillAPI, table string, item map[string]types.AttributeValue, sources map[string]bool) (backfillOutcome, error) {
	str := func(name string) string {
		v, _ := item[name].(*types.AttributeValueMemberS)
		if v == nil {
			return ""
		}
		return v.Value
	}
	key, status, source := str(KeyAttr), str(statusAttr), str(sourceAttr)
	if IsRecordKey(key) && source != "" && !sources[source] {
		var first quarantine.Time
		_ = first.UnmarshalText([]byte(str(firstSeenAttr)))
		if err := putSourceMarker(ctx, api, table, source, first); err != nil {
			return nothingToDo, fmt.Errorf("mark source %s: %w", source, err)
		}
		sources[source] = true
	}
	if item[IndexKeyAttr] != nil || status == "" || strings.HasPrefix(key, LedgerKeyPrefix) {
		return nothingToDo, nil
	}
	want := IndexKeyOf(ledgerKeyFields(item))
	if want == "" {
		return nothingToDo, nil
	}
	cond := expression.AttributeNotExists(expression.Name(IndexKeyAttr)).
		And(expression.Name(statusAttr).Equal(expression.Value(status)))
	if v, ok := item[VersionAttr].(*types.AttributeValueMemberN); ok {
		cond = cond.And(expression.Name(VersionAttr).Equal(expression.Value(&types.AttributeValueMemberN{Value: v.Value})))
	} else {
		cond = cond.And(expression.AttributeNotExists(expression.Name(VersionAttr)))
	}
	if source != "" {
		cond = cond.And(expression.Name(sourceAttr).Equal(expression.Value(source)))
	}
	expr, err := expression.NewBuilder().WithCondition(cond).
		WithUpdate(expression.Set(expression.Name(IndexKeyAttr), expression.Value(want))).Build()
	if err != nil {
		return nothingToDo, fmt.Errorf("build backfill: %w", err)
	}
	_, err = api.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(table), Key: itemKey(key),
		// One line: kumo drops the clauses after a newline (docs/emulators.md).
		UpdateExpression: aws.String(strings.ReplaceAll(aws.ToString(expr.Update()), "\n", " ")), ConditionExpression: expr.Condition(),
		ExpressionAttributeNames: expr.Names(), ExpressionAttributeValues: expr.Values(),
	})
	switch {
	case conditionFailed(err):
		return changedUnder, nil
	case err != nil:
		return nothingToDo, fmt.Errorf("backfill %s: %w", key, err)
	}
	return backfilled, nil
}

// ledgerKeyFields is the part of an item IndexKeyOf reads, as a ledger
// item.
func ledgerKeyFields(item map[string]types.AttributeValue) ledger.Item {
	it := ledger.Item{}
	for _, name := range []string{KeyAttr, sourceAttr, statusAttr} {
		if v, ok := item[name].(*types.AttributeValueMemberS); ok {
			s := v.Value
			it[name] = ledger.Value{S: &s}
		}
	}
	return it
}

// IndexKeyFrom is ledger.Input.IndexKeyFrom for a table whose items
// (a full scan) are items and whose listings read the source index when
// bySource (ReadsSourceIndex, asked before the scan): the index state's
// time (when the backfill completed; not after the scan's start, scanAt,
// whatever the unsealed item says), the zero time on a table without the
// status index (its items always had their keys), nil while the listings
// read the status index.
func IndexKeyFrom(items []ledger.Item, bySource bool, scanAt time.Time) *time.Time {
	if !bySource {
		return nil
	}
	at, _ := IndexStateSince(items)
	if at.After(scanAt) {
		at = scanAt
	}
	return &at
}

// IndexStateSince is when the index state among items (a scan, or an
// export) says the backfill completed, and whether it is there (the zero
// time when its time does not parse).
func IndexStateSince(items []ledger.Item) (time.Time, bool) {
	for _, it := range items {
		if it.S(KeyAttr) == indexStateKey {
			var t quarantine.Time
			if t.UnmarshalText([]byte(it.S(firstSeenAttr))) != nil {
				return time.Time{}, true
			}
			return t.Time, true
		}
	}
	return time.Time{}, false
}

// IndexProblem is a record the source index's listings miss.
type IndexProblem struct{ ID, What string }

// IndexCheck names each record among a table's items (a full scan) that
// the source index's listings would miss once they read it (bySource,
// ReadsSourceIndex asked before the scan began: a backfill completing
// during the scan would otherwise make the items it had not reached yet
// look missed; before that, listings read the status index and nothing is
// named): one without status_key (written by an older function after the
// backfill, or by someone with write access), one whose status_key is not
// the one its fields derive, and one whose source has no marker as ingest
// writes it (listings across sources, the sweeper's, would not reach it);
// and each marker someone rewrote. dlqctl verify reports them.
func IndexCheck(items []map[string]types.AttributeValue, bySource bool) []IndexProblem {
	c := NewIndexChecker(bySource)
	for _, item := range items {
		c.Add(item)
	}
	return c.Problems()
}

// IndexChecker is IndexCheck one item at a time, for a scan that does not
// keep its items: it keeps the problems, the sources marked, and the first
// record of each source.
type IndexChecker struct {
	complete bool
	marked   map[string]bool
	// first is each source's first record, in scan order (named when the
	// source has no marker); recs are the records' own problems.
	first   map[string]string
	sources []string
	markers []IndexProblem
	recs    []IndexProblem
}

// NewIndexChecker starts an IndexCheck (bySource as IndexCheck's).
func NewIndexChecker(bySource bool) *IndexChecker {
	return &IndexChecker{complete: bySource, marked: map[string]bool{}, first: map[string]string{}}
}

// Add checks one item of the scan.
func (c *IndexChecker) Add(item map[string]types.AttributeValue) {
	str := func(name string) string {
		v, _ := item[name].(*types.AttributeValueMemberS)
		if v == nil {
			return ""
		}
		return v.Value
	}
	switch k := str(KeyAttr); {
	case strings.HasPrefix(k, sourceMarkerPrefix):
		if k == sourceMarkerKey(str(sourceAttr)) && str(IndexKeyAttr) == SourcePartition && str(statusAttr) == SourcePartition {
			c.marked[str(sourceAttr)] = true
			return
		}
		c.markers = append(c.markers, IndexProblem{k, fmt.Sprintf("a source marker rewritten (source %q, status_key %q): the listings across sources do not find its source (ingest writes it again at its next cold start)", str(sourceAttr), str(IndexKeyAttr))})
	case c.complete && IsRecordKey(k):
		got, want := str(IndexKeyAttr), IndexKeyOf(ledgerKeyFields(item))
		switch {
		case got == "":
			c.recs = append(c.recs, IndexProblem{k, "no status_key: the source index does not list it (written by a function older than the index? run dlqctl index backfill)"})
		case got != want:
			c.recs = append(c.recs, IndexProblem{k, fmt.Sprintf("status_key %q, its fields derive %q: its source's listings do not find it", got, want)})
		}
		if src := str(sourceAttr); src != "" {
			if _, seen := c.first[src]; !seen {
				c.first[src] = k
				c.sources = append(c.sources, src)
			}
		}
	}
}

// Problems are what the items added so far show: the markers rewritten,
// then the records the listings miss, and, once a source, a record whose
// source has no marker.
func (c *IndexChecker) Problems() []IndexProblem {
	if !c.complete {
		return nil
	}
	out := append(append([]IndexProblem(nil), c.markers...), c.recs...)
	for _, src := range c.sources {
		if !c.marked[src] {
			id := c.first[src]
			out = append(out, IndexProblem{id, fmt.Sprintf("source %s has no marker (%s): listings across sources do not reach it (run dlqctl index backfill)", src, sourceMarkerKey(src))})
		}
	}
	return out
}

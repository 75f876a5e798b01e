package capacity

import (
	"context"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/smithy-go/middleware"

	"github.com/dlqquarantine/dlqq/shared/adapter/dynamostore"
)

// ReadUnits is one read of size bytes: one unit per 4 KB, rounded up, at
// least one; half of that when eventually consistent
// (read-write-operations.html, "Capacity unit consumption for read
// operations").
func ReadUnits(size int, consistent bool) float64 {
	u := float64(max(1, (size+4095)/4096))
	if !consistent {
		u /= 2
	}
	return u
}

// Reads is a middleware for DynamoDB clients (aws.Config.APIOptions) that
// prices every read by DynamoDB's rules, from what it returned: GetItem
// and each item of BatchGetItem on its own (a key not found still costs
// the minimum), a Query or Scan on the sum of the items it read, rounded
// up once. A projection does not make a read cheaper: an item read of the
// table with a ProjectionExpression is priced on the whole item, read
// again through Full (a client the meter does not wrap) by its key (Keys,
// the table's key attributes); an index entry is priced on what the index
// holds. A Query or Scan that filtered items out read them too: those are
// priced at the mean size of the items the meter has seen (ScannedCount),
// an estimate, since their size is not returned. Index reads are
// eventually consistent.
type Reads struct {
	Full  ItemReader
	Keys  []string
	mu    sync.Mutex
	units float64
	// seen and seenBytes are the items priced so far, for the mean size.
	seen, seenBytes int
}

// Units returns the read units priced so far.
func (r *Reads) Units() float64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.units
}

// APIOption adds the meter to a client's middleware stack.
func (r *Reads) APIOption(stack *middleware.Stack) error {
	return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("dlqq-capacity-reads",
		func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
			out, md, err := next.HandleInitialize(ctx, in)
			if err == nil {
				if u, ok := r.priceRead(ctx, in.Parameters, out.Result); ok {
					r.mu.Lock()
					r.units += u
					r.mu.Unlock()
				}
			}
			return out, md, err
		}), middleware.Before)
}

// priceRead is what one successful read cost (false: not a read).
func (r *Reads) priceRead(ctx context.Context, params, result any) (float64, bool) {
	switch in := params.(type) {
	case *dynamodb.GetItemInput:
		out, _ := result.(*dynamodb.GetItemOutput)
		size := 0
		if out != nil && out.Item != nil {
			size = r.size(ctx, in.TableName, nil, in.ProjectionExpression, out.Item)
		}
		return ReadUnits(size, in.ConsistentRead != nil && *in.ConsistentRead), true
	case *dynamodb.BatchGetItemInput:
		out, _ := result.(*dynamodb.BatchGetItemOutput)
		u := 0.0
		for table, keys := range in.RequestItems {
			consistent := keys.ConsistentRead != nil && *keys.ConsistentRead
			found := 0
			if out != nil {
				for _, item := range out.Responses[table] {
					u += ReadUnits(r.size(ctx, &table, nil, keys.ProjectionExpression, item), consistent)
					found++
				}
				if un, ok := out.UnprocessedKeys[table]; ok {
					found += len(un.Keys) // not read: asked again, priced then
				}
			}
			u += float64(max(len(keys.Keys)-found, 0)) * ReadUnits(0, consistent)
		}
		return u, true
	case *dynamodb.QueryInput:
		out, _ := result.(*dynamodb.QueryOutput)
		if out == nil {
			return 0, true
		}
		return r.scanned(ctx, in.TableName, in.IndexName, in.ProjectionExpression, out.Items, out.Count, out.ScannedCount, in.ConsistentRead != nil && *in.ConsistentRead), true
	case *dynamodb.ScanInput:
		out, _ := result.(*dynamodb.ScanOutput)
		if out == nil {
			return 0, true
		}
		return r.scanned(ctx, in.TableName, in.IndexName, in.ProjectionExpression, out.Items, out.Count, out.ScannedCount, in.ConsistentRead != nil && *in.ConsistentRead), true
	}
	return 0, false
}

// size is the size DynamoDB prices item at: a table read with a
// projection, the whole item (read again through Full); otherwise, what
// was returned (an index entry is what the index holds).
func (r *Reads) size(ctx context.Context, table, index, projection *string, item Item) int {
	n := dynamostore.ItemSize(item)
	key := Item{}
	for _, k := range r.Keys {
		if item[k] != nil {
			key[k] = item[k]
		}
	}
	if projection != nil && index == nil && r.Full != nil && len(key) == len(r.Keys) && len(key) > 0 {
		full, err := r.Full.GetItem(ctx, &dynamodb.GetItemInput{TableName: table, Key: key, ConsistentRead: aws.Bool(true)})
		if err == nil && full.Item != nil {
			n = dynamostore.ItemSize(full.Item)
		}
	}
	r.mu.Lock()
	r.seen++
	r.seenBytes += n
	r.mu.Unlock()
	return n
}

// scanned prices a Query or Scan page: the items returned, and those
// filtered out at the mean size of the items seen so far.
func (r *Reads) scanned(ctx context.Context, table, index, projection *string, items []Item, count, scannedCount int32, consistent bool) float64 {
	size := 0
	for _, it := range items {
		size += r.size(ctx, table, index, projection, it)
	}
	if extra := int(scannedCount) - int(count); extra > 0 {
		r.mu.Lock()
		mean := 1024
		if r.seen > 0 {
			mean = r.seenBytes / r.seen
		}
		r.mu.Unlock()
		size += extra * mean
	}
	return ReadUnits(size, consistent)
}

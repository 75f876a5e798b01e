package capacity

import (
	"context"
	"sync"

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
// up once. A Query or Scan that filtered items out read them too: those
// are priced at the size of the items it returned (ScannedCount), an
// estimate, since their size is not returned. Index reads are eventually
// consistent.
type Reads struct {
	mu    sync.Mutex
	units float64
	calls int
}

// Units returns the read units priced so far and the reads priced.
func (r *Reads) Units() (float64, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.units, r.calls
}

// APIOption adds the meter to a client's middleware stack.
func (r *Reads) APIOption(stack *middleware.Stack) error {
	return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("dlqq-capacity-reads",
		func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
			out, md, err := next.HandleInitialize(ctx, in)
			if err == nil {
				if u, ok := priceRead(in.Parameters, out.Result); ok {
					r.mu.Lock()
					r.units += u
					r.calls++
					r.mu.Unlock()
				}
			}
			return out, md, err
		}), middleware.Before)
}

// priceRead is what one successful read cost (false: not a read).
func priceRead(params, result any) (float64, bool) {
	switch in := params.(type) {
	case *dynamodb.GetItemInput:
		out, _ := result.(*dynamodb.GetItemOutput)
		size := 0
		if out != nil {
			size = dynamostore.ItemSize(out.Item)
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
					u += ReadUnits(dynamostore.ItemSize(item), consistent)
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
		return scanned(out.Items, out.Count, out.ScannedCount, in.ConsistentRead != nil && *in.ConsistentRead), true
	case *dynamodb.ScanInput:
		out, _ := result.(*dynamodb.ScanOutput)
		if out == nil {
			return 0, true
		}
		return scanned(out.Items, out.Count, out.ScannedCount, in.ConsistentRead != nil && *in.ConsistentRead), true
	}
	return 0, false
}

// scanned prices a Query or Scan page: the items returned, and those
// filtered out at the returned items' mean size.
func scanned(items []Item, count, scannedCount int32, consistent bool) float64 {
	size := 0
	for _, it := range items {
		size += dynamostore.ItemSize(it)
	}
	if extra := int(scannedCount) - int(count); extra > 0 && len(items) > 0 {
		size += extra * size / len(items)
	}
	return ReadUnits(size, consistent)
}

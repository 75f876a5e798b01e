package capacity

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go/middleware"
)

// ItemReader reads an item with a consistent read (a DynamoDB client that
// the Recorder does not wrap).
type ItemReader interface {
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
}

// Recorder is a middleware for DynamoDB clients (aws.Config.APIOptions)
// that records every item write to one table, priced by Layout.Price.
// It reads each written item before and after the write through Reader
// (a client it does not wrap) while holding a lock on the item's key, so
// that writes through recorded clients to the same item are priced one
// at a time on the images they really changed. Writes to other tables
// pass through unrecorded; an item write it cannot price (BatchWriteItem,
// PartiQL) fails, so that nothing is left out of the count.
type Recorder struct {
	Layout Layout
	Table  string
	Reader ItemReader

	locks  sync.Map // key → *sync.Mutex
	mu     sync.Mutex
	writes []Write
}

// NewRecorder records the writes to table, laid out as layout.
func NewRecorder(layout Layout, table string, reader ItemReader) *Recorder {
	return &Recorder{Layout: layout, Table: table, Reader: reader}
}

// Writes returns the writes recorded from the n-th on.
func (r *Recorder) Writes(from int) []Write {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.writes[min(from, len(r.writes)):])
}

// Len is how many writes were recorded.
func (r *Recorder) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.writes)
}

// APIOption adds the recorder to a client's middleware stack, before the
// SDK's retries: a write is recorded once, as its final outcome.
func (r *Recorder) APIOption(stack *middleware.Stack) error {
	return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("dlqq-capacity-recorder",
		func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
			var out middleware.InitializeOutput
			var md middleware.Metadata
			call := func() error {
				var err error
				out, md, err = next.HandleInitialize(ctx, in)
				return err
			}
			err := r.handle(ctx, in.Parameters, call)
			return out, md, err
		}), middleware.Before)
}

// itemWrite is one item a request writes: its key, and the new item when
// the request carries it whole (a put); del for a delete.
type itemWrite struct {
	key   Item
	put   Item
	del   bool
	check bool
	// absent: the write's condition is that the item does not exist, so
	// when it applies the item was absent, and when it fails the item is
	// there unchanged: no read before the write (none on a hot path).
	absent bool
}

// createOnly says cond is attribute_not_exists of the table's hash key.
func (r *Recorder) createOnly(cond *string, names map[string]string) bool {
	c := strings.ReplaceAll(aws.ToString(cond), " ", "")
	for k, v := range names {
		c = strings.ReplaceAll(c, k, v)
	}
	return c == "attribute_not_exists("+r.Layout.Hash+")"
}

func (r *Recorder) keyOf(item Item) Item {
	k := Item{r.Layout.Hash: item[r.Layout.Hash]}
	if r.Layout.Range != "" {
		k[r.Layout.Range] = item[r.Layout.Range]
	}
	return k
}

func (r *Recorder) handle(ctx context.Context, params any, call func() error) error {
	mine := func(table *string) bool { return aws.ToString(table) == r.Table }
	switch p := params.(type) {
	case *dynamodb.PutItemInput:
		if mine(p.TableName) {
			return r.record(ctx, []itemWrite{{key: r.keyOf(p.Item), put: p.Item, absent: r.createOnly(p.ConditionExpression, p.ExpressionAttributeNames)}}, false, call)
		}
	case *dynamodb.UpdateItemInput:
		if mine(p.TableName) {
			return r.record(ctx, []itemWrite{{key: p.Key}}, false, call)
		}
	case *dynamodb.DeleteItemInput:
		if mine(p.TableName) {
			return r.record(ctx, []itemWrite{{key: p.Key, del: true}}, false, call)
		}
	case *dynamodb.TransactWriteItemsInput:
		var ws []itemWrite
		for _, ti := range p.TransactItems {
			switch {
			case ti.Put != nil && mine(ti.Put.TableName):
				ws = append(ws, itemWrite{key: r.keyOf(ti.Put.Item), put: ti.Put.Item})
			case ti.Update != nil && mine(ti.Update.TableName):
				ws = append(ws, itemWrite{key: ti.Update.Key})
			case ti.Delete != nil && mine(ti.Delete.TableName):
				ws = append(ws, itemWrite{key: ti.Delete.Key, del: true})
			case ti.ConditionCheck != nil && mine(ti.ConditionCheck.TableName):
				// A condition check reads the item and writes nothing,
				// but is billed as a transactional write of it.
				ws = append(ws, itemWrite{key: ti.ConditionCheck.Key, check: true})
			}
		}
		if len(ws) > 0 {
			return r.record(ctx, ws, true, call)
		}
	case *dynamodb.BatchWriteItemInput, *dynamodb.ExecuteStatementInput, *dynamodb.BatchExecuteStatementInput, *dynamodb.ExecuteTransactionInput:
		return fmt.Errorf("capacity: %T is not priced by the recorder", p)
	}
	return call()
}

func (r *Recorder) lock(key string) func() {
	m, _ := r.locks.LoadOrStore(key, new(sync.Mutex))
	m.(*sync.Mutex).Lock()
	return m.(*sync.Mutex).Unlock
}

func (r *Recorder) get(ctx context.Context, key Item) (Item, error) {
	out, err := r.Reader.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(r.Table), Key: key, ConsistentRead: aws.Bool(true)})
	if err != nil {
		return nil, fmt.Errorf("capacity: read the written item: %w", err)
	}
	return out.Item, nil
}

// conditionFailed says the write was refused by its condition (it
// consumed units and changed nothing).
func conditionFailed(err error) bool {
	var ccf *ddbtypes.ConditionalCheckFailedException
	var tce *ddbtypes.TransactionCanceledException
	return errors.As(err, &ccf) || errors.As(err, &tce)
}

func (r *Recorder) record(ctx context.Context, ws []itemWrite, transactional bool, call func() error) error {
	ids := make([]string, len(ws))
	for i, w := range ws {
		ids[i], _ = keyString(w.key[r.Layout.Hash])
		if r.Layout.Range != "" {
			rk, _ := keyString(w.key[r.Layout.Range])
			ids[i] += "\x00" + rk
		}
	}
	order := slices.Clone(ids)
	slices.Sort(order)
	for _, id := range slices.Compact(order) {
		defer r.lock(id)()
	}
	olds := make([]Item, len(ws))
	for i, w := range ws {
		if w.absent {
			continue
		}
		var err error
		if olds[i], err = r.get(ctx, w.key); err != nil {
			return err
		}
	}
	err := call()
	if err != nil && !conditionFailed(err) {
		return err // not applied (throttled, refused, failed): nothing billed here
	}
	applied := err == nil
	for i, w := range ws {
		if w.absent && !applied {
			var gerr error
			if olds[i], gerr = r.get(ctx, w.key); gerr != nil {
				return errors.Join(err, gerr)
			}
		}
	}
	var priced []Write
	for i, w := range ws {
		if w.check {
			// A transaction's condition check: billed as a write of the
			// item, nothing written.
			p := r.Layout.Price(w.key, olds[i], olds[i], transactional, false)
			p[0].Kind = "check"
			priced = append(priced, p...)
			continue
		}
		var now Item
		switch {
		case !applied || w.del:
		case w.put != nil:
			now = w.put
		default:
			var gerr error
			if now, gerr = r.get(ctx, w.key); gerr != nil {
				return errors.Join(err, gerr)
			}
		}
		priced = append(priced, r.Layout.Price(w.key, olds[i], now, transactional, applied)...)
	}
	r.mu.Lock()
	r.writes = append(r.writes, priced...)
	r.mu.Unlock()
	return err
}

package storetest

import (
	"context"
	"sync"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/dlqquarantine/dlqq/shared/adapter/dynamostore"
)

// PutLog is a dynamostore.API that keeps every item put successfully, in
// order (the writer-proof tests read the versions the functions wrote).
type PutLog struct {
	dynamostore.API
	mu    sync.Mutex
	items []map[string]types.AttributeValue
}

// PutItem puts through API and keeps the item when the put succeeded.
func (p *PutLog) PutItem(ctx context.Context, in *dynamodb.PutItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	out, err := p.API.PutItem(ctx, in, opts...)
	if err == nil {
		p.mu.Lock()
		p.items = append(p.items, in.Item)
		p.mu.Unlock()
	}
	return out, err
}

// Items are the items put so far, in order.
func (p *PutLog) Items() []map[string]types.AttributeValue {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]map[string]types.AttributeValue(nil), p.items...)
}

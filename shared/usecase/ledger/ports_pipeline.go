package ledger

import (
	"context"

	dl "github.com/dlqquarantine/dlqq/shared/domain/ledger"
)

// Mappings lists the ledger function's event source mappings on its
// stream (Lambda ListEventSourceMappings with the function's name and the
// stream's ARN; lambdamapping.Mappings), every page.
type Mappings interface {
	Mappings(ctx context.Context) ([]dl.Mapping, error)
}

// CanaryItem is the canary's table item (dl.CanaryItem).
type CanaryItem = dl.CanaryItem

// Canaries reads and writes the canary item (dynamostore.Canaries). Each
// write is one change of the item, so that the stream carries it to the
// ledger.
type Canaries interface {
	// Canary reads the item, consistently (false: none yet).
	Canary(ctx context.Context) (CanaryItem, bool, error)
	// WriteCanary writes c if the item's number is still prevN (0: no
	// item yet; dl.ErrConflict otherwise).
	WriteCanary(ctx context.Context, c CanaryItem, prevN int64) error
}

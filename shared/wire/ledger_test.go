package wire

import (
	"context"
	"testing"

	"github.com/dlqquarantine/dlqq/shared/usecase/ledger"
)

func TestLedgerRefusesMissingClients(t *testing.T) {
	t.Parallel()
	if _, err := Ledger(context.Background(), ledger.FunctionConfig{}, &Clients{}, Runtime{}); err == nil {
		t.Fatal("the ledger was wired without its clients")
	}
}

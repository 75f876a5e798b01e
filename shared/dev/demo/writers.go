package demo

import (
	"context"
	"fmt"

	"github.com/dlqquarantine/dlqq/shared/adapter/dynamostore"
	"github.com/dlqquarantine/dlqq/shared/adapter/kmsmac"
	"github.com/dlqquarantine/dlqq/shared/dev/embedded"
	dl "github.com/dlqquarantine/dlqq/shared/domain/ledger"
	"github.com/dlqquarantine/dlqq/shared/domain/writerproof"
)

// writerKeyIDs are the template's writer keys' logical ids, in
// writerproof.Roles order (ingest, redrive, sweeper): the keys the
// functions' WRITER_KEY_ID name.
var writerKeyIDs = []string{"IngestWriterKey", "RedriveWriterKey", "SweeperWriterKey"}

// WriterKeyARNs are the stack's three writer keys' ARNs, in
// writerproof.Roles order (dlqctl's --writer-keys).
func WriterKeyARNs(st *embedded.Stack) ([]string, error) {
	out := make([]string, len(writerKeyIDs))
	for i, id := range writerKeyIDs {
		if out[i] = st.KeyARNs[id]; out[i] == "" {
			return nil, fmt.Errorf("the stack has no writer key %s", id)
		}
	}
	return out, nil
}

// writerCheck is the ledger's writer-proof check with the stack's keys,
// as dlqctl verify --writer-keys runs it (online: VerifyMac).
func writerCheck(ctx context.Context, st *embedded.Stack) (func(prev, next dl.Item) error, error) {
	arns, err := WriterKeyARNs(st)
	if err != nil {
		return nil, err
	}
	keys := writerproof.Keys{}
	for i, role := range writerproof.Roles {
		keys[arns[i]] = role
	}
	return dynamostore.LedgerWriterCheck(ctx, keys, kmsmac.Verifier{API: st.Clients.KMS}.Verify), nil
}

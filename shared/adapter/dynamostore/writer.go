package dynamostore

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/dlqquarantine/dlqq/shared/domain/ledger"
	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
	"github.com/dlqquarantine/dlqq/shared/domain/writerproof"
)

// WithWriter makes s prove every record version it puts with w (the
// function's role and HMAC key): the proof goes into the item written, in
// writerproof.Attr, outside the seal. It returns s.
func (s *Store) WithWriter(w *writerproof.Prover) *Store {
	s.writer = w
	return s
}

// WithWriter makes s prove every policy version it puts with w. It
// returns s.
func (s *PolicyStore) WithWriter(w *writerproof.Prover) *PolicyStore {
	s.writer = w
	return s
}

// Announce implements quarantine.Announcer: the versions a batch is about
// to write are proved with one MAC (nothing without a writer). A version
// announced and never written costs nothing more; one written without
// being announced is proved on its own.
func (s *Store) Announce(ctx context.Context, recs []*quarantine.Record) error {
	if s.writer == nil || len(recs) == 0 {
		return nil
	}
	leaves := make([]writerproof.Leaf, 0, len(recs))
	for _, r := range recs {
		if r != nil {
			leaves = append(leaves, writerproof.Leaf{Key: r.DLQID, Version: r.Version, Seal: r.Seal})
		}
	}
	return s.writer.Announce(ctx, leaves)
}

// prove adds leaf's writer proof to item (nothing when w is nil).
func prove(ctx context.Context, w *writerproof.Prover, item map[string]types.AttributeValue, leaf writerproof.Leaf) error {
	if w == nil {
		return nil
	}
	p, err := w.Prove(ctx, leaf)
	if err != nil {
		return err
	}
	item[writerproof.Attr] = &types.AttributeValueMemberS{Value: p.Encode()}
	return nil
}

// WriterRoles are the roles that may write next, the ledgered version after
// prev (nil: next is its key's first version), from the code's write
// paths: ingest creates a record (version 1) and writes its arrivals and
// comebacks (the version's newest history entry is an arrival it
// appended); the sweeper writes archive stubs (status ARCHIVED); the
// redrive function writes every other record version (claims, marks,
// settles, corrections, parks, unparks, releases) and every standing
// policy version. An integrity hold keeps the version (and its proof).
// A record version above 1 whose version before is unknown (prev nil:
// after a baseline entry) may be ingest's or redrive's unless it is a
// stub. The first role is the one a message names.
func WriterRoles(prev, next ledger.Item) ([]writerproof.Role, error) {
	key := next.S(KeyAttr)
	if isPolicyKey(key) || isApprovalKey(key) {
		return []writerproof.Role{writerproof.RoleRedrive}, nil
	}
	n, err := decodeLedgered(next)
	if err != nil {
		return nil, fmt.Errorf("it does not decode as a record: %w", err)
	}
	switch {
	case prev == nil && n.Version == 1:
		return []writerproof.Role{writerproof.RoleIngest}, nil
	case n.Status == quarantine.StatusArchived:
		return []writerproof.Role{writerproof.RoleSweeper}, nil
	case prev == nil:
		return []writerproof.Role{writerproof.RoleIngest, writerproof.RoleRedrive}, nil
	}
	p, err := decodeLedgered(prev)
	if err != nil {
		return nil, fmt.Errorf("the version before it does not decode as a record: %w", err)
	}
	if k := len(n.Attempts); k > 0 && n.Attempts[k-1].IsArrival() && n.AttemptCount > p.AttemptCount {
		return []writerproof.Role{writerproof.RoleIngest}, nil
	}
	return []writerproof.Role{writerproof.RoleRedrive}, nil
}

// leafOf is the writer-proof leaf of a ledgered record or policy item and
// its stored proof.
func leafOf(it ledger.Item) (writerproof.Leaf, string, error) {
	key := it.S(KeyAttr)
	v, ok := it.Int(VersionAttr)
	if !ok {
		return writerproof.Leaf{}, "", errors.New("the item has no version")
	}
	seal := it.S(sealAttr)
	if isPolicyKey(key) {
		p, err := decodeLedgeredPolicy(it)
		if err != nil {
			return writerproof.Leaf{}, "", err
		}
		seal = p.Seal
	}
	if isApprovalKey(key) {
		a, err := decodeLedgeredApproval(it)
		if err != nil {
			return writerproof.Leaf{}, "", err
		}
		seal = a.Seal
	}
	return writerproof.Leaf{Key: key, Version: v, Seal: seal}, it.S(writerproof.Attr), nil
}

// LedgerWriterCheck returns the ledger.Input.CheckWriter that verify
// passes: each ledgered record or policy version (prev the version before
// it, nil for its key's first) must carry a writer proof (KindWriterMissing)
// that checks under one of keys with verify (KindWriterInvalid; verify nil:
// writerproof.ErrUnverified, counted, not named), made by the role that
// may write that version (WriterRoles; KindWriterRole; a version the
// ingest key proves after another must be one Record.Arrive could make of
// it: quarantine.CheckArrival). It is safe for
// concurrent use when verify is.
func LedgerWriterCheck(ctx context.Context, keys writerproof.Keys, verify writerproof.VerifyMAC) func(prev, next ledger.Item) error {
	return func(prev, next ledger.Item) error {
		key := next.S(KeyAttr)
		if !isPolicyKey(key) && !isApprovalKey(key) && !IsRecordKey(key) {
			return nil
		}
		leaf, enc, err := leafOf(next)
		if err != nil {
			return &ledger.WriterError{Kind: ledger.KindWriterInvalid, Err: err}
		}
		role, err := writerproof.Check(ctx, keys, verify, leaf, enc)
		unverified := false
		switch {
		case errors.Is(err, writerproof.ErrMissing):
			return &ledger.WriterError{Kind: ledger.KindWriterMissing, Err: err}
		case errors.Is(err, writerproof.ErrInvalid):
			return &ledger.WriterError{Kind: ledger.KindWriterInvalid, Err: err}
		case errors.Is(err, writerproof.ErrUnverified):
			unverified = true // offline: the MAC is not checked; the role still is
		case err != nil:
			return err
		}
		want, werr := WriterRoles(prev, next)
		if werr != nil {
			return &ledger.WriterError{Kind: ledger.KindWriterRole, Err: werr}
		}
		if !slices.Contains(want, role) {
			return &ledger.WriterError{Kind: ledger.KindWriterRole, Err: fmt.Errorf("version %d is proved by the %s key; only %s writes it", leaf.Version, role, want[0])}
		}
		if role == writerproof.RoleIngest && prev != nil {
			if err := ingestArrival(prev, next); err != nil {
				return &ledger.WriterError{Kind: ledger.KindWriterRole, Err: fmt.Errorf("version %d is proved by the ingest key: %w", leaf.Version, err)}
			}
		}
		if unverified {
			return ledger.ErrWriterUnverified
		}
		return nil
	}
}

// ingestArrival checks that next, a record version the ingest key proves
// after prev, is what ingest's one transition on an existing record
// (Record.Arrive) could make of prev: the ingest key cannot sign a redrive
// function's change (un-parking a poison record, say) by adding an arrival.
func ingestArrival(prev, next ledger.Item) error {
	p, err := decodeLedgered(prev)
	if err != nil {
		return fmt.Errorf("the version before it does not decode as a record: %w", err)
	}
	n, err := decodeLedgered(next)
	if err != nil {
		return fmt.Errorf("it does not decode as a record: %w", err)
	}
	return quarantine.CheckArrival(p, n)
}

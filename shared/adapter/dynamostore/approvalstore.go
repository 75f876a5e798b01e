package dynamostore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/dlqquarantine/dlqq/shared/domain/approval"
	"github.com/dlqquarantine/dlqq/shared/domain/ledger"
	"github.com/dlqquarantine/dlqq/shared/domain/writerproof"
)

// approvalKeyPrefix starts an approval's table key; approvalAttr holds its
// sealed JSON.
const (
	approvalKeyPrefix = "#apr#"
	approvalAttr      = "approval"
)

// approvalKey is the table key of an approval.
func approvalKey(source, id string) string { return approvalKeyPrefix + source + "#" + id }

// ApprovalPartition is the status-index partition of a source's approvals.
func ApprovalPartition(source string) string { return approvalKeyPrefix + source }

// isApprovalKey reports whether id is an approval's key.
func isApprovalKey(id string) bool { return strings.HasPrefix(id, approvalKeyPrefix) }

// ApprovalStore keeps four-eyes approvals in the quarantine table, as
// PolicyStore keeps policies: one item per approval, key
// "#apr#<source>#<id>", the approval as sealed JSON, its version, and a
// writer proof when a prover is set; the status index lists a source's
// approvals under "#apr#<source>".
type ApprovalStore struct {
	api    API
	table  string
	writer *writerproof.Prover
	idx    *indexState
}

// NewApprovalStore returns an ApprovalStore on table.
func NewApprovalStore(api API, table string) *ApprovalStore {
	return &ApprovalStore{api: api, table: table, idx: newIndexState(api, table)}
}

// WithWriter makes s prove every approval version it puts with w.
func (s *ApprovalStore) WithWriter(w *writerproof.Prover) *ApprovalStore {
	s.writer = w
	return s
}

func (s *ApprovalStore) item(a *approval.Approval) (map[string]types.AttributeValue, error) {
	raw, err := json.Marshal(a)
	if err != nil {
		return nil, err
	}
	return map[string]types.AttributeValue{
		KeyAttr:       &types.AttributeValueMemberS{Value: approvalKey(a.Source, a.ID)},
		statusAttr:    &types.AttributeValueMemberS{Value: ApprovalPartition(a.Source)},
		IndexKeyAttr:  &types.AttributeValueMemberS{Value: ApprovalPartition(a.Source)},
		firstSeenAttr: &types.AttributeValueMemberS{Value: a.CreatedAt.String()},
		sourceAttr:    &types.AttributeValueMemberS{Value: a.Source},
		VersionAttr:   &types.AttributeValueMemberN{Value: strconv.FormatInt(a.Version, 10)},
		approvalAttr:  &types.AttributeValueMemberS{Value: string(raw)},
		// The newest time of the version, so that verify's grace counts a
		// change on its way to the ledger as pending.
		statusSinceAttr: &types.AttributeValueMemberS{Value: a.Changed().String()},
	}, nil
}

// Create stores a new approval; it fails with approval.ErrConflict if the
// id exists.
func (s *ApprovalStore) Create(ctx context.Context, a *approval.Approval) error {
	return s.put(ctx, a, expression.AttributeNotExists(expression.Name(KeyAttr)))
}

// Replace stores a if the stored version is still a.Version-1.
func (s *ApprovalStore) Replace(ctx context.Context, a *approval.Approval) error {
	return s.put(ctx, a, expression.Name(VersionAttr).Equal(expression.Value(a.Version-1)))
}

func (s *ApprovalStore) put(ctx context.Context, a *approval.Approval, cond expression.ConditionBuilder) error {
	item, err := s.item(a)
	if err != nil {
		return err
	}
	leaf := writerproof.Leaf{Key: approvalKey(a.Source, a.ID), Version: a.Version, Seal: a.Seal}
	err = provedPut(ctx, s.api, s.table, s.writer, item, leaf, cond, approval.ErrConflict)
	if err != nil && !errors.Is(err, approval.ErrConflict) {
		return fmt.Errorf("put approval: %w", err)
	}
	return err
}

// Get reads one approval (a consistent read) and checks its seal.
func (s *ApprovalStore) Get(ctx context.Context, source, id string) (*approval.Approval, error) {
	a, err := s.get(ctx, approvalKey(source, id))
	if err == nil && a == nil {
		return nil, approval.ErrNotFound
	}
	return a, err
}

func (s *ApprovalStore) get(ctx context.Context, k string) (*approval.Approval, error) {
	item, err := readItem(ctx, s.api, s.table, k)
	if err != nil || item == nil {
		return nil, wrapErr("read approval", err)
	}
	a, err := decodeApproval(item)
	if err != nil {
		return nil, err
	}
	if k != approvalKey(a.Source, a.ID) {
		return nil, fmt.Errorf("the item %q holds the approval %q of source %q", k, a.ID, a.Source)
	}
	return a, nil
}

func decodeApproval(item map[string]types.AttributeValue) (*approval.Approval, error) {
	v, ok := item[approvalAttr].(*types.AttributeValueMemberS)
	if !ok {
		return nil, errors.New("approval item without its approval")
	}
	var a approval.Approval
	if err := json.Unmarshal([]byte(v.Value), &a); err != nil {
		return nil, fmt.Errorf("decode approval: %w", err)
	}
	if err := a.Verify(); err != nil {
		return nil, err
	}
	if n, ok := item[VersionAttr].(*types.AttributeValueMemberN); !ok || n.Value != strconv.FormatInt(a.Version, 10) {
		return nil, fmt.Errorf("approval %s: its version attribute is not its version %d", a.ID, a.Version)
	}
	return &a, nil
}

// List returns a source's approvals, oldest first.
func (s *ApprovalStore) List(ctx context.Context, source string) ([]*approval.Approval, error) {
	return listPartition(ctx, s.api, s.table, s.idx, ApprovalPartition(source), "approvals", s.get, func(string, *approval.Approval) error { return nil })
}

// decodeLedgeredApproval decodes a ledgered approval item, its seal and
// version checked against its key.
func decodeLedgeredApproval(it ledger.Item) (*approval.Approval, error) {
	sdk, err := SDKItem(it)
	if err != nil {
		return nil, err
	}
	a, err := decodeApproval(sdk)
	if err != nil {
		return nil, err
	}
	if k := it.S(KeyAttr); k != approvalKey(a.Source, a.ID) {
		return nil, fmt.Errorf("its key %s is not the key of the approval it holds (source %q, id %q)", k, a.Source, a.ID)
	}
	return a, nil
}

func checkLedgeredApproval(prev, next ledger.Item) error {
	var p *approval.Approval
	if prev != nil {
		var err error
		if p, err = decodeLedgeredApproval(prev); err != nil {
			return fmt.Errorf("the version before it is not a sealed approval: %w", err)
		}
	}
	n, err := decodeLedgeredApproval(next)
	if err != nil {
		return fmt.Errorf("it is not a sealed approval: %w", err)
	}
	return approval.CheckTransition(p, n)
}

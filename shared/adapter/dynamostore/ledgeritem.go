package dynamostore

import (
	"fmt"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/dlqquarantine/dlqq/shared/domain/ledger"
)

// LedgerItem converts an SDK item into the ledger's canonical item.
func LedgerItem(item map[string]types.AttributeValue) (ledger.Item, error) {
	if item == nil {
		return nil, nil
	}
	out := make(ledger.Item, len(item))
	for name, av := range item {
		v, err := ledgerValue(av)
		if err != nil {
			return nil, fmt.Errorf("attribute %q: %w", name, err)
		}
		out[name] = v
	}
	return out, nil
}

func ledgerValue(av types.AttributeValue) (ledger.Value, error) {
	switch t := av.(type) {
	case *types.AttributeValueMemberS:
		return ledger.Str(t.Value), nil
	case *types.AttributeValueMemberN:
		return ledger.Num(t.Value), nil
	case *types.AttributeValueMemberB:
		return ledger.Bin(t.Value), nil
	case *types.AttributeValueMemberBOOL:
		return ledger.Bool(t.Value), nil
	case *types.AttributeValueMemberNULL:
		return ledger.Null(), nil
	case *types.AttributeValueMemberSS:
		return ledger.StrSet(t.Value...), nil
	case *types.AttributeValueMemberNS:
		return ledger.NumSet(t.Value...), nil
	case *types.AttributeValueMemberBS:
		return ledger.BinSet(t.Value...), nil
	case *types.AttributeValueMemberL:
		l := make([]ledger.Value, len(t.Value))
		for i, e := range t.Value {
			v, err := ledgerValue(e)
			if err != nil {
				return ledger.Value{}, fmt.Errorf("[%d]: %w", i, err)
			}
			l[i] = v
		}
		return ledger.List(l...), nil
	case *types.AttributeValueMemberM:
		m, err := LedgerItem(t.Value)
		if err != nil {
			return ledger.Value{}, err
		}
		return ledger.Map(m), nil
	}
	return ledger.Value{}, fmt.Errorf("unknown attribute value type %T", av)
}

// SDKItem converts a ledger item back into an SDK item (dlqctl's table
// export and the tests' tampering).
func SDKItem(it ledger.Item) (map[string]types.AttributeValue, error) {
	if it == nil {
		return nil, nil
	}
	out := make(map[string]types.AttributeValue, len(it))
	for name, v := range it {
		av, err := ledgerSDKValue(v)
		if err != nil {
			return nil, fmt.Errorf("attribute %q: %w", name, err)
		}
		out[name] = av
	}
	return out, nil
}

func ledgerSDKValue(v ledger.Value) (types.AttributeValue, error) {
	switch {
	case v.S != nil:
		return &types.AttributeValueMemberS{Value: *v.S}, nil
	case v.N != nil:
		return &types.AttributeValueMemberN{Value: *v.N}, nil
	case v.B != nil:
		return &types.AttributeValueMemberB{Value: v.B}, nil
	case v.BOOL != nil:
		return &types.AttributeValueMemberBOOL{Value: *v.BOOL}, nil
	case v.NULL:
		return &types.AttributeValueMemberNULL{Value: true}, nil
	case v.M != nil:
		m, err := SDKItem(v.M)
		if err != nil {
			return nil, err
		}
		return &types.AttributeValueMemberM{Value: m}, nil
	case v.L != nil:
		l := make([]types.AttributeValue, len(v.L))
		for i, e := range v.L {
			av, err := ledgerSDKValue(e)
			if err != nil {
				return nil, fmt.Errorf("[%d]: %w", i, err)
			}
			l[i] = av
		}
		return &types.AttributeValueMemberL{Value: l}, nil
	case v.SS != nil:
		return &types.AttributeValueMemberSS{Value: v.SS}, nil
	case v.NS != nil:
		return &types.AttributeValueMemberNS{Value: v.NS}, nil
	case v.BS != nil:
		return &types.AttributeValueMemberBS{Value: v.BS}, nil
	}
	return nil, fmt.Errorf("empty attribute value")
}

// LedgerItemFromStream converts a stream record's image (NewImage or
// OldImage) into the ledger's item: the converter the ledger service is
// wired with.
func LedgerItemFromStream(img map[string]events.DynamoDBAttributeValue) (ledger.Item, error) {
	item, err := FromStreamImage(img)
	if err != nil {
		return nil, err
	}
	return LedgerItem(item)
}

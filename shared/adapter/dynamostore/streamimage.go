package dynamostore

// TEMPORARY copy (H2 counters) until the integrator's FromStreamImage lands
// on main: same file, same signature; take main's version on merge.

import (
	"fmt"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// FromStreamImage converts a stream record's image (aws-lambda-go's
// attribute values) to the SDK's attribute values.
func FromStreamImage(img map[string]events.DynamoDBAttributeValue) (map[string]types.AttributeValue, error) {
	if img == nil {
		return nil, nil
	}
	out := make(map[string]types.AttributeValue, len(img))
	for k, v := range img {
		av, err := fromStreamValue(v)
		if err != nil {
			return nil, fmt.Errorf("attribute %q: %w", k, err)
		}
		out[k] = av
	}
	return out, nil
}

func fromStreamValue(v events.DynamoDBAttributeValue) (types.AttributeValue, error) {
	switch v.DataType() {
	case events.DataTypeString:
		return &types.AttributeValueMemberS{Value: v.String()}, nil
	case events.DataTypeNumber:
		return &types.AttributeValueMemberN{Value: v.Number()}, nil
	case events.DataTypeBinary:
		return &types.AttributeValueMemberB{Value: v.Binary()}, nil
	case events.DataTypeBoolean:
		return &types.AttributeValueMemberBOOL{Value: v.Boolean()}, nil
	case events.DataTypeNull:
		return &types.AttributeValueMemberNULL{Value: true}, nil
	case events.DataTypeStringSet:
		return &types.AttributeValueMemberSS{Value: v.StringSet()}, nil
	case events.DataTypeNumberSet:
		return &types.AttributeValueMemberNS{Value: v.NumberSet()}, nil
	case events.DataTypeBinarySet:
		return &types.AttributeValueMemberBS{Value: v.BinarySet()}, nil
	case events.DataTypeList:
		var l []types.AttributeValue
		for _, e := range v.List() {
			av, err := fromStreamValue(e)
			if err != nil {
				return nil, err
			}
			l = append(l, av)
		}
		return &types.AttributeValueMemberL{Value: l}, nil
	case events.DataTypeMap:
		m, err := FromStreamImage(v.Map())
		if err != nil {
			return nil, err
		}
		if m == nil {
			m = map[string]types.AttributeValue{}
		}
		return &types.AttributeValueMemberM{Value: m}, nil
	}
	return nil, fmt.Errorf("unsupported attribute type %d", v.DataType())
}

package localrunner

import (
	"fmt"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	streamtypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
)

// ToStreamEvent is the Lambda event record of a DynamoDB Streams record,
// as the event source mapping builds it.
func ToStreamEvent(r streamtypes.Record, streamARN string) (events.DynamoDBEventRecord, error) {
	if r.Dynamodb == nil {
		return events.DynamoDBEventRecord{}, fmt.Errorf("stream record %s has no change", aws.ToString(r.EventID))
	}
	d := r.Dynamodb
	keys, err := toEventImage(d.Keys)
	if err != nil {
		return events.DynamoDBEventRecord{}, fmt.Errorf("keys: %w", err)
	}
	newImage, err := toEventImage(d.NewImage)
	if err != nil {
		return events.DynamoDBEventRecord{}, fmt.Errorf("new image: %w", err)
	}
	oldImage, err := toEventImage(d.OldImage)
	if err != nil {
		return events.DynamoDBEventRecord{}, fmt.Errorf("old image: %w", err)
	}
	e := events.DynamoDBEventRecord{
		AWSRegion: aws.ToString(r.AwsRegion), EventID: aws.ToString(r.EventID), EventName: string(r.EventName),
		EventSource: aws.ToString(r.EventSource), EventVersion: aws.ToString(r.EventVersion), EventSourceArn: streamARN,
		Change: events.DynamoDBStreamRecord{
			Keys: keys, NewImage: newImage, OldImage: oldImage,
			SequenceNumber: aws.ToString(d.SequenceNumber), SizeBytes: aws.ToInt64(d.SizeBytes), StreamViewType: string(d.StreamViewType),
		},
	}
	if d.ApproximateCreationDateTime != nil {
		e.Change.ApproximateCreationDateTime = events.SecondsEpochTime{Time: *d.ApproximateCreationDateTime}
	}
	return e, nil
}

func toEventImage(img map[string]streamtypes.AttributeValue) (map[string]events.DynamoDBAttributeValue, error) {
	if img == nil {
		return nil, nil
	}
	out := make(map[string]events.DynamoDBAttributeValue, len(img))
	for k, v := range img {
		ev, err := toEventValue(v)
		if err != nil {
			return nil, fmt.Errorf("attribute %q: %w", k, err)
		}
		out[k] = ev
	}
	return out, nil
}

func toEventValue(v streamtypes.AttributeValue) (events.DynamoDBAttributeValue, error) {
	switch x := v.(type) {
	case *streamtypes.AttributeValueMemberS:
		return events.NewStringAttribute(x.Value), nil
	case *streamtypes.AttributeValueMemberN:
		return events.NewNumberAttribute(x.Value), nil
	case *streamtypes.AttributeValueMemberB:
		return events.NewBinaryAttribute(x.Value), nil
	case *streamtypes.AttributeValueMemberBOOL:
		return events.NewBooleanAttribute(x.Value), nil
	case *streamtypes.AttributeValueMemberNULL:
		return events.NewNullAttribute(), nil
	case *streamtypes.AttributeValueMemberSS:
		return events.NewStringSetAttribute(x.Value), nil
	case *streamtypes.AttributeValueMemberNS:
		return events.NewNumberSetAttribute(x.Value), nil
	case *streamtypes.AttributeValueMemberBS:
		return events.NewBinarySetAttribute(x.Value), nil
	case *streamtypes.AttributeValueMemberL:
		l := make([]events.DynamoDBAttributeValue, len(x.Value))
		for i, e := range x.Value {
			ev, err := toEventValue(e)
			if err != nil {
				return events.DynamoDBAttributeValue{}, fmt.Errorf("[%d]: %w", i, err)
			}
			l[i] = ev
		}
		return events.NewListAttribute(l), nil
	case *streamtypes.AttributeValueMemberM:
		m, err := toEventImage(x.Value)
		if err != nil {
			return events.DynamoDBAttributeValue{}, err
		}
		if m == nil {
			m = map[string]events.DynamoDBAttributeValue{}
		}
		return events.NewMapAttribute(m), nil
	}
	return events.DynamoDBAttributeValue{}, fmt.Errorf("unknown attribute value type %T", v)
}

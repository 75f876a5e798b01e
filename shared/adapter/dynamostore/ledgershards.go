package dynamostore

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
)

// StreamDescriber is what StreamShards needs of the DynamoDB Streams
// client.
type StreamDescriber interface {
	DescribeStream(ctx context.Context, in *dynamodbstreams.DescribeStreamInput, opts ...func(*dynamodbstreams.Options)) (*dynamodbstreams.DescribeStreamOutput, error)
}

// StreamShards lists the shards of a table's stream (the ledger's Shards
// port).
type StreamShards struct {
	API       StreamDescriber
	StreamARN string
}

// maxDescribePages bounds DescribeStream's pagination (a stream has at
// most a few thousand shards in its 24 hours).
const maxDescribePages = 10000

// Shards returns every shard of the stream, open and closed, with its
// parent shard id ("" when it has none), paging with
// ExclusiveStartShardId.
func (s StreamShards) Shards(ctx context.Context) (map[string]string, error) {
	ids := map[string]string{}
	var start *string
	for range maxDescribePages {
		out, err := s.API.DescribeStream(ctx, &dynamodbstreams.DescribeStreamInput{StreamArn: aws.String(s.StreamARN), ExclusiveStartShardId: start})
		if err != nil {
			return nil, fmt.Errorf("describe stream: %w", err)
		}
		if out.StreamDescription == nil {
			return nil, fmt.Errorf("describe stream: no description")
		}
		for _, sh := range out.StreamDescription.Shards {
			ids[aws.ToString(sh.ShardId)] = aws.ToString(sh.ParentShardId)
		}
		start = out.StreamDescription.LastEvaluatedShardId
		if start == nil {
			return ids, nil
		}
	}
	return nil, fmt.Errorf("describe stream: more than %d pages", maxDescribePages)
}

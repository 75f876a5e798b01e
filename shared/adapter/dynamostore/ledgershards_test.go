package dynamostore_test

import (
	"context"
	"slices"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	streamtypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"

	"github.com/dlqquarantine/dlqq/shared/adapter/dynamostore"
)

// pagedStreams answers DescribeStream two shards a page.
type pagedStreams []string

func (p pagedStreams) DescribeStream(_ context.Context, in *dynamodbstreams.DescribeStreamInput, _ ...func(*dynamodbstreams.Options)) (*dynamodbstreams.DescribeStreamOutput, error) {
	i := 0
	if in.ExclusiveStartShardId != nil {
		i = slices.Index(p, *in.ExclusiveStartShardId) + 1
	}
	end := min(i+2, len(p))
	d := &streamtypes.StreamDescription{}
	for _, id := range p[i:end] {
		d.Shards = append(d.Shards, streamtypes.Shard{ShardId: aws.String(id)})
	}
	if end < len(p) {
		d.LastEvaluatedShardId = aws.String(p[end-1])
	}
	return &dynamodbstreams.DescribeStreamOutput{StreamDescription: d}, nil
}

func TestStreamShardsPages(t *testing.T) {
	t.Parallel()
	want := pagedStreams{"s1", "s2", "s3", "s4", "s5"}
	got, err := dynamostore.StreamShards{API: want, StreamARN: "arn"}.Shards(context.Background())
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("Shards = %v, %v", got, err)
	}
}

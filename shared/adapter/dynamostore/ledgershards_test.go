package dynamostore_test

import (
	"context"
	"maps"
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
		sh := streamtypes.Shard{ShardId: aws.String(id)}
		if j := slices.Index(p, id); j > 0 {
			sh.ParentShardId = aws.String(p[j-1]) // each shard's parent is the one before it
		}
		d.Shards = append(d.Shards, sh)
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
	if err != nil || !maps.Equal(got, map[string]string{"s1": "", "s2": "s1", "s3": "s2", "s4": "s3", "s5": "s4"}) {
		t.Fatalf("Shards = %v, %v (every shard with its parent)", got, err)
	}
}

package s3fake_test

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/dlqquarantine/dlqq/shared/dev/s3fake"
)

// A tag-filtered rule removes only noncurrent versions carrying the tag;
// an expired-delete-marker rule removes a marker once nothing is behind it.
func TestRulesFilterByTag(t *testing.T) {
	ctx := context.Background()
	f := s3fake.New(t0, 7)
	tagged, _ := put(t, f, "tagged", "one", false)
	put(t, f, "plain", "two", false)
	if _, err := f.PutObjectTagging(ctx, &s3.PutObjectTaggingInput{Bucket: aws.String("b"), Key: aws.String("tagged"), VersionId: aws.String(tagged),
		Tagging: &types.Tagging{TagSet: []types.Tag{{Key: aws.String("k"), Value: aws.String("v")}}}}); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"tagged", "plain"} {
		if _, err := f.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String("b"), Key: aws.String(k)}); err != nil {
			t.Fatal(err)
		}
	}
	rules := []s3fake.Rule{{TagKey: "k", TagValue: "v", NoncurrentDays: 7}, {ExpiredObjectDeleteMarker: true}}
	f.Advance(6 * 24 * time.Hour)
	if n := f.ApplyRules(rules); n != 0 {
		t.Fatalf("%d removed after 6 days", n)
	}
	f.Advance(24 * time.Hour)
	if n := f.ApplyRules(rules); n != 2 { // the tagged version, then its lone marker
		t.Fatalf("%d removed after 7 days", n)
	}
	if vs := f.Versions("b", "tagged"); len(vs) != 0 {
		t.Fatalf("tagged key keeps %+v", vs)
	}
	if vs := f.Versions("b", "plain"); len(vs) != 2 || vs[0].DeleteMarker || !vs[1].DeleteMarker {
		t.Fatalf("untagged key: %+v", vs)
	}
	// A delete marker cannot be tagged.
	if _, err := f.PutObjectTagging(ctx, &s3.PutObjectTaggingInput{Bucket: aws.String("b"), Key: aws.String("plain"), Tagging: &types.Tagging{}}); err == nil {
		t.Fatal("tagged a key whose current version is a delete marker")
	}
}

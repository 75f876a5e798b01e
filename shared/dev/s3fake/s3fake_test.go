package s3fake_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/dlqquarantine/dlqq/shared/dev/s3fake"
)

var t0 = time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)

func put(t *testing.T, f *s3fake.S3, key, data string, ifNoneMatch bool) (string, error) {
	t.Helper()
	in := &s3.PutObjectInput{Bucket: aws.String("b"), Key: aws.String(key), Body: bytes.NewReader([]byte(data))}
	if ifNoneMatch {
		in.IfNoneMatch = aws.String("*")
	}
	out, err := f.PutObject(context.Background(), in)
	if err != nil {
		return "", err
	}
	return aws.ToString(out.VersionId), nil
}

func get(f *s3fake.S3, key, version string) (string, error) {
	in := &s3.GetObjectInput{Bucket: aws.String("b"), Key: aws.String(key)}
	if version != "" {
		in.VersionId = aws.String(version)
	}
	out, err := f.GetObject(context.Background(), in)
	if err != nil {
		return "", err
	}
	b, err := io.ReadAll(out.Body)
	return string(b), err
}

func TestVersionsAndConditionalCreate(t *testing.T) {
	f := s3fake.New(t0, 7)
	v1, err := put(t, f, "k", "one", true)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := put(t, f, "k", "one", true); err == nil {
		t.Fatal("If-None-Match over a current object succeeded")
	} else if c, s := s3fake.Answer(err); c != "PreconditionFailed" || s != 412 {
		t.Fatalf("conditional create over an object = %s %d", c, s)
	}
	v2, err := put(t, f, "k", "two", false)
	if err != nil || v2 == v1 {
		t.Fatalf("plain put: %s %v", v2, err)
	}
	if got, err := get(f, "k", v1); got != "one" || err != nil {
		t.Fatalf("v1 = %q %v", got, err)
	}
	if got, err := get(f, "k", ""); got != "two" || err != nil {
		t.Fatalf("current = %q %v", got, err)
	}
	if _, err := get(f, "k", "nope"); err == nil {
		t.Fatal("a missing version was read")
	} else if c, s := s3fake.Answer(err); c != "NoSuchVersion" || s != 404 {
		t.Fatalf("missing version = %s %d", c, s)
	}
	vs := f.Versions("b", "k")
	if len(vs) != 2 || vs[0].NoncurrentSince.IsZero() || !vs[1].NoncurrentSince.IsZero() {
		t.Fatalf("versions %+v", vs)
	}
}

func TestChecksumIsVerifiedAndReported(t *testing.T) {
	f := s3fake.New(t0, 7)
	ctx := context.Background()
	good := s3fake.Checksum([]byte("data"))
	if _, err := f.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("b"), Key: aws.String("k"), Body: bytes.NewReader([]byte("datA")), ChecksumSHA256: aws.String(good)}); err == nil {
		t.Fatal("a bad digest was stored")
	} else if c, s := s3fake.Answer(err); c != "BadDigest" || s != 400 {
		t.Fatalf("bad digest = %s %d", c, s)
	}
	if _, err := f.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("b"), Key: aws.String("k"), Body: bytes.NewReader([]byte("data")), ChecksumSHA256: aws.String(good)}); err != nil {
		t.Fatal(err)
	}
	h, err := f.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String("b"), Key: aws.String("k"), ChecksumMode: types.ChecksumModeEnabled})
	if err != nil || aws.ToString(h.ChecksumSHA256) != good || aws.ToInt64(h.ContentLength) != 4 {
		t.Fatalf("head %+v %v", h, err)
	}
	if h, _ := f.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String("b"), Key: aws.String("k")}); h.ChecksumSHA256 != nil {
		t.Fatal("checksum reported without ChecksumMode")
	}
}

func TestDeleteMarker(t *testing.T) {
	f := s3fake.New(t0, 7)
	ctx := context.Background()
	v1, _ := put(t, f, "k", "one", true)
	out, err := f.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String("b"), Key: aws.String("k")})
	if err != nil || !aws.ToBool(out.DeleteMarker) {
		t.Fatalf("delete %+v %v", out, err)
	}
	var nsk *types.NoSuchKey
	if _, err := get(f, "k", ""); !errors.As(err, &nsk) {
		t.Fatalf("get after delete = %v", err)
	}
	var nf *types.NotFound
	if _, err := f.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String("b"), Key: aws.String("k")}); !errors.As(err, &nf) {
		t.Fatalf("head after delete = %v", err)
	}
	if _, err := get(f, "k", aws.ToString(out.VersionId)); err == nil {
		t.Fatal("a delete marker was read")
	} else if _, s := s3fake.Answer(err); s != 405 {
		t.Fatalf("delete marker by id = %d", s)
	}
	if got, err := get(f, "k", v1); got != "one" || err != nil {
		t.Fatalf("noncurrent v1 = %q %v", got, err)
	}
	// A conditional create over a delete marker succeeds, as on S3.
	v3, err := put(t, f, "k", "three", true)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := get(f, "k", ""); got != "three" || len(f.Versions("b", "k")) != 3 || v3 == v1 {
		t.Fatalf("current %q, %d versions", got, len(f.Versions("b", "k")))
	}
}

// The rule counts from when a version became noncurrent, and never touches
// the current version.
func TestLifecycleExpiresNoncurrentVersions(t *testing.T) {
	f := s3fake.New(t0, 7)
	v1, _ := put(t, f, "k", "one", false)
	f.Advance(3 * 24 * time.Hour)
	v2, _ := put(t, f, "k", "two", false) // v1 noncurrent from day 3
	f.Advance(6 * 24 * time.Hour)
	if n := f.ApplyLifecycle(); n != 0 {
		t.Fatalf("%d expired after 6 noncurrent days", n)
	}
	if got, err := get(f, "k", v1); got != "one" || err != nil {
		t.Fatalf("v1 before expiry = %q %v", got, err)
	}
	f.Advance(24 * time.Hour)
	if n := f.ApplyLifecycle(); n != 1 {
		t.Fatalf("%d expired after 7 noncurrent days", n)
	}
	if _, err := get(f, "k", v1); err == nil {
		t.Fatal("expired v1 still read")
	} else if c, _ := s3fake.Answer(err); c != "NoSuchVersion" {
		t.Fatalf("expired v1 = %v", err)
	}
	f.Advance(365 * 24 * time.Hour)
	f.ApplyLifecycle()
	if got, err := get(f, "k", v2); got != "two" || err != nil {
		t.Fatalf("current v2 = %q %v", got, err)
	}
}

func TestFaultsBeforeAndAfterApplying(t *testing.T) {
	f := s3fake.New(t0, 7)
	lost := s3fake.Error("PutObject", 500, "InternalError", "We encountered an internal error.")
	f.SetFault(s3fake.Fault{After: func(op, key string) error { return lost }})
	if _, err := put(t, f, "k", "one", true); !errors.Is(err, lost) {
		t.Fatalf("put = %v", err)
	}
	if n := len(f.Versions("b", "k")); n != 1 {
		t.Fatalf("an applied-then-failed put left %d versions", n)
	}
	f.SetFault(s3fake.Fault{Before: func(op, key string) error { return lost }})
	if _, err := put(t, f, "k2", "one", false); !errors.Is(err, lost) || len(f.Versions("b", "k2")) != 0 {
		t.Fatalf("a put failed before applying: %v, %d versions", err, len(f.Versions("b", "k2")))
	}
	if f.Calls("PutObject") != 2 {
		t.Fatalf("%d calls", f.Calls("PutObject"))
	}
}

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

// Failing answers only the calls it names, as many times as it is told.
func TestFailingAnswersTheFirstCallsOfItsOperation(t *testing.T) {
	f := s3fake.New(t0, 7)
	f.SetFault(s3fake.Fault{Before: s3fake.Failing(2, "PutObject", 503, "SlowDown", "slow down")})
	if _, err := get(f, "k", ""); err == nil {
		t.Fatal("get of a missing key succeeded")
	} else if c, _ := s3fake.Answer(err); c != "NoSuchKey" {
		t.Fatalf("get = %s, want the fake's own answer", c)
	}
	for i := range 3 {
		_, err := put(t, f, "k", "one", false)
		if c, s := s3fake.Answer(err); i < 2 && (c != "SlowDown" || s != 503) || i == 2 && err != nil {
			t.Fatalf("put %d = %v", i+1, err)
		}
	}
	f.SetFault(s3fake.Fault{Before: s3fake.Failing(-1, "GetObject", 403, "AccessDenied", "denied")})
	for range 3 {
		if _, err := get(f, "k", ""); err == nil {
			t.Fatal("a get went through an every-call fault")
		}
	}
}

package s3store

import (
	"context"
	"fmt"
	"io"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/dlqquarantine/dlqq/shared/domain/ledger"
)

// VersionsAPI is what listing and reading every object version needs.
type VersionsAPI interface {
	ListObjectVersions(ctx context.Context, in *s3.ListObjectVersionsInput, opts ...func(*s3.Options)) (*s3.ListObjectVersionsOutput, error)
	GetObject(ctx context.Context, in *s3.GetObjectInput, opts ...func(*s3.Options)) (*s3.GetObjectOutput, error)
}

// ObjectVersions lists and reads every version of the objects in a
// bucket, delete markers included: what verify needs to see past a delete
// marker or a version written over a locked one (both hide the locked
// bytes from ListObjectsV2 and a plain GetObject).
type ObjectVersions struct {
	API    VersionsAPI
	Bucket string
	// PageSize is MaxKeys per page (0: S3's 1,000).
	PageSize int32
}

// List returns every version and every delete marker under prefix, all
// pages, in the order S3 lists them: by key, and within a key the
// versions newest first, then that key's delete markers newest first
// (the SDK answers them in two lists; LastModified orders them apart).
func (o ObjectVersions) List(ctx context.Context, prefix string) ([]ledger.ObjectVersion, error) {
	in := &s3.ListObjectVersionsInput{Bucket: aws.String(o.Bucket), Prefix: aws.String(prefix)}
	if o.PageSize > 0 {
		in.MaxKeys = aws.Int32(o.PageSize)
	}
	var out []ledger.ObjectVersion
	// An entry listed on two pages is kept once, where it was first
	// listed (versitygw repeats a key's delete markers on the next page;
	// S3 does not).
	type seen struct {
		key, version string
		marker       bool
	}
	listed := map[seen]bool{}
	add := func(v ledger.ObjectVersion) {
		if s := (seen{v.Key, v.VersionID, v.DeleteMarker}); !listed[s] {
			listed[s] = true
			out = append(out, v)
		}
	}
	for {
		page, err := o.API.ListObjectVersions(ctx, in)
		if err != nil {
			return nil, fmt.Errorf("list object versions %s: %w", prefix, err)
		}
		for _, v := range page.Versions {
			add(ledger.ObjectVersion{Key: aws.ToString(v.Key), VersionID: aws.ToString(v.VersionId),
				LastModified: aws.ToTime(v.LastModified).UTC(), Latest: aws.ToBool(v.IsLatest)})
		}
		for _, m := range page.DeleteMarkers {
			add(ledger.ObjectVersion{Key: aws.ToString(m.Key), VersionID: aws.ToString(m.VersionId),
				LastModified: aws.ToTime(m.LastModified).UTC(), Latest: aws.ToBool(m.IsLatest), DeleteMarker: true})
		}
		if !aws.ToBool(page.IsTruncated) {
			return out, nil
		}
		// A next marker that does not move on would list the same page
		// for ever (versitygw does so with MaxKeys 1).
		next, nextVersion := aws.ToString(page.NextKeyMarker), aws.ToString(page.NextVersionIdMarker)
		if next == "" || (next == aws.ToString(in.KeyMarker) && nextVersion == aws.ToString(in.VersionIdMarker)) {
			return nil, fmt.Errorf("list object versions %s: a truncated page whose next marker (%q, version %q) does not move on", prefix, next, nextVersion)
		}
		in.KeyMarker, in.VersionIdMarker = page.NextKeyMarker, page.NextVersionIdMarker
	}
}

// Get reads one version's bytes (ledger.ErrNotFound when it is absent).
func (o ObjectVersions) Get(ctx context.Context, key, versionID string) ([]byte, error) {
	out, err := o.API.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(o.Bucket), Key: aws.String(key), VersionId: optionalVersion(versionID)})
	if err != nil {
		if missing(err) {
			return nil, fmt.Errorf("get object %s version %s: %w", key, versionID, ledger.ErrNotFound)
		}
		return nil, fmt.Errorf("get object %s version %s: %w", key, versionID, err)
	}
	defer out.Body.Close()
	b, err := io.ReadAll(out.Body)
	if err != nil {
		return nil, fmt.Errorf("read object %s version %s: %w", key, versionID, err)
	}
	return b, nil
}

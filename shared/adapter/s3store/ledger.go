package s3store

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"io"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/dlqquarantine/dlqq/shared/domain/ledger"
)

// LedgerAPI is what the ledger's objects need of the S3 client.
type LedgerAPI interface {
	PutObject(ctx context.Context, in *s3.PutObjectInput, opts ...func(*s3.Options)) (*s3.PutObjectOutput, error)
	GetObject(ctx context.Context, in *s3.GetObjectInput, opts ...func(*s3.Options)) (*s3.GetObjectOutput, error)
	ListObjectsV2(ctx context.Context, in *s3.ListObjectsV2Input, opts ...func(*s3.Options)) (*s3.ListObjectsV2Output, error)
	ListObjectVersions(ctx context.Context, in *s3.ListObjectVersionsInput, opts ...func(*s3.Options)) (*s3.ListObjectVersionsOutput, error)
}

// LedgerObjects are the ledger's segment and digest objects in the Object
// Lock bucket (the ledger service's Objects port).
type LedgerObjects struct {
	API    LedgerAPI
	Bucket string
	// PageSize is List's MaxKeys per page (0: S3's 1,000).
	PageSize int32
}

// PutIfAbsent writes body under key only if the key holds no object
// (If-None-Match: *; a 412 is ledger.ErrExists), locked in COMPLIANCE mode
// until retainUntil, with a SHA-256 checksum S3 verifies. The bucket's
// default encryption applies.
func (o LedgerObjects) PutIfAbsent(ctx context.Context, key string, body []byte, retainUntil time.Time) error {
	sum := sha256.Sum256(body)
	_, err := o.API.PutObject(ctx, &s3.PutObjectInput{
		Bucket: aws.String(o.Bucket), Key: aws.String(key), Body: bytes.NewReader(body),
		ContentLength:             aws.Int64(int64(len(body))),
		ContentType:               aws.String("application/json"),
		ChecksumAlgorithm:         types.ChecksumAlgorithmSha256,
		ChecksumSHA256:            aws.String(base64.StdEncoding.EncodeToString(sum[:])),
		IfNoneMatch:               aws.String("*"),
		ObjectLockMode:            types.ObjectLockModeCompliance,
		ObjectLockRetainUntilDate: aws.Time(retainUntil),
	})
	if err == nil {
		return nil
	}
	if preconditionFailed(err) {
		return fmt.Errorf("put ledger object %s: %w", key, ledger.ErrExists)
	}
	return fmt.Errorf("put ledger object %s: %w", key, err)
}

// Get reads an object's bytes (ledger.ErrNotFound when it is absent).
func (o LedgerObjects) Get(ctx context.Context, key string) ([]byte, error) {
	out, err := o.API.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(o.Bucket), Key: aws.String(key)})
	if err != nil {
		if missing(err) {
			return nil, fmt.Errorf("get ledger object %s: %w", key, ledger.ErrNotFound)
		}
		return nil, fmt.Errorf("get ledger object %s: %w", key, err)
	}
	defer out.Body.Close()
	b, err := io.ReadAll(out.Body)
	if err != nil {
		return nil, fmt.Errorf("read ledger object %s: %w", key, err)
	}
	return b, nil
}

// List returns the keys under prefix after startAfter, in key order, all
// pages.
func (o LedgerObjects) List(ctx context.Context, prefix, startAfter string) ([]string, error) {
	in := &s3.ListObjectsV2Input{Bucket: aws.String(o.Bucket), Prefix: aws.String(prefix)}
	if startAfter != "" {
		in.StartAfter = aws.String(startAfter)
	}
	if o.PageSize > 0 {
		in.MaxKeys = aws.Int32(o.PageSize)
	}
	var keys []string
	p := s3.NewListObjectsV2Paginator(o.API, in)
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("list ledger objects %s: %w", prefix, err)
		}
		for _, obj := range page.Contents {
			keys = append(keys, aws.ToString(obj.Key))
		}
	}
	return keys, nil
}

// Versions counts the object versions of exactly key and its delete
// markers that are not older than its first version
// (ListObjectVersions with Prefix key, which also lists longer keys: they
// are skipped, and the listing stops at the first key after key, since
// keys come in order). Every page is read until then. A marker older
// than the first version (a DeleteObject of the key before the ledger's
// If-None-Match PUT, which succeeds over a marker) hides nothing: when
// the key's only version is the current one every marker is older; else
// a marker counts when it is the current entry or its LastModified is not
// before the oldest version's (a tie, within S3's second, counts).
func (o LedgerObjects) Versions(ctx context.Context, key string) (versions, deleteMarkers int, err error) {
	in := &s3.ListObjectVersionsInput{Bucket: aws.String(o.Bucket), Prefix: aws.String(key)}
	if o.PageSize > 0 {
		in.MaxKeys = aws.Int32(o.PageSize)
	}
	var first time.Time
	latestVersion := false
	type marker struct {
		at     time.Time
		latest bool
	}
	var markers []marker
	count := func() (int, int, error) {
		for _, m := range markers {
			switch {
			case versions == 1 && latestVersion:
			case versions == 0 || m.latest || !m.at.Before(first):
				deleteMarkers++
			}
		}
		return versions, deleteMarkers, nil
	}
	for {
		page, err := o.API.ListObjectVersions(ctx, in)
		if err != nil {
			return 0, 0, fmt.Errorf("list versions of ledger object %s: %w", key, err)
		}
		past := false
		for _, v := range page.Versions {
			switch k := aws.ToString(v.Key); {
			case k == key:
				at := aws.ToTime(v.LastModified)
				if versions == 0 || at.Before(first) {
					first = at
				}
				versions++
				latestVersion = latestVersion || aws.ToBool(v.IsLatest)
			case k > key:
				past = true
			}
		}
		for _, m := range page.DeleteMarkers {
			switch k := aws.ToString(m.Key); {
			case k == key:
				markers = append(markers, marker{at: aws.ToTime(m.LastModified), latest: aws.ToBool(m.IsLatest)})
			case k > key:
				past = true
			}
		}
		if past || !aws.ToBool(page.IsTruncated) {
			return count()
		}
		if page.NextKeyMarker == nil && page.NextVersionIdMarker == nil {
			return 0, 0, fmt.Errorf("list versions of ledger object %s: a truncated page without a next marker", key)
		}
		if aws.ToString(page.NextKeyMarker) == aws.ToString(in.KeyMarker) && aws.ToString(page.NextVersionIdMarker) == aws.ToString(in.VersionIdMarker) {
			return 0, 0, fmt.Errorf("list versions of ledger object %s: the listing does not advance past %q", key, aws.ToString(in.VersionIdMarker))
		}
		in.KeyMarker, in.VersionIdMarker = page.NextKeyMarker, page.NextVersionIdMarker
	}
}

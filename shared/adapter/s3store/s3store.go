// Package s3store is the S3 adapter: the archive objects in the Object Lock
// bucket (archive.go: Archiver, ReadArchive, VerifyStub), and the payload
// store (quarantine.PayloadStore), the claim check for bodies and attribute
// sets too large for a DynamoDB item. Payload objects
// are written with SSE-KMS and a SHA-256 checksum that S3 verifies on upload.
//
// Keys are content-addressed (the caller puts the SHA-256 in the key), and
// an object is written once: PutPayload is a conditional create
// (If-None-Match: *), and when the key already holds an object it verifies
// that object's SHA-256 and returns a reference to THAT version. A second
// upload would make the version a record pins noncurrent. (The payload
// bucket's lifecycle expires noncurrent versions only once DeletePayload has
// tagged them archived.)
package s3store

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
)

// API is the part of the S3 client the store uses.
type API interface {
	PutObject(ctx context.Context, in *s3.PutObjectInput, opts ...func(*s3.Options)) (*s3.PutObjectOutput, error)
	GetObject(ctx context.Context, in *s3.GetObjectInput, opts ...func(*s3.Options)) (*s3.GetObjectOutput, error)
	HeadObject(ctx context.Context, in *s3.HeadObjectInput, opts ...func(*s3.Options)) (*s3.HeadObjectOutput, error)
}

// DeleteAPI is what DeletePayload needs besides API.
type DeleteAPI interface {
	DeleteObject(ctx context.Context, in *s3.DeleteObjectInput, opts ...func(*s3.Options)) (*s3.DeleteObjectOutput, error)
	PutObjectTagging(ctx context.Context, in *s3.PutObjectTaggingInput, opts ...func(*s3.Options)) (*s3.PutObjectTaggingOutput, error)
}

// ArchivedTagKey and ArchivedTagValue mark a claim-check version whose
// record is archived. The payload bucket's lifecycle removes noncurrent
// versions only when they carry this tag (infra/template.yaml), and the
// sweeper's role may set no other.
const (
	ArchivedTagKey   = "dlqq-archived"
	ArchivedTagValue = "true"
)

// Store is a quarantine.PayloadStore on one bucket.
type Store struct {
	api      API
	bucket   string
	kmsKeyID string
	// PinnedGone, when set, is told of each GetPayload whose pinned
	// version could not be read and whose key's current version held the
	// bytes instead (dlqctl verify notes them: a version deleted by hand
	// leaves no other trace); notFound is whether S3 said 404 (else 403:
	// without s3:ListBucket S3 answers a missing version so, and so it
	// answers a read it refuses). It is called from several goroutines at
	// once.
	PinnedGone func(ref quarantine.ObjectRef, notFound bool)
}

// New returns a Store writing to bucket, encrypted with kmsKeyID (the
// bucket's default key when empty).
func New(api API, bucket, kmsKeyID string) *Store {
	return &Store{api: api, bucket: bucket, kmsKeyID: kmsKeyID}
}

var errNoCurrent = errors.New("the key has no current object after the conditional put failed")

// putAttempts bounds the conditional creates of one PutPayload: a 409
// (a concurrent conditional write) or an object deleted between the 412
// and the read of it starts again.
const putAttempts = 5

// PutPayload implements quarantine.PayloadStore. It creates the object only
// when the key holds none (If-None-Match: *). When it holds one (412, also
// the answer to the SDK's retry of a put that was applied but whose answer
// was lost), the existing current version is read, its SHA-256 verified
// against data, and the reference names that version: nothing is uploaded
// again, so no version a record pins becomes noncurrent. An existing object
// with other bytes is an error wrapping quarantine.ErrPayloadMismatch.
//
// After the sweeper's delete (a delete marker is current) S3 creates a new
// version; a store that answers 412 there (versitygw) makes this fail after
// its attempts. Neither is on a path that matters: ingest uploads nothing
// for a record that exists, and only archived records' objects are deleted.
func (s *Store) PutPayload(ctx context.Context, key string, data []byte) (quarantine.ObjectRef, error) {
	sum := sha256.Sum256(data)
	ref := quarantine.ObjectRef{Bucket: s.bucket, Key: key, SHA256: hex.EncodeToString(sum[:]), Size: int64(len(data))}
	var last error
	for attempt := range putAttempts {
		if attempt > 0 {
			if err := pause(ctx, attempt); err != nil {
				return quarantine.ObjectRef{}, fmt.Errorf("put payload %s: %w (after %w)", key, err, last)
			}
		}
		in := &s3.PutObjectInput{
			Bucket:               aws.String(s.bucket),
			Key:                  aws.String(key),
			Body:                 bytes.NewReader(data),
			ContentLength:        aws.Int64(int64(len(data))),
			ChecksumSHA256:       aws.String(base64.StdEncoding.EncodeToString(sum[:])),
			ServerSideEncryption: types.ServerSideEncryptionAwsKms,
			IfNoneMatch:          aws.String("*"),
		}
		if s.kmsKeyID != "" {
			in.SSEKMSKeyId = aws.String(s.kmsKeyID)
		}
		out, err := s.api.PutObject(ctx, in)
		switch {
		case err == nil:
			ref.VersionID = aws.ToString(out.VersionId)
			return ref, nil
		case conditionConflict(err):
			last = err
			continue
		case !preconditionFailed(err):
			return quarantine.ObjectRef{}, fmt.Errorf("put payload %s: %w", key, err)
		}
		version, err := s.existing(ctx, key, sum, int64(len(data)))
		if errors.Is(err, errNoCurrent) {
			// Deleted between the 412 and the read: create it again.
			last = err
			continue
		}
		if err != nil {
			return quarantine.ObjectRef{}, err
		}
		ref.VersionID = version
		return ref, nil
	}
	return quarantine.ObjectRef{}, fmt.Errorf("put payload %s: %d attempts: %w", key, putAttempts, last)
}

// existing reads the current version of key and verifies it holds the bytes
// whose SHA-256 is sum: from the checksum S3 verified at upload when it
// reports one for the whole object, else by reading and hashing it. The
// error wraps errNoCurrent when the key has no current object.
func (s *Store) existing(ctx context.Context, key string, sum [32]byte, size int64) (string, error) {
	head, err := s.api.HeadObject(ctx, &s3.HeadObjectInput{
		Bucket: aws.String(s.bucket), Key: aws.String(key), ChecksumMode: types.ChecksumModeEnabled,
	})
	if err != nil {
		if missing(err) {
			return "", fmt.Errorf("%w: %w", errNoCurrent, err)
		}
		return "", fmt.Errorf("read existing payload %s: %w", key, err)
	}
	version := aws.ToString(head.VersionId)
	if head.ContentLength != nil && *head.ContentLength != size {
		return "", fmt.Errorf("payload %s holds %d bytes, not the %d it is named for: %w", key, *head.ContentLength, size, quarantine.ErrPayloadMismatch)
	}
	want := base64.StdEncoding.EncodeToString(sum[:])
	if c := aws.ToString(head.ChecksumSHA256); c != "" && head.ChecksumType != types.ChecksumTypeComposite && !strings.Contains(c, "-") {
		if c != want {
			return "", fmt.Errorf("payload %s holds other bytes than it is named for: %w", key, quarantine.ErrPayloadMismatch)
		}
		return version, nil
	}
	// No full-object checksum reported: read that very version and hash it.
	in := &s3.GetObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(key)}
	if version != "" {
		in.VersionId = aws.String(version)
	}
	data, err := s.read(ctx, in)
	if err != nil {
		if missing(err) {
			return "", fmt.Errorf("%w: %w", errNoCurrent, err)
		}
		return "", fmt.Errorf("read existing payload %s: %w", key, err)
	}
	if got := sha256.Sum256(data); got != sum {
		return "", fmt.Errorf("payload %s holds other bytes than it is named for: %w", key, quarantine.ErrPayloadMismatch)
	}
	return version, nil
}

// GetPayload implements quarantine.PayloadStore. It reads the version the
// reference pins. When that version is gone (records written before
// PutPayload reused existing versions may pin one that a later upload made
// noncurrent and the lifecycle rule expired), it reads the key's current
// version instead and accepts it only if its SHA-256 equals ref.SHA256: the
// key is content-addressed, so that version holds the same bytes.
func (s *Store) GetPayload(ctx context.Context, ref quarantine.ObjectRef) ([]byte, error) {
	in := &s3.GetObjectInput{Bucket: aws.String(ref.Bucket), Key: aws.String(ref.Key)}
	if ref.VersionID != "" {
		in.VersionId = aws.String(ref.VersionID)
	}
	data, err := s.readAtMost(ctx, in, ref.Size)
	fellBack, gone := false, false
	if err != nil && ref.VersionID != "" && missing(err) {
		cur, curErr := s.readAtMost(ctx, &s3.GetObjectInput{Bucket: aws.String(ref.Bucket), Key: aws.String(ref.Key)}, ref.Size)
		if curErr != nil {
			return nil, fmt.Errorf("get payload %s: pinned version: %w; current version: %w", ref.Key, err, curErr)
		}
		data, fellBack, gone = cur, true, notFound(err)
		err = nil
	}
	if err != nil {
		return nil, fmt.Errorf("get payload %s: %w", ref.Key, err)
	}
	if quarantine.BodySHA256(data) != ref.SHA256 {
		return nil, fmt.Errorf("payload %s: %w", ref.Key, quarantine.ErrPayloadMismatch)
	}
	if fellBack && s.PinnedGone != nil {
		s.PinnedGone(ref, gone)
	}
	return data, nil
}

// maxUnsized bounds the read of an object whose reference names no size
// (every reference PutPayload makes names one; a record written by hand
// may not): no body SQS or a Lambda call carries comes near it.
const maxUnsized = maxPrealloc

// readAtMost is read of an object the reference says holds size bytes
// (0 or less: not said, read up to maxUnsized): a longer one is not read
// (whoever can write the key, or a record, could make verify, reading 16
// at once, hold gigabytes) and is a mismatch.
func (s *Store) readAtMost(ctx context.Context, in *s3.GetObjectInput, size int64) ([]byte, error) {
	if size <= 0 {
		size = maxUnsized
	}
	return s.readLimit(ctx, in, size)
}

func (s *Store) read(ctx context.Context, in *s3.GetObjectInput) ([]byte, error) {
	return s.readLimit(ctx, in, -1)
}

// readLimit reads an object whole; one longer than limit bytes (negative:
// no limit) is not read past it and is a mismatch.
func (s *Store) readLimit(ctx context.Context, in *s3.GetObjectInput, limit int64) ([]byte, error) {
	out, err := s.api.GetObject(ctx, in)
	if err != nil {
		return nil, err
	}
	defer out.Body.Close()
	body := io.Reader(out.Body)
	if limit >= 0 {
		if n := out.ContentLength; n != nil && *n > limit {
			return nil, fmt.Errorf("%s holds %d bytes, more than the %d its reference names: %w", aws.ToString(in.Key), *n, limit, quarantine.ErrPayloadMismatch)
		}
		body = io.LimitReader(body, limit+1)
	}
	data, err := readBody(body, out.ContentLength)
	switch {
	case err != nil:
		return nil, fmt.Errorf("read: %w", err)
	case limit >= 0 && int64(len(data)) > limit:
		return nil, fmt.Errorf("%s holds more than the %d bytes its reference names: %w", aws.ToString(in.Key), limit, quarantine.ErrPayloadMismatch)
	}
	return data, nil
}

// pause waits with full jitter before the next conditional put.
func pause(ctx context.Context, attempt int) error {
	return quarantine.Backoff(ctx, attempt, 20*time.Millisecond, 320*time.Millisecond)
}

// DeletePayload implements quarantine.PayloadStore; the sweeper calls it
// only after the record's ARCHIVED stub is written. It first tags the
// version the reference pins as archived (ArchivedTagKey), then deletes the
// key, not a version: in the versioned payload bucket that leaves a delete
// marker, and the bucket's lifecycle rule removes the noncurrent version
// because it carries the tag (the sweeper holds no s3:DeleteObjectVersion).
// A version without the tag is never removed, delete marker or not. When
// the tagging fails nothing is deleted. A reference to another bucket is
// refused (quarantine.ErrForeignPayload). One whose pinned version S3
// says is gone (404), with no current object under its key (404), is
// deleted already: nil (a later sweeper run repeats the deletes of an
// intent it could not drop). A 403 is never taken for "gone": without
// s3:ListBucket S3 answers a missing key so, and a refusal too.
func (s *Store) DeletePayload(ctx context.Context, ref quarantine.ObjectRef) error {
	api, ok := s.api.(DeleteAPI)
	if !ok {
		return fmt.Errorf("delete payload %s: the S3 client cannot delete", ref.Key)
	}
	if ref.Bucket != s.bucket {
		// Never an object outside the payload bucket.
		return fmt.Errorf("delete payload %s: %w", ref.Key, quarantine.ErrForeignPayload)
	}
	tag := &s3.PutObjectTaggingInput{
		Bucket: aws.String(ref.Bucket), Key: aws.String(ref.Key),
		Tagging: &types.Tagging{TagSet: []types.Tag{{Key: aws.String(ArchivedTagKey), Value: aws.String(ArchivedTagValue)}}},
	}
	if ref.VersionID != "" {
		tag.VersionId = aws.String(ref.VersionID)
	}
	_, err := api.PutObjectTagging(ctx, tag)
	pinnedGone := err != nil && notFound(err)
	if err != nil && ref.VersionID != "" && missing(err) {
		// The pinned version is gone (see GetPayload): the archive was
		// built from the key's current version, verified by its SHA-256;
		// mark that very version, and only if it still holds those bytes.
		var sum [32]byte
		if d, derr := hex.DecodeString(ref.SHA256); derr == nil && len(d) == len(sum) {
			copy(sum[:], d)
			var version string
			version, err = s.existing(ctx, ref.Key, sum, ref.Size)
			switch {
			case pinnedGone && errors.Is(err, errNoCurrent) && notFound(err):
				// S3 says (404, not 403) that neither the pinned version nor
				// a current object exists: deleted already (the bucket's
				// lifecycle removes a tagged version 7 days after its
				// delete); nothing is left to delete. A 403 may be a
				// refusal: an error, so that the intent stays.
				return nil
			case err == nil:
				tag.VersionId = optionalVersion(version)
				_, err = api.PutObjectTagging(ctx, tag)
			}
		}
	}
	if err != nil {
		return fmt.Errorf("mark payload %s archived: %w", ref.Key, err)
	}
	in := &s3.DeleteObjectInput{Bucket: aws.String(ref.Bucket), Key: aws.String(ref.Key)}
	if _, err := api.DeleteObject(ctx, in); err != nil {
		return fmt.Errorf("delete payload %s: %w", ref.Key, err)
	}
	return nil
}

func optionalVersion(v string) *string {
	if v == "" {
		return nil
	}
	return aws.String(v)
}

package s3store

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/dlqquarantine/dlqq/shared/domain/archive"
	"github.com/dlqquarantine/dlqq/shared/domain/ledger"
	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
)

// ArchiveAPI is the part of the S3 client archiving and verification use.
type ArchiveAPI interface {
	PutObject(ctx context.Context, in *s3.PutObjectInput, opts ...func(*s3.Options)) (*s3.PutObjectOutput, error)
	GetObject(ctx context.Context, in *s3.GetObjectInput, opts ...func(*s3.Options)) (*s3.GetObjectOutput, error)
	GetObjectRetention(ctx context.Context, in *s3.GetObjectRetentionInput, opts ...func(*s3.Options)) (*s3.GetObjectRetentionOutput, error)
	ListObjectVersions(ctx context.Context, in *s3.ListObjectVersionsInput, opts ...func(*s3.Options)) (*s3.ListObjectVersionsOutput, error)
}

// Archiver writes archive objects to the Object Lock bucket (the sweeper's
// archive port).
type Archiver struct{ API ArchiveAPI }

// PutArchive writes raw under key with COMPLIANCE retention until
// retainUntil, an S3-verified SHA-256 checksum and SSE-KMS, only if no
// object exists there (If-None-Match: *). If one does (a crashed run wrote
// it), it must hold the same bytes; its version and its actual
// retain-until are then returned. A different object is an error.
func (a Archiver) PutArchive(ctx context.Context, bucket, kmsKey, key string, raw []byte, sum string, retainUntil time.Time) (string, time.Time, error) {
	digest, _ := hex.DecodeString(sum)
	in := &s3.PutObjectInput{
		Bucket: aws.String(bucket), Key: aws.String(key), Body: bytes.NewReader(raw),
		ContentLength:             aws.Int64(int64(len(raw))),
		ContentType:               aws.String("application/json"),
		ChecksumSHA256:            aws.String(base64.StdEncoding.EncodeToString(digest)),
		IfNoneMatch:               aws.String("*"),
		ObjectLockMode:            types.ObjectLockModeCompliance,
		ObjectLockRetainUntilDate: aws.Time(retainUntil),
		ServerSideEncryption:      types.ServerSideEncryptionAwsKms,
	}
	if kmsKey != "" {
		in.SSEKMSKeyId = aws.String(kmsKey)
	}
	out, err := a.API.PutObject(ctx, in)
	if err == nil {
		return aws.ToString(out.VersionId), retainUntil, nil
	}
	if !archiveExists(err) {
		return "", time.Time{}, fmt.Errorf("put archive object %s: %w", key, err)
	}
	existing, version, err := getArchive(ctx, a.API, bucket, key, "")
	if err != nil {
		return "", time.Time{}, err
	}
	if got := sha256.Sum256(existing); hex.EncodeToString(got[:]) != sum {
		return "", time.Time{}, fmt.Errorf("archive object %s exists with other content: %w", key, archive.ErrMismatch)
	}
	ret, err := a.API.GetObjectRetention(ctx, &s3.GetObjectRetentionInput{Bucket: aws.String(bucket), Key: aws.String(key), VersionId: optionalVersion(version)})
	if err != nil {
		return "", time.Time{}, fmt.Errorf("retention of archive object %s: %w", key, err)
	}
	if ret.Retention == nil || ret.Retention.Mode != types.ObjectLockRetentionModeCompliance || ret.Retention.RetainUntilDate == nil {
		return "", time.Time{}, fmt.Errorf("archive object %s is not under COMPLIANCE retention: %w", key, archive.ErrMismatch)
	}
	return version, ret.Retention.RetainUntilDate.UTC(), nil
}

// archiveExists: the put found an object under the key (If-None-Match),
// or raced a concurrent conditional write of it.
func archiveExists(err error) bool {
	return preconditionFailed(err) || errorCode(err) == "ConditionalRequestConflict"
}

func getArchive(ctx context.Context, api ArchiveAPI, bucket, key, version string) ([]byte, string, error) {
	out, err := api.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), VersionId: optionalVersion(version)})
	if err != nil {
		return nil, "", fmt.Errorf("get archive object %s: %w", key, err)
	}
	defer out.Body.Close()
	raw, err := readBody(out.Body, out.ContentLength)
	if err != nil {
		return nil, "", fmt.Errorf("read archive object %s: %w", key, err)
	}
	return raw, aws.ToString(out.VersionId), nil
}

// ReadArchive returns the envelope an archive reference points at.
func ReadArchive(ctx context.Context, api ArchiveAPI, ref *quarantine.ArchiveRef) (*archive.Envelope, error) {
	raw, _, err := getArchive(ctx, api, ref.Bucket, ref.Key, ref.VersionID)
	if err != nil {
		return nil, err
	}
	return archive.Decode(raw, ref.Key)
}

// VerifyStub checks an ARCHIVED stub against its archive object
// (archive.CheckStub, archive.CheckObject): it lists every version and
// delete marker under its key (all pages), reads the key's first version
// (the sweeper's, If-None-Match, kept by COMPLIANCE: a delete marker or a
// version put over it hides it from a plain GET, not from this read) and
// its retention, and returns every problem found, or an error when the
// object cannot be read at all.
func VerifyStub(ctx context.Context, api ArchiveAPI, stub *quarantine.Record) ([]archive.Problem, error) {
	return VerifyStubProven(ctx, api, stub, nil)
}

// StubProofs are the archive objects an earlier verify read and found
// whole for a stub (archive.CheckContent and CheckRetention passed), by
// the version id of their key's first version, which names the same
// bytes for as long as the version exists.
type StubProofs interface {
	// Known reports whether an earlier verify passed the stub's object,
	// the first version of its key being versionID.
	Known(stub *quarantine.Record, versionID string) bool
	// Passed records that this one did.
	Passed(stub *quarantine.Record, versionID string)
}

// VerifyStubProven is VerifyStub that, given proofs, reads neither the
// object nor its retention when an earlier verify passed them for the
// stub and the key's first version: the versions and delete markers under
// the key are listed and checked all the same. It finds what VerifyStub
// finds.
func VerifyStubProven(ctx context.Context, api ArchiveAPI, stub *quarantine.Record, proofs StubProofs) ([]archive.Problem, error) {
	out, ok := archive.CheckStub(stub)
	if !ok {
		return out, nil
	}
	a := stub.Archive
	obj := archive.Object{Key: a.Key}
	read := a.VersionID
	objs := ObjectVersions{API: api, Bucket: a.Bucket}
	if vs, err := objs.List(ctx, a.Key); err != nil {
		obj.VersionsErr = archiveErrCode(err)
	} else {
		versions, markers := ledger.KeyVersions(vs, a.Key)
		obj.Described = map[string]string{}
		for _, v := range versions {
			obj.Versions = append(obj.Versions, v.VersionID)
			obj.Described[v.VersionID] = v.String()
		}
		for _, m := range markers {
			obj.DeleteMarkers = append(obj.DeleteMarkers, m.String())
		}
		if len(obj.Versions) > 0 {
			read = obj.Versions[0]
		}
	}
	// A version listed first is named by its id (never "null": a bucket
	// with Object Lock keeps versioning on).
	proven := proofs != nil && obj.VersionsErr == "" && len(obj.Versions) > 0 && read != "" && read != "null"
	if proven && proofs.Known(stub, read) {
		return append(out, archive.CheckVersions(stub, obj)...), nil
	}
	raw, _, err := getArchive(ctx, api, a.Bucket, a.Key, read)
	if err != nil {
		return out, err
	}
	obj.Raw = raw
	ret, err := api.GetObjectRetention(ctx, &s3.GetObjectRetentionInput{Bucket: aws.String(a.Bucket), Key: aws.String(a.Key), VersionId: optionalVersion(read)})
	switch {
	case err != nil:
		obj.LockErr = archiveErrCode(err)
	case ret.Retention != nil:
		obj.Lock = &archive.Lock{Compliance: ret.Retention.Mode == types.ObjectLockRetentionModeCompliance, RetainUntil: ret.Retention.RetainUntilDate}
	}
	content, whole := archive.CheckContent(stub, obj)
	if !whole {
		return append(out, content...), nil
	}
	retention := archive.CheckRetention(stub, obj)
	if proven && len(content) == 0 && len(retention) == 0 {
		proofs.Passed(stub, read)
	}
	out = append(append(out, content...), archive.CheckVersions(stub, obj)...)
	return append(out, retention...), nil
}

func archiveErrCode(err error) string {
	if code := errorCode(err); code != "" {
		return code
	}
	return "unavailable"
}

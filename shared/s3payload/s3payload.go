// Package s3payload is the S3 adapter for quarantine.PayloadStore: the claim
// check for bodies and attribute sets too large for a DynamoDB item. Objects
// are written with SSE-KMS and a SHA-256 checksum that S3 verifies on upload.
package s3payload

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/dlqquarantine/dlqq/shared/quarantine"
)

// API is the part of the S3 client the store uses.
type API interface {
	PutObject(ctx context.Context, in *s3.PutObjectInput, opts ...func(*s3.Options)) (*s3.PutObjectOutput, error)
	GetObject(ctx context.Context, in *s3.GetObjectInput, opts ...func(*s3.Options)) (*s3.GetObjectOutput, error)
}

// DeleteAPI is what DeletePayload needs besides API.
type DeleteAPI interface {
	DeleteObject(ctx context.Context, in *s3.DeleteObjectInput, opts ...func(*s3.Options)) (*s3.DeleteObjectOutput, error)
}

// Store is a quarantine.PayloadStore on one bucket.
type Store struct {
	api      API
	bucket   string
	kmsKeyID string
}

// New returns a Store writing to bucket, encrypted with kmsKeyID (the
// bucket's default key when empty).
func New(api API, bucket, kmsKeyID string) *Store {
	return &Store{api: api, bucket: bucket, kmsKeyID: kmsKeyID}
}

// PutPayload implements quarantine.PayloadStore.
func (s *Store) PutPayload(ctx context.Context, key string, data []byte) (quarantine.ObjectRef, error) {
	sum := sha256.Sum256(data)
	in := &s3.PutObjectInput{
		Bucket:               aws.String(s.bucket),
		Key:                  aws.String(key),
		Body:                 bytes.NewReader(data),
		ContentLength:        aws.Int64(int64(len(data))),
		ChecksumSHA256:       aws.String(base64.StdEncoding.EncodeToString(sum[:])),
		ServerSideEncryption: types.ServerSideEncryptionAwsKms,
	}
	if s.kmsKeyID != "" {
		in.SSEKMSKeyId = aws.String(s.kmsKeyID)
	}
	out, err := s.api.PutObject(ctx, in)
	if err != nil {
		return quarantine.ObjectRef{}, fmt.Errorf("put payload %s: %w", key, err)
	}
	return quarantine.ObjectRef{
		Bucket: s.bucket, Key: key, VersionID: aws.ToString(out.VersionId),
		SHA256: hex.EncodeToString(sum[:]), Size: int64(len(data)),
	}, nil
}

// GetPayload implements quarantine.PayloadStore.
func (s *Store) GetPayload(ctx context.Context, ref quarantine.ObjectRef) ([]byte, error) {
	in := &s3.GetObjectInput{Bucket: aws.String(ref.Bucket), Key: aws.String(ref.Key)}
	if ref.VersionID != "" {
		in.VersionId = aws.String(ref.VersionID)
	}
	out, err := s.api.GetObject(ctx, in)
	if err != nil {
		return nil, fmt.Errorf("get payload %s: %w", ref.Key, err)
	}
	defer out.Body.Close()
	data, err := io.ReadAll(out.Body)
	if err != nil {
		return nil, fmt.Errorf("read payload %s: %w", ref.Key, err)
	}
	if quarantine.BodySHA256(data) != ref.SHA256 {
		return nil, fmt.Errorf("payload %s: %w", ref.Key, quarantine.ErrPayloadMismatch)
	}
	return data, nil
}

// DeletePayload implements quarantine.PayloadDeleter. It deletes the key,
// not a version: in the versioned payload bucket that leaves a delete
// marker, and the bucket's lifecycle rule expires the noncurrent version
// (the sweeper holds no s3:DeleteObjectVersion).
func (s *Store) DeletePayload(ctx context.Context, ref quarantine.ObjectRef) error {
	api, ok := s.api.(DeleteAPI)
	if !ok {
		return fmt.Errorf("delete payload %s: the S3 client cannot delete", ref.Key)
	}
	in := &s3.DeleteObjectInput{Bucket: aws.String(ref.Bucket), Key: aws.String(ref.Key)}
	if _, err := api.DeleteObject(ctx, in); err != nil {
		return fmt.Errorf("delete payload %s: %w", ref.Key, err)
	}
	return nil
}

// Package archive writes and verifies the write-once archive objects the
// sweeper puts in the S3 Object Lock bucket: one object per record version,
// holding the full sealed record and its payload.
package archive

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
)

// FormatVersion is the envelope's format.
const FormatVersion = 1

// Envelope is the archive object's content. It holds nothing that differs
// between two writes of the same record version, so a rerun writes the same
// bytes and can recognise an object a crashed run already wrote.
type Envelope struct {
	Format int `json:"format"`
	// Record is the sealed record version, as stored.
	Record *quarantine.Record `json:"record"`
	// Payload is the body when the record kept it in the claim-check store.
	Payload *Payload `json:"payload,omitempty"`
	// Attributes are the message attributes when the record kept them in
	// the claim-check store.
	Attributes map[string]quarantine.Attribute `json:"attributes,omitempty"`
	// Corrections are the bodies of corrections the record kept in the
	// claim-check store, by correction number (the record holds the rest).
	Corrections map[string]string `json:"corrections,omitempty"`
}

// Payload is a body copied from the claim-check store.
type Payload struct {
	Encoding quarantine.Encoding `json:"encoding"`
	Data     string              `json:"data"`
}

// Key is where a record version is archived: by source and first-seen date,
// for audit retrieval, then by record and version.
func Key(r *quarantine.Record) string {
	d := r.FirstSeen.UTC()
	return fmt.Sprintf("archive/%s/%04d/%02d/%02d/%s/v%06d.json", r.Source, d.Year(), d.Month(), d.Day(),
		quarantine.BodySHA256([]byte(r.DLQID))[:32], r.Version)
}

// Build makes the envelope for r, fetching claim-checked parts.
func Build(ctx context.Context, payloads quarantine.PayloadStore, r *quarantine.Record) (*Envelope, error) {
	env := &Envelope{Format: FormatVersion, Record: r}
	if r.BodyRef != nil {
		body, err := quarantine.LoadBody(ctx, payloads, r)
		if err != nil {
			return nil, err
		}
		if utf8.Valid(body) {
			env.Payload = &Payload{Encoding: quarantine.EncodingUTF8, Data: string(body)}
		} else {
			env.Payload = &Payload{Encoding: quarantine.EncodingBase64, Data: base64.StdEncoding.EncodeToString(body)}
		}
	}
	for i := range r.Corrections {
		c := &r.Corrections[i]
		if c.BodyRef == nil {
			continue
		}
		body, err := quarantine.CorrectionBody(ctx, payloads, r, c)
		if err != nil {
			return nil, err
		}
		if env.Corrections == nil {
			env.Corrections = map[string]string{}
		}
		env.Corrections[c.CorrectionNumber()] = string(body)
	}
	if r.AttributesRef != nil {
		attrs, err := quarantine.LoadAttributes(ctx, payloads, r)
		if err != nil {
			return nil, err
		}
		env.Attributes = attrs
	}
	return env, nil
}

// Encode returns the envelope's bytes and their hex SHA-256.
func (e *Envelope) Encode() ([]byte, string, error) {
	raw, err := json.Marshal(e)
	if err != nil {
		return nil, "", fmt.Errorf("encode archive envelope: %w", err)
	}
	sum := sha256.Sum256(raw)
	return raw, hex.EncodeToString(sum[:]), nil
}

// Body returns the archived record's original body.
func (e *Envelope) Body() ([]byte, error) {
	r := e.Record
	if e.Payload != nil {
		if e.Payload.Encoding == quarantine.EncodingBase64 {
			return base64.StdEncoding.DecodeString(e.Payload.Data)
		}
		return []byte(e.Payload.Data), nil
	}
	if r.BodyEncoding == quarantine.EncodingBase64 {
		return base64.StdEncoding.DecodeString(r.Body)
	}
	return []byte(r.Body), nil
}

// CorrectionBody returns the archived body of correction n.
func (e *Envelope) CorrectionBody(n int) ([]byte, error) {
	for _, c := range e.Record.Corrections {
		if c.N != n {
			continue
		}
		body := c.Body
		if c.BodyRef != nil {
			b, ok := e.Corrections[c.CorrectionNumber()]
			if !ok {
				return nil, fmt.Errorf("correction %d is not in the archive", n)
			}
			body = b
		}
		if quarantine.BodySHA256([]byte(body)) != c.BodySHA256 {
			return nil, fmt.Errorf("archived correction %d does not match its hash: %w", n, ErrMismatch)
		}
		return []byte(body), nil
	}
	return nil, fmt.Errorf("no correction %d", n)
}

// API is the part of the S3 client archiving and verification use.
type API interface {
	PutObject(ctx context.Context, in *s3.PutObjectInput, opts ...func(*s3.Options)) (*s3.PutObjectOutput, error)
	GetObject(ctx context.Context, in *s3.GetObjectInput, opts ...func(*s3.Options)) (*s3.GetObjectOutput, error)
	GetObjectRetention(ctx context.Context, in *s3.GetObjectRetentionInput, opts ...func(*s3.Options)) (*s3.GetObjectRetentionOutput, error)
	ListObjectVersions(ctx context.Context, in *s3.ListObjectVersionsInput, opts ...func(*s3.Options)) (*s3.ListObjectVersionsOutput, error)
}

// ErrMismatch means an archive object or its lock is not what the stub says.
var ErrMismatch = quarantine.ErrArchiveMismatch

// Put writes raw under key with COMPLIANCE retention until retainUntil, an
// S3-verified SHA-256 checksum and SSE-KMS, only if no object exists there
// (If-None-Match: *). If one does (a crashed run wrote it), it must hold the
// same bytes; its version and its actual retain-until are then returned. A
// different object is an error.
func Put(ctx context.Context, api API, bucket, kmsKey, key string, raw []byte, sum string, retainUntil time.Time) (string, time.Time, error) {
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
	out, err := api.PutObject(ctx, in)
	if err == nil {
		return aws.ToString(out.VersionId), retainUntil, nil
	}
	if !preconditionFailed(err) {
		return "", time.Time{}, fmt.Errorf("put archive object %s: %w", key, err)
	}
	existing, version, err := get(ctx, api, bucket, key, "")
	if err != nil {
		return "", time.Time{}, err
	}
	if got := sha256.Sum256(existing); hex.EncodeToString(got[:]) != sum {
		return "", time.Time{}, fmt.Errorf("archive object %s exists with other content: %w", key, ErrMismatch)
	}
	ret, err := api.GetObjectRetention(ctx, &s3.GetObjectRetentionInput{Bucket: aws.String(bucket), Key: aws.String(key), VersionId: optional(version)})
	if err != nil {
		return "", time.Time{}, fmt.Errorf("retention of archive object %s: %w", key, err)
	}
	if ret.Retention == nil || ret.Retention.Mode != types.ObjectLockRetentionModeCompliance || ret.Retention.RetainUntilDate == nil {
		return "", time.Time{}, fmt.Errorf("archive object %s is not under COMPLIANCE retention: %w", key, ErrMismatch)
	}
	return version, ret.Retention.RetainUntilDate.UTC(), nil
}

func preconditionFailed(err error) bool {
	var code interface{ ErrorCode() string }
	if errors.As(err, &code) {
		switch code.ErrorCode() {
		case "PreconditionFailed", "ConditionalRequestConflict":
			return true
		}
	}
	return strings.Contains(err.Error(), "StatusCode: 412")
}

func get(ctx context.Context, api API, bucket, key, version string) ([]byte, string, error) {
	in := &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)}
	if version != "" {
		in.VersionId = aws.String(version)
	}
	out, err := api.GetObject(ctx, in)
	if err != nil {
		return nil, "", fmt.Errorf("get archive object %s: %w", key, err)
	}
	defer out.Body.Close()
	raw, err := io.ReadAll(out.Body)
	if err != nil {
		return nil, "", fmt.Errorf("read archive object %s: %w", key, err)
	}
	return raw, aws.ToString(out.VersionId), nil
}

// Read returns the envelope an archive reference points at.
func Read(ctx context.Context, api API, ref *quarantine.ArchiveRef) (*Envelope, error) {
	raw, _, err := get(ctx, api, ref.Bucket, ref.Key, ref.VersionID)
	if err != nil {
		return nil, err
	}
	var env Envelope
	if err := json.Unmarshal(raw, &env); err != nil || env.Record == nil {
		return nil, fmt.Errorf("archive object %s is not an archive envelope", ref.Key)
	}
	return &env, nil
}

// Problem is one thing VerifyStub found wrong.
type Problem struct {
	ID   string
	What string
}

// VerifyStub checks an ARCHIVED stub against its archive object: the stub's
// own seal; the object's bytes against the stub's checksum; the archived
// record's seal, its body against body_sha256, and the chain (the stub's
// prev_seal is the archived seal); the object's lock (COMPLIANCE, retained
// until the stub says). It returns every problem found, or an error when the
// object cannot be read at all.
func VerifyStub(ctx context.Context, api API, stub *quarantine.Record) ([]Problem, error) {
	var out []Problem
	bad := func(format string, a ...any) {
		out = append(out, Problem{ID: stub.DLQID, What: fmt.Sprintf(format, a...)})
	}
	if err := quarantine.Verify(stub); err != nil {
		bad("stub: %v", err)
	}
	a := stub.Archive
	if stub.Status != quarantine.StatusArchived || a == nil {
		bad("not an archived stub")
		return out, nil
	}
	raw, _, err := get(ctx, api, a.Bucket, a.Key, a.VersionID)
	if err != nil {
		return out, err
	}
	if sum := sha256.Sum256(raw); hex.EncodeToString(sum[:]) != a.SHA256 {
		bad("object checksum %x differs from the stub's %s", sum, a.SHA256)
	}
	var env Envelope
	if err := json.Unmarshal(raw, &env); err != nil || env.Record == nil {
		bad("object is not an archive envelope")
		return out, nil
	}
	rec := env.Record
	if err := quarantine.Verify(rec); err != nil {
		bad("archived record: %v", err)
	}
	// The stub was made from the archived version (its prev_seal is that
	// seal); later arrivals may have added stub versions since.
	if rec.Seal != a.Seal {
		bad("seal chain broken: archived seal %s, the stub's reference %s", rec.Seal, a.Seal)
	}
	if rec.DLQID != stub.DLQID || rec.Version >= stub.Version || (stub.Version == rec.Version+1 && stub.PrevSeal != rec.Seal) {
		bad("archived record %s v%d does not precede stub v%d (prev_seal %s)", rec.DLQID, rec.Version, stub.Version, stub.PrevSeal)
	}
	if rec.BodySHA256 != stub.BodySHA256 {
		bad("archived body hash differs from the stub's")
	}
	if body, err := env.Body(); err != nil || quarantine.BodySHA256(body) != rec.BodySHA256 {
		bad("archived body does not match body_sha256")
	}
	if len(rec.Corrections) != len(stub.Corrections) {
		bad("archived record has %d corrections, the stub %d", len(rec.Corrections), len(stub.Corrections))
	}
	for _, c := range rec.Corrections {
		if _, err := env.CorrectionBody(c.N); err != nil {
			bad("%v", err)
		}
	}
	// The sweeper writes exactly one version per key, and COMPLIANCE keeps
	// it: a second version means someone wrote beside it, and a stub that
	// points at another version than the first was swapped.
	vs, err := api.ListObjectVersions(ctx, &s3.ListObjectVersionsInput{Bucket: aws.String(a.Bucket), Prefix: aws.String(a.Key)})
	if err != nil {
		bad("object versions unreadable: %s", errCode(err))
	} else {
		var ids []string
		for _, v := range vs.Versions {
			if aws.ToString(v.Key) == a.Key {
				ids = append(ids, aws.ToString(v.VersionId))
			}
		}
		if len(ids) != 1 || (a.VersionID != "" && ids[0] != a.VersionID) {
			bad("archive key holds versions %v; the stub names %s", ids, a.VersionID)
		}
	}
	ret, err := api.GetObjectRetention(ctx, &s3.GetObjectRetentionInput{Bucket: aws.String(a.Bucket), Key: aws.String(a.Key), VersionId: optional(a.VersionID)})
	switch {
	case err != nil:
		bad("object has no readable retention: %v", errCode(err))
	case ret.Retention == nil || ret.Retention.Mode != types.ObjectLockRetentionModeCompliance:
		bad("object lock mode is not COMPLIANCE")
	case ret.Retention.RetainUntilDate == nil || ret.Retention.RetainUntilDate.Before(a.RetainUntil.Add(-time.Second)):
		bad("object retained until %v, the stub says %s", ret.Retention.RetainUntilDate, a.RetainUntil)
	}
	return out, nil
}

func optional(s string) *string {
	if s == "" {
		return nil
	}
	return aws.String(s)
}

func errCode(err error) string {
	var code interface{ ErrorCode() string }
	if errors.As(err, &code) {
		return code.ErrorCode()
	}
	return "unavailable"
}

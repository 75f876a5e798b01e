// Package s3fake is a test kit: an in-memory S3 with the behaviour the
// claim check depends on and the emulator lacks. Buckets are versioned;
// PutObject honours If-None-Match "*" (412 PreconditionFailed when the key
// has a current object, success over a delete marker) and verifies a SHA-256
// checksum; DeleteObject without a version leaves a delete marker; a version
// removed by the lifecycle rule answers NoSuchVersion; versions carry tags
// (PutObjectTagging); and ApplyLifecycle (every noncurrent version) and
// ApplyRules (tag-filtered rules, expired delete markers, as the template's
// payload bucket declares them) run lifecycle rules on the fake's clock,
// which the emulator never does. Errors have the shapes the SDK
// returns (an operation error around an HTTP response error around the API
// error), so code that classifies SDK errors classifies these the same way.
//
// No function links this package; only tests do.
package s3fake

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"sort"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/dlqquarantine/dlqq/shared/runtime/clock"
)

// Version is one stored version of a key, or a delete marker.
type Version struct {
	ID           string
	Data         []byte
	SHA256       string // base64, as S3 reports it; "" when none was sent
	DeleteMarker bool
	Created      time.Time
	// NoncurrentSince is when a newer version (or a delete marker) replaced
	// it; zero while it is current. The lifecycle rule counts from here.
	NoncurrentSince time.Time
	// Tags is the version's tag set (PutObjectTagging); a delete marker
	// has none.
	Tags map[string]string
}

// Rule is one lifecycle rule as S3 applies it to a versioned bucket.
type Rule struct {
	// TagKey and TagValue filter the rule to versions carrying that tag
	// (an empty TagKey: every version). Delete markers carry no tags.
	TagKey, TagValue string
	// NoncurrentDays removes noncurrent versions this many days after they
	// became noncurrent (0: no such action).
	NoncurrentDays int
	// ExpiredObjectDeleteMarker removes a delete marker that is the only
	// version left of its key.
	ExpiredObjectDeleteMarker bool
}

// Fault lets a test intervene in a call: it runs with the operation name
// ("PutObject", "GetObject", "HeadObject", "DeleteObject") and the key.
// Before returns an error to fail the call before it is applied; After
// returns an error to fail it after it was applied (the answer was lost).
type Fault struct {
	Before func(op, key string) error
	After  func(op, key string) error
}

// S3 is the fake. The zero value is not usable: call New.
type S3 struct {
	mu             sync.Mutex
	clock          *clock.Fake
	seq            int
	noncurrentDays int
	objects        map[string][]*Version // bucket/key → versions, oldest first
	fault          Fault
	calls          map[string]int
}

// New returns an empty fake whose clock starts at now and whose lifecycle
// rule expires noncurrent versions noncurrentDays after they became
// noncurrent (the template's rule: 7).
func New(now time.Time, noncurrentDays int) *S3 {
	return &S3{clock: clock.NewFake(now), noncurrentDays: noncurrentDays, objects: map[string][]*Version{}, calls: map[string]int{}}
}

// Now is the fake's clock.
func (f *S3) Now() time.Time { return f.clock.Now() }

// Advance moves the clock; nothing expires until ApplyLifecycle runs.
func (f *S3) Advance(d time.Duration) { f.clock.Advance(d) }

// SetFault installs f (the zero Fault removes it).
func (f *S3) SetFault(fault Fault) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fault = fault
}

// Calls is how many times op was called (faulted calls included).
func (f *S3) Calls(op string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[op]
}

// PutObjectTagging replaces the tag set of a version (the current one
// without a version id). A delete marker cannot be tagged (405).
func (f *S3) PutObjectTagging(_ context.Context, in *s3.PutObjectTaggingInput, _ ...func(*s3.Options)) (*s3.PutObjectTaggingOutput, error) {
	return call(f, "PutObjectTagging", aws.ToString(in.Key), func(op, key string) (*s3.PutObjectTaggingOutput, error) {
		v, err := f.find(op, aws.ToString(in.Bucket), key, in.VersionId)
		if err != nil {
			return nil, err
		}
		tags := map[string]string{}
		if in.Tagging != nil {
			for _, t := range in.Tagging.TagSet {
				tags[aws.ToString(t.Key)] = aws.ToString(t.Value)
			}
		}
		v.Tags = tags
		return &s3.PutObjectTaggingOutput{VersionId: aws.String(v.ID)}, nil
	})
}

// Versions returns the versions of bucket/key, oldest first (copies).
func (f *S3) Versions(bucket, key string) []Version {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []Version
	for _, v := range f.objects[bucket+"/"+key] {
		c := *v
		c.Data = append([]byte(nil), v.Data...)
		if v.Tags != nil {
			c.Tags = map[string]string{}
			for tk, tv := range v.Tags {
				c.Tags[tk] = tv
			}
		}
		out = append(out, c)
	}
	return out
}

// Keys lists every key of bucket that has any version, sorted.
func (f *S3) Keys(bucket string) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for k, vs := range f.objects {
		if len(vs) > 0 && len(k) > len(bucket) && k[:len(bucket)+1] == bucket+"/" {
			out = append(out, k[len(bucket)+1:])
		}
	}
	sort.Strings(out)
	return out
}

// call runs one operation on key under the fake's lock: the test's
// Fault.Before first (the call is not applied when it fails), then do, then
// Fault.After (the call was applied but its answer is lost).
func call[T any](f *S3, op, key string, do func(op, key string) (T, error)) (T, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var none T
	if err := f.enter(op, key); err != nil {
		return none, err
	}
	out, err := do(op, key)
	if err != nil {
		return none, err
	}
	if err := f.leave(op, key); err != nil {
		return none, err
	}
	return out, nil
}

func (f *S3) enter(op, key string) error {
	f.calls[op]++
	if f.fault.Before != nil {
		return f.fault.Before(op, key)
	}
	return nil
}

func (f *S3) leave(op, key string) error {
	if f.fault.After != nil {
		return f.fault.After(op, key)
	}
	return nil
}

func (f *S3) current(k string) *Version {
	vs := f.objects[k]
	if len(vs) == 0 {
		return nil
	}
	return vs[len(vs)-1]
}

func (f *S3) add(k string, v *Version) {
	if cur := f.current(k); cur != nil {
		cur.NoncurrentSince = f.Now()
	}
	f.seq++
	v.ID = fmt.Sprintf("fv%06d", f.seq)
	v.Created = f.Now()
	f.objects[k] = append(f.objects[k], v)
}

// PutObject stores a new version. IfNoneMatch "*" fails with 412 when the
// key's current version is an object (not a delete marker); a
// ChecksumSHA256 that does not match the bytes fails with 400 BadDigest.
func (f *S3) PutObject(_ context.Context, in *s3.PutObjectInput, _ ...func(*s3.Options)) (*s3.PutObjectOutput, error) {
	return call(f, "PutObject", aws.ToString(in.Key), func(op, key string) (*s3.PutObjectOutput, error) {
		var data []byte
		if in.Body != nil {
			b, err := io.ReadAll(in.Body)
			if err != nil {
				return nil, err
			}
			data = b
		}
		if in.IfMatch != nil {
			return nil, Error(op, http.StatusNotImplemented, "NotImplemented", "the fake does not do If-Match")
		}
		if in.IfNoneMatch != nil && aws.ToString(in.IfNoneMatch) != "*" {
			return nil, Error(op, http.StatusNotImplemented, "NotImplemented", "If-None-Match takes only *")
		}
		b64 := Checksum(data)
		if in.ChecksumSHA256 != nil && aws.ToString(in.ChecksumSHA256) != b64 {
			return nil, Error(op, http.StatusBadRequest, "BadDigest", "The SHA256 you specified did not match the calculated checksum.")
		}
		k := aws.ToString(in.Bucket) + "/" + key
		if in.IfNoneMatch != nil {
			if cur := f.current(k); cur != nil && !cur.DeleteMarker {
				return nil, Error(op, http.StatusPreconditionFailed, "PreconditionFailed", "At least one of the pre-conditions you specified did not hold")
			}
		}
		v := &Version{Data: data}
		if in.ChecksumSHA256 != nil {
			v.SHA256 = b64
		}
		f.add(k, v)
		out := &s3.PutObjectOutput{VersionId: aws.String(v.ID)}
		if v.SHA256 != "" {
			out.ChecksumSHA256 = aws.String(v.SHA256)
		}
		return out, nil
	})
}

// Checksum is data's SHA-256 as S3 takes and reports it (ChecksumSHA256:
// base64).
func Checksum(data []byte) string {
	sum := sha256.Sum256(data)
	return base64.StdEncoding.EncodeToString(sum[:])
}

// find returns the version asked for: the current one without a version
// id. It answers as S3 does for GET: NoSuchKey (404) when the key has no
// current object, NoSuchVersion (404) for a version that does not exist,
// MethodNotAllowed (405) for a delete marker asked for by id.
func (f *S3) find(op, bucket, key string, versionID *string) (*Version, error) {
	k := bucket + "/" + key
	if versionID == nil {
		cur := f.current(k)
		if cur == nil || cur.DeleteMarker {
			if op == "HeadObject" {
				return nil, wrap(op, http.StatusNotFound, &types.NotFound{Message: aws.String("Not Found")})
			}
			return nil, wrap(op, http.StatusNotFound, &types.NoSuchKey{Message: aws.String("The specified key does not exist.")})
		}
		return cur, nil
	}
	for _, v := range f.objects[k] {
		if v.ID == *versionID {
			if v.DeleteMarker {
				return nil, Error(op, http.StatusMethodNotAllowed, "MethodNotAllowed", "The specified method is not allowed against this resource.")
			}
			return v, nil
		}
	}
	if op == "HeadObject" {
		// HEAD has no body: the SDK sees only the status.
		return nil, wrap(op, http.StatusNotFound, &types.NotFound{Message: aws.String("Not Found")})
	}
	return nil, Error(op, http.StatusNotFound, "NoSuchVersion", "The specified version does not exist.")
}

// GetObject reads a version, or the current one.
func (f *S3) GetObject(_ context.Context, in *s3.GetObjectInput, _ ...func(*s3.Options)) (*s3.GetObjectOutput, error) {
	return call(f, "GetObject", aws.ToString(in.Key), func(op, key string) (*s3.GetObjectOutput, error) {
		v, err := f.find(op, aws.ToString(in.Bucket), key, in.VersionId)
		if err != nil {
			return nil, err
		}
		out := &s3.GetObjectOutput{
			Body: io.NopCloser(bytes.NewReader(append([]byte(nil), v.Data...))), ContentLength: aws.Int64(int64(len(v.Data))),
			VersionId: aws.String(v.ID),
		}
		if in.ChecksumMode == types.ChecksumModeEnabled && v.SHA256 != "" {
			out.ChecksumSHA256, out.ChecksumType = aws.String(v.SHA256), types.ChecksumTypeFullObject
		}
		return out, nil
	})
}

// HeadObject describes a version, or the current one; with ChecksumMode
// ENABLED it reports the SHA-256 sent at upload.
func (f *S3) HeadObject(_ context.Context, in *s3.HeadObjectInput, _ ...func(*s3.Options)) (*s3.HeadObjectOutput, error) {
	return call(f, "HeadObject", aws.ToString(in.Key), func(op, key string) (*s3.HeadObjectOutput, error) {
		v, err := f.find(op, aws.ToString(in.Bucket), key, in.VersionId)
		if err != nil {
			return nil, err
		}
		out := &s3.HeadObjectOutput{ContentLength: aws.Int64(int64(len(v.Data))), VersionId: aws.String(v.ID)}
		if in.ChecksumMode == types.ChecksumModeEnabled && v.SHA256 != "" {
			out.ChecksumSHA256, out.ChecksumType = aws.String(v.SHA256), types.ChecksumTypeFullObject
		}
		return out, nil
	})
}

// DeleteObject without a version id leaves a delete marker (the current
// version becomes noncurrent); with one, it removes that version for good.
func (f *S3) DeleteObject(_ context.Context, in *s3.DeleteObjectInput, _ ...func(*s3.Options)) (*s3.DeleteObjectOutput, error) {
	return call(f, "DeleteObject", aws.ToString(in.Key), func(op, key string) (*s3.DeleteObjectOutput, error) {
		k := aws.ToString(in.Bucket) + "/" + key
		out := &s3.DeleteObjectOutput{}
		if in.VersionId == nil {
			m := &Version{DeleteMarker: true}
			f.add(k, m)
			out.DeleteMarker, out.VersionId = aws.Bool(true), aws.String(m.ID)
		} else {
			vs := f.objects[k]
			for i, v := range vs {
				if v.ID == *in.VersionId {
					f.objects[k] = append(vs[:i:i], vs[i+1:]...)
					if i == len(vs)-1 {
						if cur := f.current(k); cur != nil {
							cur.NoncurrentSince = time.Time{}
						}
					}
					out.VersionId = aws.String(v.ID)
					break
				}
			}
		}
		return out, nil
	})
}

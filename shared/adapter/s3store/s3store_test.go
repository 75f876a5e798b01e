package s3store_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/dlqquarantine/dlqq/shared/adapter/s3store"
	"github.com/dlqquarantine/dlqq/shared/dev/s3fake"
	"github.com/dlqquarantine/dlqq/shared/dev/storetest"
	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
)

const bucket = "payloads"

var (
	t0  = time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	day = 24 * time.Hour
)

// sdkRetry retries a PutObject answered with a 5xx, rewinding the body, as
// the SDK's standard retryer does inside one PutObject call.
type sdkRetry struct{ *s3fake.S3 }

func (r sdkRetry) PutObject(ctx context.Context, in *s3.PutObjectInput, opts ...func(*s3.Options)) (*s3.PutObjectOutput, error) {
	for i := 0; ; i++ {
		out, err := r.S3.PutObject(ctx, in, opts...)
		if _, status := s3fake.Answer(err); err == nil || i == 2 || status < 500 {
			return out, err
		}
		if _, err := in.Body.(io.Seeker).Seek(0, io.SeekStart); err != nil {
			return nil, err
		}
	}
}

// rawPut writes as the code before the fix did: no condition.
func rawPut(t *testing.T, f *s3fake.S3, key string, data []byte, withChecksum bool) string {
	t.Helper()
	in := &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), Body: bytes.NewReader(data)}
	if withChecksum {
		in.ChecksumSHA256 = aws.String(s3fake.Checksum(data))
	}
	out, err := f.PutObject(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	return aws.ToString(out.VersionId)
}

// stored puts data under key through a Store on a fresh fake.
func stored(t *testing.T, key string, data []byte) (*s3fake.S3, *s3store.Store, quarantine.ObjectRef) {
	t.Helper()
	f := s3fake.New(t0, 7)
	p := s3store.New(f, bucket, "")
	ref, err := p.PutPayload(context.Background(), key, data)
	if err != nil {
		t.Fatal(err)
	}
	return f, p, ref
}

// readsAfterLifecycle runs the fake's lifecycle rule after d and reads
// data back through ref.
func readsAfterLifecycle(t *testing.T, f *s3fake.S3, p *s3store.Store, ref quarantine.ObjectRef, data []byte, d time.Duration) {
	t.Helper()
	f.Advance(d)
	f.ApplyLifecycle()
	if got, err := p.GetPayload(context.Background(), ref); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("get after lifecycle: %v", err)
	}
}

func oneVersion(t *testing.T, f *s3fake.S3, key, want string) {
	t.Helper()
	vs := f.Versions(bucket, key)
	if len(vs) != 1 || vs[0].ID != want {
		t.Fatalf("%s has %d versions (%+v), want only %s", key, len(vs), vs, want)
	}
}

// A second put of the same key and bytes (a duplicate delivery) uploads
// nothing and names the version the first made, so the lifecycle rule,
// which expires only noncurrent versions, never takes it.
func TestPutPayloadCreatesOnceAndReusesTheVersion(t *testing.T) {
	ctx := context.Background()
	f := s3fake.New(t0, 7)
	p := s3store.New(f, bucket, "key")
	data := bytes.Repeat([]byte("x"), 200<<10)
	first, err := p.PutPayload(ctx, "bodies/s/k", data)
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		again, err := p.PutPayload(ctx, "bodies/s/k", data)
		if err != nil || again != first {
			t.Fatalf("second put = %+v %v, want %+v", again, err, first)
		}
	}
	oneVersion(t, f, "bodies/s/k", first.VersionID)
	readsAfterLifecycle(t, f, p, first, data, 8*day)
}

// A key holding other bytes than the caller's is never accepted, whether S3
// reports the object's checksum or the bytes must be read and hashed.
func TestPutPayloadRefusesAKeyHoldingOtherBytes(t *testing.T) {
	ctx := context.Background()
	for _, withChecksum := range []bool{true, false} {
		f := s3fake.New(t0, 7)
		p := s3store.New(f, bucket, "")
		rawPut(t, f, "k-same-size", []byte("tampered"), withChecksum)
		rawPut(t, f, "k-other-size", []byte("much longer than the original"), withChecksum)
		for _, k := range []string{"k-same-size", "k-other-size"} {
			if ref, err := p.PutPayload(ctx, k, []byte("original")); !errors.Is(err, quarantine.ErrPayloadMismatch) {
				t.Fatalf("checksum %v, %s: put over other bytes = %+v %v", withChecksum, k, ref, err)
			}
			if n := len(f.Versions(bucket, k)); n != 1 {
				t.Fatalf("%d versions", n)
			}
		}
	}
}

// An object stored without a checksum is verified by reading that very
// version and hashing it.
func TestPutPayloadVerifiesByHashingWhenNoChecksumIsReported(t *testing.T) {
	ctx := context.Background()
	f := s3fake.New(t0, 7)
	p := s3store.New(f, bucket, "")
	v := rawPut(t, f, "k", []byte("same bytes"), false)
	ref, err := p.PutPayload(ctx, "k", []byte("same bytes"))
	if err != nil || ref.VersionID != v {
		t.Fatalf("put = %+v %v, want version %s", ref, err, v)
	}
	if f.Calls("GetObject") != 1 {
		t.Fatalf("%d GetObject calls, want the one that hashes", f.Calls("GetObject"))
	}
	oneVersion(t, f, "k", v)
}

// S3 applied the put and the answer was lost (a 500); the SDK retries the
// same conditional put, which gets 412: the ref names the version the
// first attempt made, and there is one version.
func TestPutPayloadAppliedThenAnswerLost(t *testing.T) {
	ctx := context.Background()
	f := s3fake.New(t0, 7)
	f.SetFault(s3fake.Fault{After: s3fake.Failing(1, "PutObject", 500, "InternalError", "We encountered an internal error. Please try again.")})
	p := s3store.New(sdkRetry{f}, bucket, "")
	data := []byte(strings.Repeat("body", 50000))
	ref, err := p.PutPayload(ctx, "bodies/s/lost", data)
	if err != nil {
		t.Fatal(err)
	}
	if f.Calls("PutObject") != 2 || f.Calls("HeadObject") != 1 {
		t.Fatalf("%d puts, %d heads", f.Calls("PutObject"), f.Calls("HeadObject"))
	}
	oneVersion(t, f, "bodies/s/lost", ref.VersionID)
	readsAfterLifecycle(t, f, p, ref, data, 30*day)
}

// Applied, then the call timed out for the caller (the SDK gave up): the
// put fails, the message is delivered again, and the next put names the
// version the first one made.
func TestPutPayloadAppliedThenTimedOut(t *testing.T) {
	ctx := context.Background()
	f := s3fake.New(t0, 7)
	f.SetFault(s3fake.Fault{After: func(op, key string) error {
		if op == "PutObject" {
			return context.DeadlineExceeded
		}
		return nil
	}})
	p := s3store.New(f, bucket, "")
	data := []byte("applied but unanswered")
	if _, err := p.PutPayload(ctx, "k", data); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("first put = %v", err)
	}
	f.SetFault(s3fake.Fault{})
	ref, err := p.PutPayload(ctx, "k", data)
	if err != nil {
		t.Fatal(err)
	}
	oneVersion(t, f, "k", ref.VersionID)
}

// 409 ConditionalRequestConflict (a concurrent conditional write) is
// retried, as S3 asks.
func TestPutPayloadRetriesConditionalConflict(t *testing.T) {
	ctx := context.Background()
	f := s3fake.New(t0, 7)
	f.SetFault(s3fake.Fault{Before: s3fake.Failing(2, "PutObject", 409, "ConditionalRequestConflict",
		"A conflicting conditional operation is currently in progress against this resource.")})
	p := s3store.New(f, bucket, "")
	ref, err := p.PutPayload(ctx, "k", []byte("data"))
	if err != nil {
		t.Fatal(err)
	}
	if f.Calls("PutObject") != 3 {
		t.Fatalf("%d puts", f.Calls("PutObject"))
	}
	oneVersion(t, f, "k", ref.VersionID)
}

// Other errors are not mistaken for an existing object.
func TestPutPayloadReportsOtherErrors(t *testing.T) {
	f := s3fake.New(t0, 7)
	f.SetFault(s3fake.Fault{Before: func(op, key string) error {
		return s3fake.Error(op, 403, "AccessDenied", "Access Denied")
	}})
	if _, err := s3store.New(f, bucket, "").PutPayload(context.Background(), "k", []byte("d")); err == nil {
		t.Fatal("a denied put succeeded")
	}
	if f.Calls("HeadObject") != 0 {
		t.Fatal("a denied put read the key")
	}
}

// After the sweeper's delete (a delete marker is current), a put creates a
// new current version, and a ref to it.
func TestPutPayloadAfterDeleteMarker(t *testing.T) {
	ctx := context.Background()
	f, p, first := stored(t, "k", []byte("data"))
	if err := p.DeletePayload(ctx, first); err != nil {
		t.Fatal(err)
	}
	again, err := p.PutPayload(ctx, "k", []byte("data"))
	if err != nil || again.VersionID == first.VersionID {
		t.Fatalf("put after delete = %+v %v", again, err)
	}
	readsAfterLifecycle(t, f, p, again, []byte("data"), 8*day)
}

// A record written before the fix may pin a version a later upload made
// noncurrent and the lifecycle rule then expired. The current version of
// the content-addressed key holds the same bytes: it is read and accepted
// after its SHA-256 is checked, never otherwise.
func TestGetPayloadWhenThePinnedVersionExpired(t *testing.T) {
	ctx := context.Background()
	data := []byte("the body")
	setup := func() (*s3fake.S3, quarantine.ObjectRef) {
		f := s3fake.New(t0, 7)
		v1 := rawPut(t, f, "k", data, true)
		rawPut(t, f, "k", data, true) // the duplicate delivery's upload
		f.Advance(8 * day)
		if f.ApplyLifecycle() != 1 {
			t.Fatal("v1 did not expire")
		}
		return f, quarantine.ObjectRef{Bucket: bucket, Key: "k", VersionID: v1, SHA256: quarantine.BodySHA256(data), Size: int64(len(data))}
	}
	f, ref := setup()
	p := s3store.New(f, bucket, "")
	var told []quarantine.ObjectRef
	p.PinnedGone = func(r quarantine.ObjectRef, notFound bool) {
		if notFound {
			told = append(told, r)
		}
	}
	if got, err := p.GetPayload(ctx, ref); err != nil || !bytes.Equal(got, data) || len(told) != 1 || told[0] != ref {
		t.Fatalf("get = %q %v, PinnedGone told of %v", got, err, told)
	}
	// Other bytes under the key are refused.
	rawPut(t, f, "k", []byte("other bytes"), true)
	if _, err := p.GetPayload(ctx, ref); !errors.Is(err, quarantine.ErrPayloadMismatch) || len(told) != 1 {
		t.Fatalf("get over other bytes = %v (PinnedGone told of %v)", err, told)
	}
	// No current object: an error, not bytes.
	f, ref = setup()
	p = s3store.New(f, bucket, "")
	if err := p.DeletePayload(ctx, ref); err != nil {
		t.Fatal(err)
	}
	if got, err := p.GetPayload(ctx, ref); err == nil {
		t.Fatalf("get after delete = %q", got)
	}
}

// An object longer than its reference names is a mismatch, refused by
// its Content-Length before it is read (whoever can write the key could
// otherwise make a reader hold gigabytes); one that says less but goes on
// is read no further than one byte past the size.
func TestGetPayloadReadsNoMoreThanItsReferenceNames(t *testing.T) {
	ctx := context.Background()
	data := []byte("the body")
	f := s3fake.New(t0, 7)
	rawPut(t, f, "k", bytes.Repeat([]byte("x"), 1<<20), true)
	p := s3store.New(f, bucket, "")
	ref := quarantine.ObjectRef{Bucket: bucket, Key: "k", SHA256: quarantine.BodySHA256(data), Size: int64(len(data))}
	if got, err := p.GetPayload(ctx, ref); !errors.Is(err, quarantine.ErrPayloadMismatch) || !strings.Contains(fmt.Sprint(err), "more than the 8") {
		t.Fatalf("get of 1 MiB for an 8-byte reference = %d bytes, %v", len(got), err)
	}
	var read atomic.Int64
	p = s3store.New(unsized{f, &read}, bucket, "")
	if _, err := p.GetPayload(ctx, ref); !errors.Is(err, quarantine.ErrPayloadMismatch) || read.Load() > ref.Size+1+32<<10 {
		t.Fatalf("get without a Content-Length: %d bytes read, %v", read.Load(), err)
	}
	// A reference that names no size (written by hand) reads at most
	// maxUnsized, 64 MiB.
	rawPut(t, f, "big", bytes.Repeat([]byte("x"), 64<<20+1), true)
	read.Store(0)
	noSize := quarantine.ObjectRef{Bucket: bucket, Key: "big", SHA256: ref.SHA256}
	if _, err := p.GetPayload(ctx, noSize); !errors.Is(err, quarantine.ErrPayloadMismatch) || read.Load() > 64<<20+1+32<<10 {
		t.Fatalf("get of 64 MiB + 1 with no size named: %d bytes read, %v", read.Load(), err)
	}
}

// unsized is f answering GetObject without a Content-Length, counting
// the bytes read of the body.
type unsized struct {
	*s3fake.S3
	read *atomic.Int64
}

func (u unsized) GetObject(ctx context.Context, in *s3.GetObjectInput, opts ...func(*s3.Options)) (*s3.GetObjectOutput, error) {
	out, err := u.S3.GetObject(ctx, in, opts...)
	if err == nil {
		out.ContentLength = nil
		out.Body = countingBody{out.Body, u.read}
	}
	return out, err
}

type countingBody struct {
	io.ReadCloser
	n *atomic.Int64
}

func (c countingBody) Read(p []byte) (int, error) {
	k, err := c.ReadCloser.Read(p)
	c.n.Add(int64(k))
	return k, err
}

// Without s3:ListBucket, S3 answers a missing version with 403: the fall
// back to the verified current version covers that too.
func TestGetPayloadWhenThePinnedVersionIsForbidden(t *testing.T) {
	ctx := context.Background()
	f, p, ref := stored(t, "k", []byte("data"))
	f.SetFault(s3fake.Fault{Before: s3fake.Failing(1, "GetObject", 403, "AccessDenied", "Access Denied")})
	refused := 0
	p.PinnedGone = func(_ quarantine.ObjectRef, notFound bool) {
		if !notFound {
			refused++
		}
	}
	if got, err := p.GetPayload(ctx, ref); err != nil || string(got) != "data" || refused != 1 {
		t.Fatalf("get = %q %v (told of %d refused)", got, err, refused)
	}
}

// The PayloadStore contract, on the fake (versioned, lifecycle-aware); it
// also runs on versitygw (dynamostore) and the in-memory twin.
func TestPayloadsContractOnFake(t *testing.T) {
	f := s3fake.New(t0, 7)
	storetest.RunPayloads(t, s3store.New(f, bucket, ""), func(t *testing.T, ref quarantine.ObjectRef, data []byte) {
		rawPut(t, f, ref.Key, data, false)
	})
}

// DeletePayload marks the version the reference pins (the payload bucket's
// lifecycle removes only marked versions) before it deletes the key; when
// the mark cannot be set, nothing is deleted.
func TestDeletePayloadMarksThePinnedVersionFirst(t *testing.T) {
	ctx := context.Background()
	f, p, ref := stored(t, "k", []byte("data"))
	f.SetFault(s3fake.Fault{Before: s3fake.Failing(-1, "PutObjectTagging", 503, "SlowDown", "Please reduce your request rate.")})
	if err := p.DeletePayload(ctx, ref); err == nil {
		t.Fatal("delete succeeded without the mark")
	}
	if vs := f.Versions(bucket, "k"); len(vs) != 1 || vs[0].DeleteMarker {
		t.Fatalf("an unmarked object was deleted: %+v", vs)
	}
	f.SetFault(s3fake.Fault{})
	if err := p.DeletePayload(ctx, ref); err != nil {
		t.Fatal(err)
	}
	vs := f.Versions(bucket, "k")
	if len(vs) != 2 || vs[0].ID != ref.VersionID || vs[0].Tags[s3store.ArchivedTagKey] != s3store.ArchivedTagValue || !vs[1].DeleteMarker {
		t.Fatalf("versions after delete: %+v", vs)
	}
}

// DeletePayload deletes in the payload bucket only: a reference to the
// same key in another bucket (an archive, anyone's) is refused before
// any request.
func TestDeletePayloadStaysInThePayloadBucket(t *testing.T) {
	ctx := context.Background()
	f, p, ref := stored(t, "k", []byte("data"))
	elsewhere := ref
	elsewhere.Bucket = bucket + "-archive"
	if err := p.DeletePayload(ctx, elsewhere); !errors.Is(err, quarantine.ErrForeignPayload) {
		t.Fatalf("delete in another bucket: %v, want ErrForeignPayload", err)
	}
	if vs := f.Versions(bucket, "k"); len(vs) != 1 || vs[0].DeleteMarker || len(vs[0].Tags) != 0 {
		t.Fatalf("versions after a refused delete: %+v", vs)
	}
}

// A delete repeated after the deleted version expired (the bucket's
// lifecycle, 7 days after the delete: a sweeper run settling an intent it
// could not drop before) is done: nothing is left to delete.
func TestDeletePayloadRepeatedAfterTheVersionExpired(t *testing.T) {
	ctx := context.Background()
	f, p, ref := stored(t, "bodies/src/h/sum", []byte("data"))
	if err := p.DeletePayload(ctx, ref); err != nil {
		t.Fatal(err)
	}
	f.Advance(8 * 24 * time.Hour)
	f.ApplyLifecycle()
	if err := p.DeletePayload(ctx, ref); err != nil {
		t.Fatalf("a delete repeated after the version expired: %v", err)
	}
	if vs := f.Versions(bucket, "bodies/src/h/sum"); len(vs) > 1 {
		t.Fatalf("versions after the repeated delete: %+v", vs)
	}
}

// A refusal (403 on every call: a Deny in an SCP, an endpoint policy, a
// boundary) looks like a missing key to a caller without s3:ListBucket:
// DeletePayload never takes it for "deleted already", and nothing is
// marked or deleted. (From review: it did, and the intent was dropped.)
func TestDeletePayloadRefusedIsNeverDeletedAlready(t *testing.T) {
	ctx := context.Background()
	f, p, ref := stored(t, "bodies/src/h/sum2", []byte("data"))
	f.SetFault(s3fake.Fault{Before: func(op, _ string) error {
		return s3fake.Error(op, 403, "AccessDenied", "Access Denied")
	}})
	if err := p.DeletePayload(ctx, ref); err == nil {
		t.Fatal("a delete refused on every call reported done")
	}
	f.SetFault(s3fake.Fault{})
	if vs := f.Versions(bucket, "bodies/src/h/sum2"); len(vs) != 1 || vs[0].DeleteMarker || len(vs[0].Tags) != 0 {
		t.Fatalf("versions after a refused delete: %+v", vs)
	}
}

package dlqctl_test

import (
	"bytes"
	"context"
	"regexp"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/dlqquarantine/dlqq/internal/dlqctl"
	"github.com/dlqquarantine/dlqq/shared/adapter/s3store"
	"github.com/dlqquarantine/dlqq/shared/dev/storetest"
	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
)

// claimChecked creates a record whose body is in the payload bucket, as
// ingest stores a large one: its reference pins the object's version, or
// (pin false, as a store without versioning gives) none.
func (l *ledgerFixture) claimChecked(prefix string, body []byte, pin bool) *quarantine.Record {
	l.t.Helper()
	r := storetest.Record(l.t, storetest.UniqueID(prefix))
	ref, err := s3store.New(l.st.Clients.S3, l.st.Names["PayloadBucket"], "").PutPayload(context.Background(), "payloads/"+r.IdempotencyKey, body)
	if err != nil {
		l.t.Fatal(err)
	}
	if !pin {
		ref.VersionID = ""
	}
	r.Body, r.BodyRef, r.BodySHA256, r.BodySize = "", &ref, quarantine.BodySHA256(body), int64(len(body))
	if err := quarantine.SealRecord(r); err != nil {
		l.t.Fatal(err)
	}
	if err := l.store.Create(context.Background(), r); err != nil {
		l.t.Fatal(err)
	}
	return r
}

// Verify reads every claim-checked body and names one it cannot read or
// that does not hash to its record's body_sha256: every version of its
// object deleted (by whoever holds s3:DeleteObjectVersion), or its key
// written over when its reference pins no version. A reference that pins
// its version reads that version, whatever was written over it since; one
// whose version is gone reads the key's current version, which must hold
// the same bytes, and verify notes it (a version deleted by hand). The
// bodies are read several at once, beside the scan: each problem stands
// where the scan met its record, as when read one at a time.
func TestVerifyReadsClaimCheckedBodiesAtOnceAsOneAtATime(t *testing.T) {
	l := newLedgerFixture(t)
	ctx := context.Background()
	body := func(s string) []byte { return bytes.Repeat([]byte(s), 300<<10) }
	var rs []*quarantine.Record
	for _, p := range []string{"a", "b", "c", "d", "e", "f"} {
		rs = append(rs, l.claimChecked(p, body(p), p != "c"))
	}
	// Records whose seals do not verify, between the others in the scan:
	// problems the scan names as it meets them (and the ledger again, as
	// rewritten in place).
	broken := l.unsealed("a0", "c0", "e0")
	l.drain()
	l.digest()
	bucket := aws.String(l.st.Names["PayloadBucket"])
	gone, overwritten, pinned, repinned := rs[1], rs[2], rs[4], rs[5]
	vs, err := l.st.Clients.S3.ListObjectVersions(ctx, &s3.ListObjectVersionsInput{Bucket: bucket, Prefix: aws.String(gone.BodyRef.Key)})
	if err != nil || len(vs.Versions) == 0 {
		t.Fatalf("versions of %s: %v %v", gone.BodyRef.Key, vs, err)
	}
	for _, v := range vs.Versions {
		if _, err := l.st.Clients.S3.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: bucket, Key: v.Key, VersionId: v.VersionId}); err != nil {
			t.Fatal(err)
		}
	}
	for _, r := range []*quarantine.Record{overwritten, pinned} {
		if _, err := l.st.Clients.S3.PutObject(ctx, &s3.PutObjectInput{Bucket: bucket, Key: aws.String(r.BodyRef.Key), Body: bytes.NewReader(body("x"))}); err != nil {
			t.Fatal(err)
		}
	}
	// Its pinned version deleted, the same bytes uploaded again: read from
	// the key's current version, not named, but noted.
	if _, err := l.st.Clients.S3.PutObject(ctx, &s3.PutObjectInput{Bucket: bucket, Key: aws.String(repinned.BodyRef.Key), Body: bytes.NewReader(body("f"))}); err != nil {
		t.Fatal(err)
	}
	if _, err := l.st.Clients.S3.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: bucket, Key: aws.String(repinned.BodyRef.Key), VersionId: aws.String(repinned.BodyRef.VersionID)}); err != nil {
		t.Fatal(err)
	}

	l.objectConcurrency = 1
	one, _, code := l.run(false, "verify")
	if code != dlqctl.ExitMismatch {
		t.Fatalf("exit %d:\n%s", code, one)
	}
	mustContain(t, one, "verified 9 records (0 archived stubs): 8 problems", "  MISMATCH "+gone.DLQID+": claim-check body: load body of "+gone.DLQID,
		"  MISMATCH "+overwritten.DLQID+": claim-check body: load body of "+overwritten.DLQID+": payload "+overwritten.BodyRef.Key+": "+quarantine.ErrPayloadMismatch.Error())
	for _, r := range []*quarantine.Record{rs[0], pinned, rs[3], repinned} {
		if strings.Contains(one, "MISMATCH "+r.DLQID) {
			t.Fatalf("%s named:\n%s", r.DLQID, one)
		}
	}
	mustContain(t, one, "  note: claim-check body "+repinned.BodyRef.Key+": the version it pins ("+repinned.BodyRef.VersionID+") is gone, and the key's current version holds its bytes")
	if n := strings.Count(one, "note: claim-check body "); n != 1 {
		t.Fatalf("%d bodies noted as read from their current version, want 1:\n%s", n, one)
	}
	mustNameInScanOrder(t, l, one, append(broken, gone.DLQID, overwritten.DLQID))
	// The same output but for S3's request ids.
	same := func(out string) string {
		return requestIDs.ReplaceAllString(signedAgo.ReplaceAllString(out, ""), "")
	}
	l.objectConcurrency = 0
	for range 3 {
		if many, _, _ := l.run(false, "verify"); same(many) != same(one) {
			t.Fatalf("at once:\n%s\none at a time:\n%s", many, one)
		}
	}
}

// requestIDs are the request and host ids of an S3 error.
var requestIDs = regexp.MustCompile(`RequestID: [^,]*, HostID: [^,]*,`)

package dlqctl_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/dlqquarantine/dlqq/internal/dlqctl"
	"github.com/dlqquarantine/dlqq/shared/domain/archive"
	"github.com/dlqquarantine/dlqq/shared/domain/ledger"
	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
	"github.com/dlqquarantine/dlqq/shared/usecase/sweeper"
)

// Object Lock keeps a locked version, not its key: a DELETE without a
// version id (a delete marker) and a plain PUT over the key (a second
// version) both hide the ledger's bytes from LIST and GET, on versitygw
// as on S3 (where only the bucket policy forbids them). Verify names each,
// on a segment and on a digest, and still checks the whole ledger with
// the locked first versions: the rewritten record is still named, no
// record becomes unledgered, the counts are unchanged. So does the
// offline copy, from its versions.jsonl.
func TestVerifyNamesDeleteMarkersAndSecondVersions(t *testing.T) {
	l := newLedgerFixture(t)
	ctx := context.Background()
	a := l.create("a")
	l.drain()
	l.digest()
	l.create("b")
	l.anchored("c")
	l.rewrite(a)
	l.drain()
	before, _, code := l.run(false, "verify")
	if code != dlqctl.ExitMismatch || !strings.Contains(before, "  MISMATCH "+a.DLQID+": rewritten: ") {
		t.Fatalf("before (exit %d):\n%s", code, before)
	}

	bucket := l.fns.LedgerConfig.Bucket
	s3c := l.st.Clients.S3
	var segs []string
	p := s3.NewListObjectsV2Paginator(s3c, &s3.ListObjectsV2Input{Bucket: aws.String(bucket), Prefix: aws.String(ledger.SegmentPrefix)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range page.Contents {
			segs = append(segs, aws.ToString(o.Key))
		}
	}
	slices.Sort(segs)
	if len(segs) != 3 {
		t.Fatalf("segments %v, want 3", segs)
	}
	hiddenSeg, overSeg := segs[0], segs[1]
	hiddenDigest, overDigest := ledger.DigestKey(1), ledger.DigestKey(2)
	for _, k := range []string{hiddenSeg, hiddenDigest} {
		if _, err := s3c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(bucket), Key: aws.String(k)}); err != nil {
			t.Fatalf("delete marker on %s: %v", k, err)
		}
	}
	for _, k := range []string{overSeg, overDigest} {
		if _, err := s3c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(k), Body: bytes.NewReader([]byte(`{"format":"forged"}`))}); err != nil {
			t.Fatalf("second version of %s: %v", k, err)
		}
	}
	out, _, code := l.run(false, "verify")
	if code != dlqctl.ExitMismatch {
		t.Fatalf("verify exit %d:\n%s", code, out)
	}
	// The same records and ledger as before, and four problems more.
	if want := strings.ReplaceAll(firstLines(before), ": 1 problem", ": 5 problems"); firstLines(out) != want {
		t.Fatalf("verify:\n%s\nwant it to begin\n%s", out, want)
	}
	mustContain(t, out,
		"  MISMATCH "+a.DLQID+": rewritten: ",
		"  MISMATCH "+hiddenSeg+": object-delete-marker: delete marker ",
		"  MISMATCH "+hiddenDigest+": object-delete-marker: delete marker ",
		"  MISMATCH "+overSeg+": object-second-version: 2 versions: ",
		"  MISMATCH "+overDigest+": object-second-version: 2 versions: ")
	if n := strings.Count(out, "  MISMATCH "); n != 5 || strings.Contains(out, "unledgered") {
		t.Fatalf("%d problems (want the rewrite and the four objects, nothing unledgered):\n%s", n, out)
	}
	js, _, _ := l.run(false, "verify", "-o", "json")
	mustContain(t, js, `"kind": "object-delete-marker"`, `"kind": "object-second-version"`)

	// The export holds the first versions and the listing; offline names
	// the same.
	dir := l.export()
	if b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(overDigest))); err != nil || bytes.Contains(b, []byte("forged")) {
		t.Fatalf("the export holds %s's second version (%v)", overDigest, err)
	}
	vs, err := os.ReadFile(filepath.Join(dir, dlqctl.ExportVersions))
	if err != nil || bytes.Count(vs, []byte("\n")) != 3+2+2+2 {
		t.Fatalf("%s (%v):\n%s", dlqctl.ExportVersions, err, vs)
	}
	off, code := l.offline(dir)
	if code != dlqctl.ExitMismatch || firstLines(off) != firstLines(out) {
		t.Fatalf("offline (exit %d):\n%s\nonline:\n%s", code, off, out)
	}
	mustContain(t, off, "  MISMATCH "+hiddenSeg+": object-delete-marker: ", "  MISMATCH "+overDigest+": object-second-version: ",
		"note: "+dlqctl.ExportVersions+" is the exporter's listing")
	// An export without the listing (an older one) says what it lacks.
	if err := os.Remove(filepath.Join(dir, dlqctl.ExportVersions)); err != nil {
		t.Fatal(err)
	}
	off, _ = l.offline(dir)
	mustContain(t, off, "note: no "+dlqctl.ExportVersions+": ")
	if strings.Contains(off, "object-delete-marker") {
		t.Fatalf("offline without a listing:\n%s", off)
	}
}

// The archive's kinds are the ledger's names for the same thing.
func TestArchiveVersionKindsAreTheLedgers(t *testing.T) {
	if archive.KindDeleteMarker != string(ledger.KindObjectDeleteMarker) || archive.KindSecondVersion != string(ledger.KindObjectSecondVersion) {
		t.Fatal("the archive and the ledger name version problems differently")
	}
}

// An archived stub's archive object behind a delete marker, or under a
// version put over it: verify names each for the record, and checks the
// stub against the key's first version (the sweeper's, locked), so the
// stub still verifies against it.
func TestVerifyNamesArchiveMarkersAndSecondVersions(t *testing.T) {
	l := newLedgerFixture(t)
	r := l.archived("arch")[0]
	out, errOut, code := l.run(false, "verify")
	if code != 0 || !strings.HasPrefix(out, "verified 1 record (1 archived stub): 0 problems\n") {
		t.Fatalf("verify (exit %d): %s%s", code, out, errOut)
	}
	stub := l.overArchive(r)
	out, _, code = l.run(false, "verify")
	if code != dlqctl.ExitMismatch {
		t.Fatalf("verify exit %d:\n%s", code, out)
	}
	mustContain(t, out, "verified 1 record (1 archived stub): 2 problems\n",
		"  MISMATCH "+r.DLQID+": object-second-version: archive object "+stub.Archive.Key+": 2 versions: ",
		"which is the one checked",
		"  MISMATCH "+r.DLQID+": object-delete-marker: archive object "+stub.Archive.Key+": delete marker ")
}

// archived creates a record of each prefix, parks it and sweeps it into
// the archive, ledgered and anchored.
func (l *ledgerFixture) archived(prefixes ...string) []*quarantine.Record {
	l.t.Helper()
	return l.archivedFor(0, prefixes...)
}

// archivedFor is archived with the sweeper's retention (0: its default).
func (l *ledgerFixture) archivedFor(retention time.Duration, prefixes ...string) []*quarantine.Record {
	l.t.Helper()
	var rs []*quarantine.Record
	for _, p := range prefixes {
		rs = append(rs, l.next(l.create(p), park))
	}
	sw, err := l.fns.NewSweeper(l.st.Clients, func(c *sweeper.Config) {
		c.ParkAge = 0
		if retention > 0 {
			c.Retention = retention
		}
	})
	if err != nil {
		l.t.Fatal(err)
	}
	if rep, err := sw.Run(context.Background()); err != nil || len(rep.Archived) != len(rs) {
		l.t.Fatalf("sweep: %+v %v", rep, err)
	}
	l.drain()
	l.digest()
	return rs
}

// overArchive puts a version over r's archive object and a delete marker
// on it, and returns r's stub.
func (l *ledgerFixture) overArchive(r *quarantine.Record) *quarantine.Record {
	l.t.Helper()
	ctx := context.Background()
	stub, err := l.store.Get(ctx, r.DLQID)
	if err != nil || stub.Archive == nil {
		l.t.Fatalf("stub %+v %v", stub, err)
	}
	bucket, key := aws.String(stub.Archive.Bucket), aws.String(stub.Archive.Key)
	if _, err := l.st.Clients.S3.PutObject(ctx, &s3.PutObjectInput{Bucket: bucket, Key: key, Body: bytes.NewReader([]byte(`{"record":{}}`))}); err != nil {
		l.t.Fatal(err)
	}
	if _, err := l.st.Clients.S3.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: bucket, Key: key}); err != nil {
		l.t.Fatal(err)
	}
	return stub
}

// An archived stub's object an earlier verify read and found whole is not
// read again while its key's first version is the same: the key's
// versions are still listed, so a version put over it or a delete marker
// is named as a whole run names it. From a day before the stub's
// retain-until date (a lapsed retention may be changed) it is read again.
// (In this file, not checkpoint_test.go: a sweep publishes account-wide
// metrics to the process's CloudWatch, which health_test.go, run between
// the two, wants empty.)
func TestVerifyFromACheckpointListsButDoesNotReadAProvenArchiveObject(t *testing.T) {
	l := newLedgerFixture(t)
	r := l.archived("arch", "arch")[0] // the first proven object of a run is read all the same
	key := filepath.Join(t.TempDir(), "key")
	if err := dlqctl.WriteCheckpointKey(key); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "checkpoint")
	if out, code, _ := l.checkpointed(dir, key); code != 0 || !strings.HasPrefix(out, "verified 2 records (2 archived stubs): 0 problems\n") {
		t.Fatalf("first run: exit %d\n%s", code, out)
	}
	if _, code, rep := l.checkpointed(dir, key); code != 0 || rep.ArchivedObjectsSkipped != 1 {
		t.Fatalf("again: exit %d, %+v", code, rep)
	}
	stub := l.overArchive(r)
	whole, _, code := l.run(false, "verify")
	if code != dlqctl.ExitMismatch {
		t.Fatalf("whole run: exit %d\n%s", code, whole)
	}
	mustContain(t, whole, "object-second-version", "object-delete-marker")
	got, _, rep := l.checkpointed(dir, key)
	if sameRun(got) != sameRun(whole) || rep.ArchivedObjectsSkipped != 1 {
		t.Fatalf("from the checkpoint %+v:\n%s\nwhole:\n%s", rep, got, whole)
	}

	// A day before the stub's retain-until date, the object is read.
	l.now = func() time.Time { return stub.Archive.RetainUntil.Add(-stubMargin) }
	whole, _, _ = l.run(false, "verify")
	got, _, rep = l.checkpointed(dir, key)
	if sameRun(got) != sameRun(whole) || rep.ArchivedObjectsSkipped != 0 || rep.ChecksSkipped == 0 {
		t.Fatalf("near its retain-until date %+v:\n%s\nwhole:\n%s", rep, got, whole)
	}
}

// stubMargin is how long before a stub's retain-until date its proof
// stops being used (dlqctl's stubProofMargin).
const stubMargin = 24 * time.Hour

// Archived stubs are checked against their objects several at once, and
// each one's problems are reported where the scan met it: the output is
// the same as one at a time.
func TestVerifyChecksArchivedStubsAtOnceAsOneAtATime(t *testing.T) {
	l := newLedgerFixture(t)
	rs := l.archived("a", "b", "c", "d", "e", "f")
	l.overArchive(rs[1])
	l.overArchive(rs[4])
	// Records whose seals do not verify: problems the scan names as it
	// meets them, between the stubs'.
	broken := l.unsealed("a0", "c0", "e0")
	l.objectConcurrency = 1
	one, _, code := l.run(false, "verify")
	if code != dlqctl.ExitMismatch {
		t.Fatalf("exit %d:\n%s", code, one)
	}
	mustContain(t, one, "verified 9 records (6 archived stubs): ", "  MISMATCH "+rs[1].DLQID+": object-second-version", "  MISMATCH "+rs[4].DLQID+": object-delete-marker")
	mustNameInScanOrder(t, l, one, append(broken, rs[1].DLQID, rs[4].DLQID))
	l.objectConcurrency = 0
	for range 3 {
		if many, _, _ := l.run(false, "verify"); signedAgo.ReplaceAllString(many, "") != signedAgo.ReplaceAllString(one, "") {
			t.Fatalf("at once:\n%s\none at a time:\n%s", many, one)
		}
	}
}

// The day before a stub's retain-until date is judged by the auditor's
// clock, or by the newest signed digest's time when that is later: a
// clock that lags keeps no proof past its margin.
func TestVerifyFromACheckpointJudgesRetentionByTheNewestDigestToo(t *testing.T) {
	l := newLedgerFixture(t)
	l.archivedFor(24*time.Hour, "arch", "arch") // retained until a day after the sweep
	key := filepath.Join(t.TempDir(), "key")
	if err := dlqctl.WriteCheckpointKey(key); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "checkpoint")
	l.now = func() time.Time { return time.Now().Add(-10 * 24 * time.Hour) } // by it, the margin is far off
	l.checkpointed(dir, key)
	if _, _, rep := l.checkpointed(dir, key); rep.ArchivedObjectsSkipped != 0 {
		t.Fatalf("a proof used past the margin by the newest digest's time: %+v", rep)
	}
}

// unsealed writes records (ids after each prefix) whose seals do not
// verify, and returns their ids.
func (l *ledgerFixture) unsealed(prefixes ...string) []string {
	l.t.Helper()
	var ids []string
	for _, p := range prefixes {
		r := *l.create(p)
		r.FailureReason = "not sealed so"
		l.put(&r)
		ids = append(ids, r.DLQID)
	}
	return ids
}

// mustNameInScanOrder fails unless verify's output out names ids in its
// MISMATCH lines in the order a scan meets them (the ledger's rewritten
// problems, which follow, aside).
func mustNameInScanOrder(t *testing.T, l *ledgerFixture, out string, ids []string) {
	t.Helper()
	var want, got []string
	for _, id := range scanOrder(t, l) {
		if slices.Contains(ids, id) {
			want = append(want, id)
		}
	}
	for _, line := range strings.Split(out, "\n") {
		id, what, ok := strings.Cut(strings.TrimPrefix(line, "  MISMATCH "), ": ")
		if ok && strings.HasPrefix(line, "  MISMATCH ") && slices.Contains(ids, id) && !slices.Contains(got, id) && !strings.HasPrefix(what, "rewritten") {
			got = append(got, id)
		}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("problems in the order %v, the scan's is %v:\n%s", got, want, out)
	}
}

// scanOrder is the table's keys in the order a scan reads them.
func scanOrder(t *testing.T, l *ledgerFixture) []string {
	t.Helper()
	var ids []string
	pages := dynamodb.NewScanPaginator(l.st.Clients.DynamoDB, &dynamodb.ScanInput{TableName: aws.String(l.table), ConsistentRead: aws.Bool(true)})
	for pages.HasMorePages() {
		page, err := pages.NextPage(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range page.Items {
			if k, ok := it["dlq_id"].(*ddbtypes.AttributeValueMemberS); ok {
				ids = append(ids, k.Value)
			}
		}
	}
	return ids
}

package dlqctl

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/dlqquarantine/dlqq/shared/adapter/s3store"
	"github.com/dlqquarantine/dlqq/shared/domain/ledger"
	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
)

// A checkpoint's copies: one of a version id S3 gave is read from the
// checkpoint by the next run; one without ("" or "null": a bucket without
// versioning, whose key may be written over in place) never is; a copy
// changed after it was read fails the segment's read; and the proofs'
// scope changes with the writer keys.
func TestCheckpointCopies(t *testing.T) {
	dir, key := t.TempDir(), newCheckpointKey(t)
	open := func() *checkpoint {
		t.Helper()
		cp := openTestCheckpoint(t, dir, key)
		cp.sample = "" // no object read at random
		return cp
	}
	cp := open()
	for _, v := range []string{"v1", "", "null"} {
		if cp.put("ledger/segments/s/"+v, v, []byte("bytes of "+v)) == "" {
			t.Fatal(cp.failed)
		}
	}
	if written, err := cp.commit(time.Now()); !written || err != nil {
		t.Fatal(written, err)
	}
	cp.close()
	cp = open()
	defer cp.close()
	for v, want := range map[string]bool{"v1": true, "": false, "null": false} {
		if _, _, ok := cp.get("ledger/segments/s/"+v, v); ok != want {
			t.Errorf("version id %q: from the checkpoint %v, want %v", v, ok, want)
		}
	}
	if _, _, ok := cp.get("ledger/segments/s/v1", "v2"); ok {
		t.Error("another version id read from the copy")
	}
	cp.resample = 1 // every object read all the same
	if _, _, ok := cp.get("ledger/segments/s/v1", "v1"); ok {
		t.Error("an object read from its copy when the run reads every one again")
	}
	cp.resample = 0
	b, name, ok := cp.get("ledger/segments/s/v1", "v1")
	if !ok {
		t.Fatal("no copy")
	}
	segs := &segmentFiles{path: map[string]string{}, copies: map[string]checkpointObject{}, cp: cp}
	if err := segs.put("ledger/segments/s/v1", b, name); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name), []byte("bytes of v2"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := segs.read("ledger/segments/s/v1"); err == nil || !strings.Contains(err.Error(), "changed while verify ran") {
		t.Fatalf("a copy changed since it was read: %v", err)
	}

	one, err := proofScope(map[string]string{"arn:a": "ingest"})
	if err != nil {
		t.Fatal(err)
	}
	other, err := proofScope(map[string]string{"arn:b": "ingest"})
	if err != nil || one == other {
		t.Fatalf("the scope does not change with the writer keys: %v", err)
	}
	if proofScopeUnder([]byte("k1"), one) == proofScopeUnder([]byte("k2"), one) {
		t.Fatal("the scope does not change with the checkpoint's key")
	}
}

// An archived stub's proof: bound to the stub as it is and to its key's
// first version; the first proven object of a run is read all the same
// and its proof kept only if it passes again (a read that fails drops
// it); none is used from a day before the stub's retain-until date, by
// the auditor's clock or the newest signed digest's, whichever is later.
func TestStubProofs(t *testing.T) {
	now := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	stub := &quarantine.Record{DLQID: "orders#o1", Status: quarantine.StatusArchived, Version: 3,
		Archive: &quarantine.ArchiveRef{Bucket: "b", Key: "archive/k", VersionID: "v1", RetainUntil: quarantine.At(now.Add(10 * 24 * time.Hour))}}
	newStubs := func(known []ledger.ProofKey) (stubProofs, *ledger.Proofs) {
		p := ledger.NewProofs("scope", known)
		cp := &checkpoint{}
		return stubProofs{p: p, cp: cp, clock: func() time.Time { return now }, floor: &atomic.Pointer[time.Time]{}, reused: &atomic.Int64{}, sampled: &atomic.Bool{}}, p
	}
	s, p := newStubs(nil)
	s.Passed(stub, "v1")
	known := p.Proven()
	if len(known) != 1 {
		t.Fatalf("%d proofs", len(known))
	}
	s, p = newStubs(known)
	if s.Known(stub, "v1") {
		t.Fatal("the run's first proven object not read")
	}
	if len(p.Proven()) != 0 {
		t.Fatal("the proof of an object read again kept before its check passed")
	}
	if !s.Known(stub, "v1") || len(p.Proven()) != 1 || s.reused.Load() != 1 {
		t.Fatalf("the second: proofs %d, reused %d", len(p.Proven()), s.reused.Load())
	}
	s.cp.resample = 1 // every proven object read all the same
	if s.Known(stub, "v1") {
		t.Fatal("proven when the run reads every object again")
	}
	s.cp.resample = 0
	other := *stub
	other.Version = 4
	for name, ok := range map[string]bool{
		"another first version": s.Known(stub, "v2"),
		"another stub":          s.Known(&other, "v1"),
	} {
		if ok {
			t.Errorf("%s: proven", name)
		}
	}
	s.clock = func() time.Time { return stub.Archive.RetainUntil.Add(-stubProofMargin) }
	if s.Known(stub, "v1") {
		t.Error("proven a day before its retain-until date")
	}
	s.clock = func() time.Time { return now }
	late := stub.Archive.RetainUntil.Time
	s.floor.Store(&late)
	if s.Known(stub, "v1") {
		t.Error("proven by a clock behind the newest signed digest")
	}
}

// A copy the checkpoint cannot take (DIR full, say) fails the checkpoint,
// not the run: put says so, and commit writes no manifest.
func TestACopyNotTakenFailsTheCheckpointOnly(t *testing.T) {
	dir := t.TempDir()
	cp := fullCheckpoint(t, dir)
	if name := cp.put("ledger/segments/s/1", "v1", []byte("x")); name != "" || cp.failed == nil {
		t.Fatalf("put: %q %v", name, cp.failed)
	}
	// No more copies once one failed.
	if name := cp.put("ledger/segments/s/2", "v1", []byte("y")); name != "" {
		t.Fatalf("a copy after one failed: %q", name)
	}
	if ents, err := os.ReadDir(filepath.Join(dir, "objects")); err != nil || len(ents) != 1 {
		t.Fatalf("objects: %v %v", ents, err)
	}
	if written, err := cp.commit(time.Now()); written || err == nil {
		t.Fatalf("commit: %v %v", written, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "checkpoint")); err == nil {
		t.Fatal("a manifest written")
	}
	res := newVerifyResult()
	res.addCheckpoint(cp, time.Now())
	if !strings.Contains(strings.Join(res.Notes, "\n"), "checkpoint "+dir+": not written (the next verify starts from the one before): copying ledger/segments/s/1: ") {
		t.Fatalf("notes: %q", res.Notes)
	}
}

// oneObject answers GetObject with the same bytes.
type oneObject struct{ s3store.VersionsAPI }

func (oneObject) GetObject(context.Context, *s3.GetObjectInput, ...func(*s3.Options)) (*s3.GetObjectOutput, error) {
	return &s3.GetObjectOutput{Body: io.NopCloser(strings.NewReader("segment bytes"))}, nil
}

// An object whose copy the checkpoint cannot take is still read, and
// checked from the spill directory, as without a checkpoint.
func TestReadOneWithoutACopy(t *testing.T) {
	cp := fullCheckpoint(t, t.TempDir())
	segs, err := newSegmentFiles(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	segs.cp = cp
	if err := readOne(context.Background(), s3store.ObjectVersions{API: oneObject{}, Bucket: "bucket"}, cp, "ledger/segments/s/1", "v1", segs.put); err != nil {
		t.Fatalf("readOne: %v", err)
	}
	if b, err := segs.read("ledger/segments/s/1"); err != nil || string(b) != "segment bytes" || cp.failed == nil {
		t.Fatalf("read back: %q %v; the checkpoint failed: %v", b, err, cp.failed)
	}
}

// newCheckpointKey writes a checkpoint key to a new file.
func newCheckpointKey(t *testing.T) string {
	t.Helper()
	key := filepath.Join(t.TempDir(), "key")
	if err := WriteCheckpointKey(key); err != nil {
		t.Fatal(err)
	}
	return key
}

// openTestCheckpoint opens the checkpoint in dir under key, for bucket
// "bucket" and scope "scope", with no object read again by chance.
func openTestCheckpoint(t *testing.T, dir, key string) *checkpoint {
	t.Helper()
	cp, err := openCheckpoint(dir, key, "bucket", "scope", time.Now, 0)
	if err != nil {
		t.Fatal(err)
	}
	return cp
}

// fullCheckpoint is a new checkpoint in dir that cannot take its next
// copy (the copy's name is taken, as by a disk that is full), closed when
// the test ends.
func fullCheckpoint(t *testing.T, dir string) *checkpoint {
	t.Helper()
	cp := openTestCheckpoint(t, dir, newCheckpointKey(t))
	t.Cleanup(cp.close)
	if err := cp.root.Mkdir("objects/00000000", 0o700); err != nil {
		t.Fatal(err)
	}
	return cp
}

// A writer MAC's proof: only a MAC KMS said is valid becomes one; with
// every proven MAC read again at random (resample 1), none is spared;
// without the checkpoint's proofs, every MAC is asked.
func TestWriterMACProofs(t *testing.T) {
	var asked atomic.Int64
	kms := func(_ context.Context, _ string, msg, _ []byte) (bool, error) {
		asked.Add(1)
		return string(msg) != "forged", nil
	}
	run := func(cp *checkpoint, msgs ...string) (int64, int64) {
		t.Helper()
		asked.Store(0)
		m := &macCache{verify: kms}
		m.useProofs(cp)
		for _, msg := range msgs {
			for range 2 { // the versions of one batch share its MAC
				if ok, err := m.Verify(context.Background(), "arn:k", []byte(msg), []byte("mac")); err != nil || ok != (msg != "forged") {
					t.Fatalf("%s: %v %v", msg, ok, err)
				}
			}
		}
		return asked.Load(), m.skippedCount()
	}
	if n, skipped := run(nil, "a", "b"); n != 2 || skipped != 0 {
		t.Fatalf("without a checkpoint: %d asked, %d skipped", n, skipped)
	}
	cp := openTestCheckpoint(t, t.TempDir(), newCheckpointKey(t))
	defer cp.close()
	if n, _ := run(cp, "a", "b", "c", "forged"); n != 4 {
		t.Fatalf("first run: %d asked", n)
	}
	cp.proofs = ledger.NewProofs(cp.next.Scope, cp.proofs.Proven())
	if n, skipped := run(cp, "a", "b", "c", "forged"); n != 2 || skipped != 2 {
		t.Fatalf("from the proofs: %d asked, %d skipped; want the key's first and the forged one", n, skipped)
	}
	cp.resample = 1
	if n, skipped := run(cp, "a", "b", "c"); n != 3 || skipped != 0 {
		t.Fatalf("each read again: %d asked, %d skipped", n, skipped)
	}
}

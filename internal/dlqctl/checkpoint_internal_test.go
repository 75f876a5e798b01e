package dlqctl

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A checkpoint's copies: one of a version id S3 gave is read from the
// checkpoint by the next run; one without ("" or "null": a bucket without
// versioning, whose key may be written over in place) never is; a copy
// changed after it was read fails the segment's read; and the proofs'
// scope changes with the writer keys.
func TestCheckpointCopies(t *testing.T) {
	dir, key := t.TempDir(), filepath.Join(t.TempDir(), "key")
	if err := WriteCheckpointKey(key); err != nil {
		t.Fatal(err)
	}
	open := func() *checkpoint {
		t.Helper()
		cp, err := openCheckpoint(dir, key, "bucket", "scope", time.Now)
		if err != nil {
			t.Fatal(err)
		}
		cp.sample = map[string]bool{} // no object read at random
		return cp
	}
	cp := open()
	for _, v := range []string{"v1", "", "null"} {
		if _, err := cp.put("ledger/segments/s/"+v, v, []byte("bytes of "+v)); err != nil {
			t.Fatal(err)
		}
	}
	if err := cp.commit(time.Now()); err != nil {
		t.Fatal(err)
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

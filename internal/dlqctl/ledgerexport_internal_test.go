package dlqctl

import (
	"os"
	"path/filepath"
	"testing"
)

// An export writes each object to a new file at its key's own path: a key
// that is not a clean relative path (two keys could share its file) or a
// file already there is refused, never overwritten.
func TestWriteExportObjectRefuses(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := writeExportObject(dir, "ledger/segments/s/1.json", []byte("a")); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{
		"ledger/segments/s/1.json", // there already
		"ledger/segments/s/./1.json", "ledger/segments//s/1.json", "ledger/segments/s/../1.json",
		"/etc/passwd", "ledger/segments/s/", "", ".",
	} {
		if err := writeExportObject(dir, key, []byte("b")); err == nil {
			t.Errorf("key %q written", key)
		}
	}
	if b, err := os.ReadFile(filepath.Join(dir, "ledger/segments/s/1.json")); err != nil || string(b) != "a" {
		t.Fatalf("the first file: %q, %v", b, err)
	}
}

// A failed export leaves no part of the copy: the directory it made goes,
// one it was given empty is emptied.
func TestRemoveExportLeavesNothing(t *testing.T) {
	t.Parallel()
	for _, made := range []bool{true, false} {
		dir := filepath.Join(t.TempDir(), "copy")
		if err := writeExportObject(dir, "ledger/segments/s/1.json", []byte("a")); err != nil {
			t.Fatal(err)
		}
		removeExport(dir, made)
		ents, err := os.ReadDir(dir)
		switch {
		case made && !os.IsNotExist(err):
			t.Errorf("made: %v, %d entries", err, len(ents))
		case !made && (err != nil || len(ents) != 0):
			t.Errorf("given: %v, %d entries", err, len(ents))
		}
	}
}

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// -dir and -data may not overlap, whichever holds the other, however the
// paths are written (relative, through a symlink, not made yet); `dlqlocal
// local` refuses them with a usage error before anything starts, and
// nothing in -data is touched.
func TestLocalRefusesOverlappingDirAndData(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	data := filepath.Join(root, "data")
	if err := os.MkdirAll(data, 0o700); err != nil {
		t.Fatal(err)
	}
	kept := filepath.Join(data, "kumo-state")
	if err := os.WriteFile(kept, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(root, "link")
	if err := os.Symlink(data, link); err != nil {
		t.Fatal(err)
	}
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	rel, err := filepath.Rel(wd, data)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ dir, data string }{
		{root, data},                           // -data inside -dir
		{filepath.Join(data, "run"), data},     // -dir inside -data
		{data, data},                           // the same
		{filepath.Join(link, "run"), data},     // through a symlink
		{root, filepath.Join(link, "not-yet")}, // a -data not made yet, inside -dir
		{rel + "/../data", data},               // relative
	} {
		var out, errw strings.Builder
		if code := run([]string{"local", "-dir", c.dir, "-data", c.data}, &out, &errw); code != 2 || !strings.Contains(errw.String(), "overlap") {
			t.Errorf("-dir %s -data %s: exit %d, stderr %q", c.dir, c.data, code, errw.String())
		}
	}
	if _, err := os.Stat(kept); err != nil {
		t.Fatalf("the kept state is gone: %v", err)
	}
	for _, c := range []struct{ dir, data string }{
		{filepath.Join(root, "dir"), data},
		{filepath.Join(root, "data-run"), data}, // a shared prefix is not inside
		{filepath.Join(root, "dir"), ""},
	} {
		if err := checkDirs(c.dir, c.data); err != nil {
			t.Errorf("-dir %s -data %s refused: %v", c.dir, c.data, err)
		}
	}
}

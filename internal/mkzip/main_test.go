package main

import (
	"archive/zip"
	"io"
	"os"
	"path/filepath"
	"testing"
)

// The package holds bootstrap and config/ beside it, as Lambda unpacks
// it into LAMBDA_TASK_ROOT: the functions read config/sources.json and
// the schema files there.
func TestZipHoldsBootstrapAndConfig(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	for name, body := range map[string]string{
		"bootstrap":                     "\x7fELF",
		"config/sources.json":           "{}\n",
		"config/schemas/orders.v2.json": `{"type":"object"}`,
	} {
		if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(name, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := write("f.zip", "bootstrap", "config"); err != nil {
		t.Fatal(err)
	}
	zr, err := zip.OpenReader("f.zip")
	if err != nil {
		t.Fatal(err)
	}
	defer zr.Close()
	got := map[string]string{}
	for _, f := range zr.File {
		rc, err := f.Open()
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(rc)
		rc.Close()
		got[f.Name] = f.Mode().String() + " " + string(b)
	}
	want := map[string]string{
		"bootstrap":                     "-rwxr-xr-x \x7fELF",
		"config/schemas/orders.v2.json": `-rw-r--r-- {"type":"object"}`,
		"config/sources.json":           "-rw-r--r-- {}\n",
	}
	if len(got) != len(want) {
		t.Fatalf("zip holds %q, want %q", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: %q, want %q", k, got[k], v)
		}
	}
	if err := write("g.zip", "bootstrap", "/etc"); err == nil {
		t.Error("an absolute directory was added")
	}
}

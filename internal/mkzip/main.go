// Command mkzip writes a Lambda deployment zip holding one executable named
// bootstrap and, beside it, the files of each directory named (config/: the
// sources file and schema files the functions read from their package
// root), so `make build` needs nothing but Go.
//
//	go run ./internal/mkzip OUT.zip BOOTSTRAP [DIR...]
package main

import (
	"archive/zip"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
)

func main() {
	if len(os.Args) < 3 {
		fmt.Fprintln(os.Stderr, "usage: mkzip OUT.zip BOOTSTRAP [DIR...]")
		os.Exit(2)
	}
	if err := write(os.Args[1], os.Args[2], os.Args[3:]...); err != nil {
		fmt.Fprintln(os.Stderr, "mkzip:", err)
		os.Exit(1)
	}
}

// write writes out: bootstrap as "bootstrap" (mode 0755), then every
// regular file under each of dirs by its path as given, relative
// ("config/sources.json", mode 0644), in lexical order.
func write(out, bootstrap string, dirs ...string) (err error) {
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}()
	zw := zip.NewWriter(f)
	if err := add(zw, bootstrap, "bootstrap", 0o755); err != nil {
		return err
	}
	for _, dir := range dirs {
		if filepath.IsAbs(dir) || strings.HasPrefix(filepath.Clean(dir), "..") {
			return fmt.Errorf("%s: a directory is added by its relative path inside the package", dir)
		}
		err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			switch {
			case err != nil:
				return err
			case d.IsDir():
				return nil
			case !d.Type().IsRegular():
				return fmt.Errorf("%s: not a regular file", path)
			}
			return add(zw, path, filepath.ToSlash(path), 0o644)
		})
		if err != nil {
			return err
		}
	}
	return zw.Close()
}

func add(zw *zip.Writer, path, name string, mode os.FileMode) error {
	in, err := os.Open(path)
	if err != nil {
		return err
	}
	defer in.Close()
	h := &zip.FileHeader{Name: name, Method: zip.Deflate, Modified: time.Unix(0, 0).UTC()}
	h.SetMode(mode)
	w, err := zw.CreateHeader(h)
	if err != nil {
		return err
	}
	_, err = io.Copy(w, in)
	return err
}

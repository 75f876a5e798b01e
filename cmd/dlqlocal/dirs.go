package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// checkDirs refuses a -dir and a -data of which either is inside the other
// (or both are one directory): a new run empties -dir, which would delete
// the state -data keeps, and -data inside -dir would be emptied with it.
// Both are compared absolute, with symlinks resolved as far as they exist.
func checkDirs(dir, data string) error {
	if data == "" {
		return nil
	}
	d, err := resolved(dir)
	if err != nil {
		return fmt.Errorf("-dir %s: %w", dir, err)
	}
	k, err := resolved(data)
	if err != nil {
		return fmt.Errorf("-data %s: %w", data, err)
	}
	if within(k, d) || within(d, k) {
		return fmt.Errorf("-dir %s and -data %s overlap (%s, %s): each start empties -dir, which must not hold the kept state nor be inside it; name two separate directories", dir, data, d, k)
	}
	return nil
}

// resolved is p absolute with the symlinks of its longest existing prefix
// resolved; the part that does not exist yet is appended as written.
func resolved(p string) (string, error) {
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", err
	}
	rest := ""
	for cur := abs; ; {
		r, err := filepath.EvalSymlinks(cur)
		if err == nil {
			return filepath.Join(r, rest), nil
		}
		if !errors.Is(err, os.ErrNotExist) {
			return "", err
		}
		parent := filepath.Dir(cur)
		if parent == cur {
			return abs, nil
		}
		rest = filepath.Join(filepath.Base(cur), rest)
		cur = parent
	}
}

// within says whether p is base or inside it (both clean and absolute).
func within(p, base string) bool {
	rel, err := filepath.Rel(base, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

package dlqctl

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/dlqquarantine/dlqq/shared/domain/ledger"
)

// ExportVersions is DIR/versions.jsonl: every version and delete marker
// the export listed under ledger/ (one ledger.ObjectVersion a line). The
// export holds each key's first version; verify --offline names the
// markers and second versions this file records. It is unsigned: it is
// only as good as whoever exported.
const ExportVersions = "versions.jsonl"

// writeVersionsExport writes vs to DIR/versions.jsonl.
func writeVersionsExport(dir string, vs []ledger.ObjectVersion) error {
	var b []byte
	for _, v := range vs {
		line, err := json.Marshal(v)
		if err != nil {
			return fmt.Errorf("%s: %w", ExportVersions, err)
		}
		b = append(append(b, line...), '\n')
	}
	return os.WriteFile(filepath.Join(dir, ExportVersions), b, 0o600)
}

// readVersionsExport reads DIR/versions.jsonl, and the note that says
// what it is worth (or that an older export has none).
func readVersionsExport(dir string) ([]ledger.ObjectVersion, string, error) {
	path := filepath.Join(dir, ExportVersions)
	raw, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Sprintf("no %s: the copy does not say which versions and delete markers the bucket held under ledger/ (list them with ListObjectVersions)", ExportVersions), nil
	}
	if err != nil {
		return nil, "", fmt.Errorf("offline ledger copy: %w", err)
	}
	var vs []ledger.ObjectVersion
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(make([]byte, 0, 64<<10), maxItemLine)
	for n := 1; sc.Scan(); n++ {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		var v ledger.ObjectVersion
		if err := json.Unmarshal(line, &v); err != nil || v.Key == "" {
			return nil, "", fmt.Errorf("%s line %d: not an object version (key, version_id, last_modified): %v", path, n, err)
		}
		vs = append(vs, v)
	}
	if err := sc.Err(); err != nil {
		return nil, "", fmt.Errorf("%s: %w", path, err)
	}
	return vs, fmt.Sprintf("%s is the exporter's listing of the bucket's versions, unsigned: a delete marker or second version it leaves out is not named here (re-list the bucket with ListObjectVersions to trust it)", ExportVersions), nil
}

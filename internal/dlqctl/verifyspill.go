package dlqctl

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync"

	"github.com/dlqquarantine/dlqq/shared/domain/ledger"
)

// What verify holds in memory does not grow with the ledger: each segment
// it reads goes to a file of its own, each ledgered item of the table to a
// line of a file, under a directory of the system's temporary directory
// (TMPDIR) that verify removes when it ends; ledger.Verify reads them back
// one at a time and checks the keys in partitions
// (ledger.PartitionsFor). Digests, baselines, the bucket's version listing
// and the table's other items (counters, checkpoints, source markers: a
// few per source and hour) stay in memory.

// segmentFiles are the ledger's segments, each in a file.
type segmentFiles struct {
	dir   string
	mu    sync.Mutex
	path  map[string]string
	bytes int64
	// cp is verify's checkpoint (nil: none); copies are the segments read
	// from, or copied into, it: read from there, and still hashing as
	// they did.
	cp     *checkpoint
	copies map[string]checkpointObject
}

func newSegmentFiles(dir string) (*segmentFiles, error) {
	d := filepath.Join(dir, "segments")
	if err := os.Mkdir(d, 0o700); err != nil {
		return nil, err
	}
	return &segmentFiles{dir: d, path: map[string]string{}, copies: map[string]checkpointObject{}}, nil
}

// put writes a segment's bytes (goroutine-safe). The file is named by a
// number, never by the object's key, which whoever can write the bucket
// chooses. A segment that is in the checkpoint (its copy's name given)
// is read from there.
func (s *segmentFiles) put(key string, b []byte, name string) error {
	s.mu.Lock()
	if _, dup := s.path[key]; dup {
		s.mu.Unlock()
		return fmt.Errorf("segment %s read twice", key)
	}
	s.bytes += int64(len(b))
	if name != "" {
		s.path[key] = name
		s.copies[key] = checkpointObject{SHA256: ledger.SHA256Hex(b), Size: int64(len(b)), File: name}
		s.mu.Unlock()
		return nil
	}
	p := filepath.Join(s.dir, fmt.Sprintf("%08d", len(s.path)))
	s.path[key] = p
	s.mu.Unlock()
	return os.WriteFile(p, b, 0o600)
}

// keys are the segments' keys, sorted.
func (s *segmentFiles) keys() []string { return slices.Sorted(maps.Keys(s.path)) }

// read returns a segment's bytes.
func (s *segmentFiles) read(key string) ([]byte, error) {
	s.mu.Lock()
	p, ok := s.path[key]
	c, copied := s.copies[key]
	s.mu.Unlock()
	switch {
	case !ok:
		return nil, fmt.Errorf("no segment %s", key)
	case copied:
		b, err := s.cp.readCopy(c.File, c.SHA256, c.Size)
		if err != nil {
			return nil, fmt.Errorf("segment %s: %w", key, err)
		}
		return b, nil
	}
	return os.ReadFile(p)
}

// tableFile is the table's items as verify keeps them: the ledgered ones
// (records, policies, approvals) a line each in a file, the others in
// memory.
type tableFile struct {
	f      *os.File
	w      *bufio.Writer
	bytes  int64
	others []ledger.Item
}

func newTableFile(dir string) (*tableFile, error) {
	f, err := os.OpenFile(filepath.Join(dir, "table.jsonl"), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, err
	}
	return &tableFile{f: f, w: bufio.NewWriterSize(f, 1<<16)}, nil
}

// add keeps one item of the scan.
func (t *tableFile) add(it ledger.Item) error {
	if !ledger.Ledgered(it.S(ledger.KeyAttr)) {
		t.others = append(t.others, it)
		return nil
	}
	line, err := json.Marshal(it)
	if err != nil {
		return fmt.Errorf("item %s: %w", it.S(ledger.KeyAttr), err)
	}
	t.bytes += int64(len(line)) + 1
	if _, err := t.w.Write(append(line, '\n')); err != nil {
		return err
	}
	return nil
}

// scan calls yield with each ledgered item (ledger.Input.ScanItems).
func (t *tableFile) scan(yield func(ledger.Item) error) error {
	if err := t.w.Flush(); err != nil {
		return err
	}
	if _, err := t.f.Seek(0, 0); err != nil {
		return err
	}
	return scanLines(t.f, func(line []byte, _ int) error {
		it, err := ledger.ParseItem(line)
		if err != nil {
			return err
		}
		return yield(it)
	})
}

func (t *tableFile) close() { _ = t.f.Close() }

// scanLines calls each with every non-empty line of f, up to maxItemLine
// bytes long, and its number; an error names the file and the line.
func scanLines(f *os.File, each func(line []byte, n int) error) error {
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), maxItemLine)
	for n := 1; sc.Scan(); n++ {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		if err := each(line, n); err != nil {
			return fmt.Errorf("%s line %d: %w", f.Name(), n, err)
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("%s: %w", f.Name(), err)
	}
	return nil
}

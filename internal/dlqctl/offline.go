package dlqctl

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/dlqquarantine/dlqq/shared/adapter/dynamostore"
	"github.com/dlqquarantine/dlqq/shared/domain/ledger"
)

// The layout of an export (dlqctl ledger export, verify --offline).
const (
	ExportTable     = "table.jsonl"
	ExportPublicKey = "public-key.der"
	ExportInfoFile  = "export.json"
)

// maxItemLine bounds one line of table.jsonl: a DynamoDB item is at most
// 400 KB, its JSON (base64 binary) somewhat more.
const maxItemLine = 4 << 20

// verifyOffline runs verify on an export directory and a public key
// file: no AWS call at all.
func (a *App) verifyOffline(_ context.Context, o VerifyOptions, ev evidence) error {
	switch {
	case o.Offline == "":
		return &UsageError{errors.New("--public-key goes with --offline DIR")}
	case o.PublicKey == "":
		return &UsageError{errors.New("--offline needs --public-key FILE (the signing key's DER public key, from GetPublicKey or public-key.der of the export, obtained on its own path)")}
	case o.NoLedger:
		return &UsageError{errors.New("--offline checks the ledger: --no-ledger does not go with it")}
	}
	der, err := os.ReadFile(o.PublicKey)
	if err != nil {
		return fmt.Errorf("--public-key: %w", err)
	}
	if err := a.checkPin(); err != nil {
		return err
	}
	// The pin holds offline too: the file is the key recorded, or nothing
	// is checked with it. Pinned or not, its fingerprint is printed.
	t := &Trust{}
	if res := newVerifyResult(); a.pinRefused(res, t, "public key", "public key "+o.PublicKey, "file "+o.PublicKey, der) {
		res.Trust = t
		return a.report(res)
	}
	// The copy's segments and records are read from its files when needed,
	// never all at once (verifyspill.go); the table's other items (its
	// counters and checkpoints, the index state) are kept.
	tablePath := filepath.Join(o.Offline, ExportTable)
	rc := &recordCheck{res: newVerifyResult()}
	rc.res.Trust = t
	var others []ledger.Item
	var tableBytes int64
	read, err := readTableExport(tablePath, func(it ledger.Item, n int) error {
		if !ledger.Ledgered(it.S(ledger.KeyAttr)) {
			others = append(others, it)
		}
		item, err := dynamostore.SDKItem(it)
		if err != nil {
			rc.res.Problems = append(rc.res.Problems, problem(fmt.Sprintf("%s line %d", ExportTable, n), "unreadable item: "+err.Error()))
			return nil
		}
		rc.check(item)
		return nil
	})
	if err != nil {
		return err
	}
	if fi, err := os.Stat(tablePath); err == nil {
		tableBytes = fi.Size()
	}
	in := ledger.Input{Grace: o.Grace, PublicKeyDER: der, CheckVersion: dynamostore.LedgerVersionCheck(),
		Across: dynamostore.LedgerApprovalAcross(), MaxDigestAge: o.maxDigestAge(), IndexKey: dynamostore.IndexKeyOf}
	// Read again for the ledger's check: the ledgered items only, and the
	// same bytes (a copy changed in between fails the run).
	in.ScanItems = func(yield func(ledger.Item) error) error {
		again, err := readTableExport(tablePath, func(it ledger.Item, _ int) error {
			if !ledger.Ledgered(it.S(ledger.KeyAttr)) {
				return nil
			}
			return yield(it)
		})
		if err == nil && again != read {
			err = fmt.Errorf("%s changed while verify read it", tablePath)
		}
		return err
	}
	var writerNote string
	if in.CheckWriter, writerNote, err = a.writerCheck(context.Background(), nil); err != nil { // writers.go: no KMS
		return err
	}
	var segmentBytes int64
	if in.SegmentKeys, in.ReadSegment, segmentBytes, err = exportSegments(o.Offline); err != nil {
		return err
	}
	in.Headers = dynamostore.LedgerSegmentHeaders() // the counters' recount then parses a segment again only for a baseline's first changes
	in.Partitions = ledger.PartitionsFor(segmentBytes+tableBytes, a.PartitionBytes)
	if in.Baselines, err = readExportDir(o.Offline, ledger.BaselinePrefix); err != nil {
		return err
	}
	if in.Digests, err = readExportDir(o.Offline, ledger.DigestPrefix); err != nil {
		return err
	}
	// A version that dropped its index key is named from the backfill's
	// completion on; an export does not say whether the table has the
	// status index (a new stack's never had one: from the start).
	if at, ok := dynamostore.IndexStateSince(others); ok {
		in.IndexKeyFrom = &at
	} else {
		rc.res.Notes = append(rc.res.Notes, "no index state in the export: record versions that dropped their status_key are not named (online, verify names them on a table without the status index)")
	}
	// The copy is judged as of --as-of, or now: never as of a time an
	// unsigned file of the copy says (issue 25).
	in.Now = cmp.Or(ev.asOf, a.Now())
	// The grace runs back from --read-start, when the export's ledger
	// read began (the export printed it): a change made after it may be
	// in the table copy but not in the ledger copy. It is the auditor's
	// record too; export.json's ledger_read_start is not read.
	in.ReadStart = ev.readStart
	versionsNote := ""
	if in.Versions, versionsNote, err = readVersionsExport(o.Offline); err != nil {
		return err
	}
	rc.res.Notes = append(rc.res.Notes, versionsNote)
	note, exportedNewest, err := copyInfo(o.Offline)
	if err != nil {
		return err
	}
	rc.res.Notes = append(rc.res.Notes, note...)
	if writerNote != "" {
		rc.res.Notes = append(rc.res.Notes, writerNote)
	}
	ev.tableItems = others
	if rc.uncheckedStubs > 0 {
		rc.res.Notes = append(rc.res.Notes, fmt.Sprintf("offline: %s not checked against their archive objects (not in %s; run verify online for them)",
			plural(rc.uncheckedStubs, "archived stub", "archived stubs"), o.Offline))
	}
	if rc.uncheckedRef > 0 {
		rc.res.Notes = append(rc.res.Notes, fmt.Sprintf("offline: %s not re-read (not in %s; run verify online for them)",
			plural(rc.uncheckedRef, "claim-checked body", "claim-checked bodies"), o.Offline))
	}
	if err := rc.res.addLedger(in, "file "+o.PublicKey); err != nil {
		return err
	}
	rc.res.addEvidence(in, ev)
	rc.res.addWriterKeys(in, a.writerARNs) // writers.go
	if a.KeyFingerprint != "" {
		rc.res.Notes = append(rc.res.Notes, "the public key's SHA-256 is the pinned one (--key-fingerprint)")
	}
	if want, have := exportedNewest, newestDigest(in.Digests).N; want > have {
		rc.res.Problems = append(rc.res.Problems, Problem{ID: ExportInfoFile, Kind: string(ledger.KindDigestGap),
			What: fmt.Sprintf("%s: the copy's newest digest is #%d; %s says it was exported with #%d (digests were removed from the copy)", ledger.KindDigestGap, have, ExportInfoFile, want)})
		rc.res.Ledger.Problems++
	}
	return a.report(rc.res)
}

// readTableExport reads table.jsonl, one DynamoDB-JSON item a line, and
// passes each item and its line number to each.
// It returns the SHA-256 of the lines it read.
func readTableExport(path string, each func(it ledger.Item, line int) error) ([sha256.Size]byte, error) {
	var sum [sha256.Size]byte
	f, err := os.Open(path)
	if err != nil {
		return sum, fmt.Errorf("offline table export: %w", err)
	}
	defer f.Close()
	h := sha256.New()
	err = scanLines(f, func(line []byte, n int) error {
		h.Write(line)
		h.Write([]byte{'\n'})
		it, err := ledger.ParseItem(line)
		if err != nil {
			return err
		}
		return each(it, n)
	})
	h.Sum(sum[:0])
	return sum, err
}

// exportSegments lists the segment files of an export directory, keyed
// as the bucket keys them, and reads one when asked; bytes is their size.
func exportSegments(dir string) (keys []string, read func(string) ([]byte, error), bytes int64, err error) {
	paths := map[string]string{}
	err = walkExportDir(dir, ledger.SegmentPrefix, func(key, path string, size int64) error {
		paths[key], bytes = path, bytes+size
		return nil
	})
	if err != nil {
		return nil, nil, 0, err
	}
	for k := range paths {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys, func(key string) ([]byte, error) {
		p, ok := paths[key]
		if !ok {
			return nil, fmt.Errorf("no segment %s", key)
		}
		return os.ReadFile(p)
	}, bytes, nil
}

// readExportDir reads every file under dir/prefix, keyed as the bucket
// keys them (slash-separated, relative to dir). A missing prefix
// directory is an empty ledger part (verify names what it misses).
func readExportDir(dir, prefix string) (map[string][]byte, error) {
	out := map[string][]byte{}
	err := walkExportDir(dir, prefix, func(key, path string, _ int64) error {
		b, err := os.ReadFile(path)
		out[key] = b
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// walkExportDir calls each with every file under dir/prefix: its key (as
// the bucket keys it: slash-separated, relative to dir), path and size. A
// missing prefix directory has none.
func walkExportDir(dir, prefix string, each func(key, path string, size int64) error) error {
	root := filepath.Join(dir, filepath.FromSlash(strings.TrimSuffix(prefix, "/")))
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) && path == root {
				return fs.SkipAll
			}
			return err
		}
		if d.IsDir() {
			return nil
		}
		if !d.Type().IsRegular() {
			// An export holds files only: a link or a device could make
			// verify read what the copy does not hold, or never end.
			return fmt.Errorf("%s is not a regular file", path)
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		return each(filepath.ToSlash(rel), path, fi.Size())
	})
	if err != nil {
		return fmt.Errorf("offline ledger copy: %w", err)
	}
	return nil
}

// copyInfo reads DIR/export.json, when there is one, as information
// only: it is not signed, so neither the copy's time nor its newest digest
// is taken from it (--as-of and --expect-digest are the auditor's own).
// It returns the notes that say what it claims, and the newest digest it
// claims the copy holds (0: none), which can only add a problem.
func copyInfo(dir string) ([]string, int64, error) {
	raw, err := os.ReadFile(filepath.Join(dir, ExportInfoFile))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, 0, nil
	case err != nil:
		return nil, 0, fmt.Errorf("offline ledger copy: %w", err)
	}
	var info ExportInfo
	if err := json.Unmarshal(raw, &info); err != nil {
		return []string{fmt.Sprintf("%s does not read (%v): ignored", ExportInfoFile, err)}, 0, nil
	}
	return []string{fmt.Sprintf("%s (unsigned, not trusted) says the copy was exported at %s with digest #%d", ExportInfoFile,
		info.ExportedAt.UTC().Format(time.RFC3339), info.NewestDigest)}, info.NewestDigest, nil
}

// newestDigest is the highest-numbered digest of digests that parses
// and is under its own key (its signature unchecked: Verify checks it).
func newestDigest(digests map[string][]byte) ledger.Digest {
	var newest ledger.Digest
	for key, b := range digests {
		if d, err := ledger.ParseDigest(b); err == nil && key == ledger.DigestKey(d.N) && d.N > newest.N {
			newest = d
		}
	}
	return newest
}

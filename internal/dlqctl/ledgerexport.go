package dlqctl

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"time"

	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/spf13/cobra"

	"github.com/dlqquarantine/dlqq/shared/adapter/dynamostore"
	"github.com/dlqquarantine/dlqq/shared/domain/ledger"
)

// ExportInfo is DIR/export.json: when the copy was taken. verify
// --offline judges the copy as of TableScanEnd (the grace from
// LedgerReadStart), so it verifies the same whenever it runs.
type ExportInfo struct {
	ExportedAt      time.Time `json:"exported_at"`
	LedgerReadStart time.Time `json:"ledger_read_start"`
	TableScanEnd    time.Time `json:"table_scan_end"`
	// NewestDigest is the newest digest number the copy holds (0: none):
	// compare it with the bucket's to see what came after.
	NewestDigest int64 `json:"newest_digest"`
}

// ExportResult is what dlqctl ledger export wrote.
type ExportResult struct {
	Dir      string `json:"dir"`
	Versions int    `json:"versions"`
	Segments int    `json:"segments"`
	Digests  int    `json:"digests"`
	Items    int    `json:"items"`
	// Trust says where the table, bucket and key came from and which key
	// was exported.
	Trust *Trust `json:"trust"`
	// NewestDigest is the newest digest of the copy whose signature
	// verifies (0: none), NewestDigestSHA256 the SHA-256 of its bytes:
	// record them on their own path for verify --offline --expect-digest.
	NewestDigest       int64  `json:"newest_digest"`
	NewestDigestSHA256 string `json:"newest_digest_sha256,omitempty"`
	NewestDigestAt     string `json:"newest_digest_at,omitempty"`
	// LedgerReadStart (the ledger read's start, down to the second) and
	// TableScanEnd (the table scan's end, up to the second): record them
	// for verify --offline --read-start and --as-of.
	LedgerReadStart string `json:"ledger_read_start"`
	TableScanEnd    string `json:"table_scan_end"`
	// Counters says why the counter items were left out of the copy
	// (empty: they are in it).
	Counters string `json:"counters_left_out,omitempty"`
}

// keyFingerprintFlag adds --key-fingerprint (DLQQ_KEY_FINGERPRINT) to c.
func (a *App) keyFingerprintFlag(c *cobra.Command) {
	c.Flags().StringVar(&a.KeyFingerprint, "key-fingerprint", os.Getenv("DLQQ_KEY_FINGERPRINT"),
		"pin the signing key: the SHA-256 (hex) of its DER public key, as verify prints it; another key fails (DLQQ_KEY_FINGERPRINT)")
}

func (a *App) ledgerCmd() *cobra.Command {
	c := &cobra.Command{Use: "ledger", Short: "The ledger's signed copy of every record version"}
	export := &cobra.Command{
		Use: "export DIR", Short: "Copy the ledger, the table's records and policies and the public key into DIR, for verify --offline",
		Args: oneArg("a directory to export into (new or empty)"),
		RunE: func(cmd *cobra.Command, args []string) error { return a.LedgerExport(cmd.Context(), args[0]) },
	}
	a.keyFingerprintFlag(export)
	key := &cobra.Command{
		Use: "checkpoint-key FILE", Short: "Write a new key for verify --checkpoint's HMAC to FILE (which must not exist), readable by its owner alone",
		Args: oneArg("the file to write the key to"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := WriteCheckpointKey(args[0]); err != nil {
				return err
			}
			_, err := fmt.Fprintf(a.Out, "wrote a checkpoint key to %s: keep it where no role of the stack can read it\n", args[0])
			return err
		},
	}
	c.AddCommand(export, key)
	return c
}

// LedgerExport writes DIR/ledger/segments/..., DIR/ledger/digests/...,
// DIR/ledger/baseline/...
// (the bucket's keys, each key's first version: readLedger), DIR/versions.jsonl
// (every version and delete marker listed under ledger/), DIR/table.jsonl (one DynamoDB-JSON item a line:
// the records and policies) and DIR/public-key.der (GetPublicKey of the
// signing key), and DIR/export.json (ExportInfo). DIR must be empty or
// absent. The ledger is read before the table, as verify reads them. The
// copy holds payloads: files are 0600, directories 0700.
func (a *App) LedgerExport(ctx context.Context, dir string) (err error) {
	if err := a.checkOutput(); err != nil {
		return err
	}
	if err := a.checkLedgerSettings(); err != nil {
		return err
	}
	ents, statErr := os.ReadDir(dir)
	if statErr == nil && len(ents) > 0 {
		return &UsageError{fmt.Errorf("%s is not empty: export into a new directory", dir)}
	} else if statErr != nil && !errors.Is(statErr, os.ErrNotExist) {
		return statErr
	}
	der, keyARN, err := a.publicKey(ctx)
	if err != nil {
		return err
	}
	trust := a.trust(true)
	if what := trust.withKey(keyARN, der, a.KeyFingerprint); what != "" {
		return fmt.Errorf("nothing exported: %s", what)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	// An export that fails leaves no part of a copy (it holds payloads):
	// what it wrote goes, and DIR too when it made it.
	defer func() {
		if err != nil {
			removeExport(dir, errors.Is(statErr, os.ErrNotExist))
		}
	}()
	if err := os.Chmod(dir, 0o700); err != nil {
		return err
	}
	before, err := a.countCheckpoints(ctx)
	if err != nil {
		return err
	}
	info := ExportInfo{LedgerReadStart: a.Now().UTC()}
	res := ExportResult{Dir: dir, Trust: trust}
	// Segments and records go straight to their files, so that the export
	// holds no more of them in memory than verify does.
	var mu sync.Mutex
	digests, baselines, versions, err := a.readLedger(ctx, nil, func(key string, b []byte, _ string) error {
		versions := 0
		if s, err := ledger.ParseSegment(b); err == nil {
			versions = len(s.Entries)
		}
		mu.Lock()
		res.Segments, res.Versions = res.Segments+1, res.Versions+versions
		mu.Unlock()
		return writeExportObject(dir, key, b)
	})
	if err != nil {
		return err
	}
	table, err := os.OpenFile(filepath.Join(dir, ExportTable), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	defer table.Close()
	w := bufio.NewWriterSize(table, 1<<16)
	writeItem := func(it ledger.Item) error {
		line, err := json.Marshal(it)
		if err != nil {
			return fmt.Errorf("item %s: %w", it.S(ledger.KeyAttr), err)
		}
		_, err = w.Write(append(line, '\n'))
		return err
	}
	var counters []ledger.Item
	err = a.scanEach(ctx, func(item map[string]ddbtypes.AttributeValue) error {
		id := itemID(item)
		if !ledger.Ledgered(id) && !dynamostore.IsCounterKey(id) && !dynamostore.IsCountCheckpointKey(id) {
			return nil // the ledger's own state
		}
		it, err := dynamostore.LedgerItem(item)
		if err != nil {
			return fmt.Errorf("item %s: %w", id, err)
		}
		if !ledger.Ledgered(id) {
			counters = append(counters, it)
			return nil
		}
		res.Items++ // records and policies; counters and checkpoints besides
		return writeItem(it)
	})
	if err != nil {
		return err
	}
	after, err := a.countCheckpoints(ctx)
	if err != nil {
		return err
	}
	info.TableScanEnd = a.Now().UTC()
	info.NewestDigest = newestDigest(digests).N
	res.Digests = len(digests)
	res.LedgerReadStart = info.LedgerReadStart.Truncate(time.Second).Format(time.RFC3339)
	res.TableScanEnd = ceilSecond(info.TableScanEnd).Format(time.RFC3339)
	for _, part := range []map[string][]byte{digests, baselines} {
		for key, b := range part {
			if err := writeExportObject(dir, key, b); err != nil {
				return err
			}
		}
	}
	// The counters and their checkpoints go with the records, for verify
	// --offline's recount, when they are those of one moment: no counting
	// moved a checkpoint while the table was read.
	if res.Counters = countersRead(before, after, counters).moved; res.Counters == "" {
		for _, it := range counters {
			if err := writeItem(it); err != nil {
				return err
			}
		}
	}
	if err := errors.Join(w.Flush(), table.Close()); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, ExportPublicKey), der, 0o600); err != nil {
		return err
	}
	if err := writeVersionsExport(dir, versions); err != nil {
		return err
	}
	info.ExportedAt = a.Now().UTC()
	raw, err := json.MarshalIndent(info, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, ExportInfoFile), append(raw, '\n'), 0o600); err != nil {
		return err
	}
	if d, sha, ok := ledger.NewestSigned(digests, der); ok {
		res.NewestDigest, res.NewestDigestSHA256, res.NewestDigestAt = d.N, sha, d.At
	}
	if a.Output == "json" {
		return a.writeJSON(res)
	}
	fmt.Fprintf(a.Out, "exported %s, %s, %s to %s\n", plural(res.Versions, "version", "versions"),
		plural(res.Digests, "digest", "digests"), plural(res.Items, "item", "items"), dir)
	if res.NewestDigest > 0 {
		fmt.Fprintf(a.Out, "ledger: newest digest #%d, SHA-256 %s, signed %s (record %d:%s for verify --offline --expect-digest)\n",
			res.NewestDigest, res.NewestDigestSHA256, res.NewestDigestAt, res.NewestDigest, res.NewestDigestSHA256)
	}
	fmt.Fprintf(a.Out, "copy: ledger read from %s, table scan ended %s (record both for verify --offline --read-start %s --as-of %s)\n",
		res.LedgerReadStart, res.TableScanEnd, res.LedgerReadStart, res.TableScanEnd)
	if res.Counters != "" {
		fmt.Fprintf(a.Out, "counters: left out of the copy (%s)\n", res.Counters)
	}
	trust.write(a.Out)
	return nil
}

// removeExport removes what a failed export wrote into dir (empty when
// it began), and dir itself when the export made it.
func removeExport(dir string, made bool) {
	if made {
		_ = os.RemoveAll(dir)
		return
	}
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		_ = os.RemoveAll(filepath.Join(dir, e.Name()))
	}
}

// writeExportObject writes a ledger object to its key's path under dir,
// a new file: a key that is not a clean relative path (which two keys
// could share) is refused.
func writeExportObject(dir, key string, b []byte) error {
	if strings.Contains(key, "..") || filepath.IsAbs(key) || path.Clean(key) != key || !filepath.IsLocal(filepath.FromSlash(key)) {
		return fmt.Errorf("ledger object key %q: not a path inside %s", key, dir)
	}
	p := filepath.Join(dir, filepath.FromSlash(key))
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return err
	}
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	return errors.Join(err, f.Close())
}

// ceilSecond is t rounded up to the second.
func ceilSecond(t time.Time) time.Time {
	if d := t.Truncate(time.Second); d.Before(t) {
		return d.Add(time.Second)
	}
	return t
}

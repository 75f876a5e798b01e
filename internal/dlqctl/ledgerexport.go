package dlqctl

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

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
	c.AddCommand(export)
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
func (a *App) LedgerExport(ctx context.Context, dir string) error {
	if err := a.checkOutput(); err != nil {
		return err
	}
	if err := a.checkLedgerSettings(); err != nil {
		return err
	}
	if ents, err := os.ReadDir(dir); err == nil && len(ents) > 0 {
		return &UsageError{fmt.Errorf("%s is not empty: export into a new directory", dir)}
	} else if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
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
	if err := os.Chmod(dir, 0o700); err != nil {
		return err
	}
	before, err := a.countCheckpoints(ctx)
	if err != nil {
		return err
	}
	info := ExportInfo{LedgerReadStart: a.Now().UTC()}
	segments, digests, baselines, versions, err := a.readLedger(ctx)
	if err != nil {
		return err
	}
	items, err := a.scanTable(ctx)
	if err != nil {
		return err
	}
	after, err := a.countCheckpoints(ctx)
	if err != nil {
		return err
	}
	info.TableScanEnd = a.Now().UTC()
	info.NewestDigest = newestDigest(digests).N
	res := ExportResult{Dir: dir, Segments: len(segments), Digests: len(digests), Trust: trust,
		LedgerReadStart: info.LedgerReadStart.Truncate(time.Second).Format(time.RFC3339),
		TableScanEnd:    ceilSecond(info.TableScanEnd).Format(time.RFC3339)}
	for _, part := range []map[string][]byte{segments, digests, baselines} {
		for key, b := range part {
			if strings.Contains(key, "..") || filepath.IsAbs(key) {
				return fmt.Errorf("ledger object key %q: not a path inside %s", key, dir)
			}
			path := filepath.Join(dir, filepath.FromSlash(key))
			if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
				return err
			}
			if err := os.WriteFile(path, b, 0o600); err != nil {
				return err
			}
		}
	}
	for _, b := range segments {
		if s, err := ledger.ParseSegment(b); err == nil {
			res.Versions += len(s.Entries)
		}
	}
	var table []byte
	var ledgerItems []ledger.Item
	for _, item := range items {
		id := itemID(item)
		if !ledger.Ledgered(id) && !dynamostore.IsCounterKey(id) && !dynamostore.IsCountCheckpointKey(id) {
			continue // the ledger's own state
		}
		it, err := dynamostore.LedgerItem(item)
		if err != nil {
			return fmt.Errorf("item %s: %w", id, err)
		}
		ledgerItems = append(ledgerItems, it)
	}
	// The counters and their checkpoints go with the records, for verify
	// --offline's recount, when they are those of one moment: no counting
	// moved a checkpoint while the table was read.
	res.Counters = countersRead(before, after, ledgerItems).moved
	for _, it := range ledgerItems {
		if id := it.S(ledger.KeyAttr); !ledger.Ledgered(id) && res.Counters != "" {
			continue
		}
		line, err := json.Marshal(it)
		if err != nil {
			return fmt.Errorf("item %s: %w", it.S(ledger.KeyAttr), err)
		}
		table = append(append(table, line...), '\n')
		if ledger.Ledgered(it.S(ledger.KeyAttr)) {
			res.Items++ // records and policies; counters and checkpoints besides
		}
	}
	if err := os.WriteFile(filepath.Join(dir, ExportTable), table, 0o600); err != nil {
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

// ceilSecond is t rounded up to the second.
func ceilSecond(t time.Time) time.Time {
	if d := t.Truncate(time.Second); d.Before(t) {
		return d.Add(time.Second)
	}
	return t
}

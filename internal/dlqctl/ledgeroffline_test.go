package dlqctl_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/dlqquarantine/dlqq/internal/dlqctl"
	"github.com/dlqquarantine/dlqq/shared/dev/storetest"
	"github.com/dlqquarantine/dlqq/shared/dev/testkeys"
	dl "github.com/dlqquarantine/dlqq/shared/domain/ledger"
	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
)

// tamperable is an export to tamper with: its files by bucket key.
type tamperable struct {
	t   *testing.T
	dir string
}

func (x tamperable) path(key string) string { return filepath.Join(x.dir, filepath.FromSlash(key)) }

func (x tamperable) read(key string) []byte {
	x.t.Helper()
	b, err := os.ReadFile(x.path(key))
	if err != nil {
		x.t.Fatal(err)
	}
	return b
}

func (x tamperable) segments() map[string]dl.Segment {
	x.t.Helper()
	out := map[string]dl.Segment{}
	err := filepath.WalkDir(filepath.Join(x.dir, "ledger", "segments"), func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(x.dir, path)
		s, err := dl.ParseSegment(x.read(filepath.ToSlash(rel)))
		out[filepath.ToSlash(rel)] = s
		return err
	})
	if err != nil {
		x.t.Fatal(err)
	}
	return out
}

func (x tamperable) digest(n int64) dl.Digest {
	x.t.Helper()
	d, err := dl.ParseDigest(x.read(dl.DigestKey(n)))
	if err != nil {
		x.t.Fatal(err)
	}
	return d
}

func (x tamperable) write(key string, v interface{ Encode() ([]byte, error) }) []byte {
	x.t.Helper()
	b, err := v.Encode()
	if err != nil {
		x.t.Fatal(err)
	}
	writeFile(x.t, x.path(key), b)
	return b
}

// removeVersion takes the entry of id's version out of its segment,
// re-hashes the segment and re-links everything after it: the next
// segments' prev, the digests' heads and prevs (which it cannot re-sign).
func (x tamperable) removeVersion(id string, version int64, digests int64) {
	x.t.Helper()
	moved := map[string]dl.Ref{} // old key → new ref
	for key, s := range x.segments() {
		var kept []dl.Entry
		for _, e := range s.Entries {
			if v, _ := e.Item.Int("version"); e.Key == id && v == version {
				continue
			}
			kept = append(kept, e)
		}
		if len(kept) == len(s.Entries) {
			continue
		}
		ns, err := dl.NewSegment(s.StreamARN, s.Shard, s.Prev, kept)
		if err != nil {
			x.t.Fatal(err)
		}
		nk := dl.SegmentKey(ns.Shard, ns.FirstSeq)
		if err := os.Remove(x.path(key)); err != nil {
			x.t.Fatal(err)
		}
		moved[key] = dl.Ref{Key: nk, SHA256: dl.SHA256Hex(x.write(nk, ns))}
	}
	if len(moved) == 0 {
		x.t.Fatalf("no version %d of %s in the export", version, id)
	}
	for changed := true; changed; {
		changed = false
		for key, s := range x.segments() {
			if s.Prev == nil {
				continue
			}
			if ref, ok := moved[s.Prev.Key]; ok && *s.Prev != ref {
				s.Prev = &ref
				moved[key] = dl.Ref{Key: key, SHA256: dl.SHA256Hex(x.write(key, s))}
				changed = true
			}
		}
	}
	prevSHA := ""
	for n := int64(1); n <= digests; n++ {
		d := x.digest(n)
		for i, h := range d.Shards {
			if ref, ok := moved[h.SegmentKey]; ok {
				d.Shards[i].SegmentKey, d.Shards[i].SegmentSHA256 = ref.Key, ref.SHA256
			}
		}
		if d.Prev != nil {
			d.Prev.SHA256 = prevSHA
		}
		prevSHA = dl.SHA256Hex(x.write(dl.DigestKey(n), d))
	}
}

// The offline verification of a tampered copy of the ledger names each
// tampering: a version taken out of the middle of a record's chain
// (segments re-hashed and re-linked), a digest re-signed with another
// key, two digests swapped, a segment missing.
func TestVerifyOfflineNamesTampering(t *testing.T) {
	l := newLedgerFixture(t)
	a := l.create("a")
	a2 := l.next(a, park)
	l.next(a2, unpark)
	l.anchored("b")
	l.create("c")
	l.drain()
	l.digest()
	clean := l.export()
	if out, code := l.offline(clean); code != 0 {
		t.Fatalf("the untouched export (exit %d):\n%s", code, out)
	}
	for _, tc := range []struct {
		name   string
		tamper func(x tamperable)
		want   []string
	}{
		{"version removed from the middle", func(x tamperable) { x.removeVersion(a.DLQID, 2, 2) },
			[]string{"  MISMATCH " + a.DLQID + ": version-missing: version 2 missing", "  MISMATCH ledger/digests/000000000001.json: digest-signature: "}},
		{"digest re-signed with another key", func(x tamperable) {
			k, _ := testkeys.ECDSA(t)
			x.write(dl.DigestKey(2), testkeys.SignDigest(t, k, x.digest(2)))
		}, []string{"  MISMATCH ledger/digests/000000000002.json: digest-signature: digest 2: signature does not verify"}},
		{"two digests swapped", func(x tamperable) {
			one, two := x.read(dl.DigestKey(1)), x.read(dl.DigestKey(2))
			writeFile(t, x.path(dl.DigestKey(1)), two)
			writeFile(t, x.path(dl.DigestKey(2)), one)
		}, []string{"  MISMATCH ledger/digests/000000000001.json: digest-invalid: holds digest 2", "  MISMATCH ledger/digests/000000000002.json: digest-invalid: holds digest 1"}},
		{"segment missing", func(x tamperable) {
			key := x.digest(1).Shards[0].SegmentKey
			if err := os.Remove(x.path(key)); err != nil {
				t.Fatal(err)
			}
		}, []string{": segment-missing: "}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "copy")
			if err := os.CopyFS(dir, os.DirFS(clean)); err != nil {
				t.Fatal(err)
			}
			tc.tamper(tamperable{t: t, dir: dir})
			out, code := l.offline(dir)
			if code != dlqctl.ExitMismatch {
				t.Fatalf("exit %d:\n%s", code, out)
			}
			mustContain(t, out, tc.want...)
		})
	}
}

// Offline, archived stubs and claim-checked bodies are not checked (they
// are not in the copy): a note says so, with their counts.
func TestVerifyOfflineNotesWhatItCannotCheck(t *testing.T) {
	dir := t.TempDir()
	stub := storetest.Record(t, storetest.UniqueID("s"))
	stub.Status, stub.Archive = quarantine.StatusArchived, &quarantine.ArchiveRef{Bucket: "archive", Key: "k", SHA256: "00", Seal: "x"}
	ref := storetest.Record(t, storetest.UniqueID("r"))
	ref.Body, ref.BodyRef = "", &quarantine.ObjectRef{Bucket: "payloads", Key: "k", SHA256: ref.BodySHA256, Size: ref.BodySize}
	var lines []byte
	for _, r := range []*quarantine.Record{stub, ref} {
		if err := quarantine.SealRecord(r); err != nil {
			t.Fatal(err)
		}
		b, err := json.Marshal(storetest.LedgerItem(t, r))
		if err != nil {
			t.Fatal(err)
		}
		lines = append(append(lines, b...), '\n')
	}
	writeFile(t, filepath.Join(dir, dlqctl.ExportTable), lines)
	_, der := testkeys.ECDSA(t)
	writeFile(t, filepath.Join(dir, dlqctl.ExportPublicKey), der)
	l := &ledgerFixture{t: t}
	out, _ := l.offline(dir)
	mustContain(t, out, "verified 2 records (1 archived stub): ", "ledger: 0 versions in 0 segments of 0 shards, 0 digests (none signed): 2 problems",
		"  note: offline: 1 archived stub not checked against their archive objects", "  note: offline: 1 claim-checked body not re-read")
}

package dlqctl_test

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/aws/smithy-go/middleware"

	"github.com/dlqquarantine/dlqq/internal/dlqctl"
	"github.com/dlqquarantine/dlqq/shared/adapter/dynamostore"
	"github.com/dlqquarantine/dlqq/shared/adapter/kmsmac"
	"github.com/dlqquarantine/dlqq/shared/dev/storetest"
	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
	"github.com/dlqquarantine/dlqq/shared/domain/writerproof"
)

// checkpointLine is verify's note on its checkpoint, and the digest's age:
// what differs between a run from a checkpoint and a whole run.
var checkpointLine = regexp.MustCompile(`(?m)^.*checkpoint .*: \d+ of \d+ ledger objects read from it.*\n`)

// sameRun is verify's output without what differs between runs.
func sameRun(out string) string {
	return signedAgo.ReplaceAllString(checkpointLine.ReplaceAllString(out, ""), "")
}

// checkpointed runs verify with a checkpoint, and returns its text
// output, its exit code and what -o json says of the checkpoint.
func (l *ledgerFixture) checkpointed(dir, key string) (string, int, dlqctl.CheckpointReport) {
	l.t.Helper()
	// In JSON first, from a copy of the checkpoint as it is (a run writes
	// a new one).
	var rep dlqctl.CheckpointReport
	if _, err := os.Stat(dir); err == nil {
		cp := filepath.Join(l.t.TempDir(), "copy")
		if err := os.CopyFS(cp, os.DirFS(dir)); err != nil {
			l.t.Fatal(err)
		}
		_, rep = l.checkpointedJSON(cp, key)
		rep.Dir = dir
	}
	out, errOut, code := l.run(false, "verify", "--checkpoint", dir, "--checkpoint-key", key)
	if code != 0 && code != dlqctl.ExitMismatch {
		l.t.Fatalf("verify --checkpoint: exit %d\n%s%s", code, out, errOut)
	}
	if !checkpointLine.MatchString(out) {
		l.t.Fatalf("no checkpoint line:\n%s", out)
	}
	return out, code, rep
}

// checkpointedJSON runs verify -o json with a checkpoint, and returns its
// output and what it says of the checkpoint.
func (l *ledgerFixture) checkpointedJSON(dir, key string) (string, dlqctl.CheckpointReport) {
	l.t.Helper()
	js, errOut, _ := l.run(false, "verify", "--checkpoint", dir, "--checkpoint-key", key, "-o", "json")
	var rep struct {
		Ledger struct{ Checkpoint dlqctl.CheckpointReport } `json:"ledger"`
	}
	if err := json.Unmarshal([]byte(js), &rep); err != nil {
		l.t.Fatalf("%v:\n%s%s", err, js, errOut)
	}
	return js, rep.Ledger.Checkpoint
}

// A verify from a checkpoint reads from the bucket only the ledger objects
// written since the run that left it, skips the checks that run passed,
// and reports what a whole run reports, problem for problem: a record
// rewritten since, a version ledgered since, an older checkpoint, a copy
// damaged on disk.
func TestVerifyFromACheckpointReportsWhatAWholeRunReports(t *testing.T) {
	l := newLedgerFixture(t)
	key := filepath.Join(t.TempDir(), "checkpoint.key")
	out, errOut, code := l.run(false, "ledger", "checkpoint-key", key)
	if code != 0 {
		t.Fatalf("checkpoint-key: exit %d\n%s%s", code, out, errOut)
	}
	if st, err := os.Stat(key); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v %v", st, err)
	}
	var recs []*quarantine.Record
	for _, p := range []string{"a", "b", "c"} {
		recs = append(recs, l.create(p))
	}
	l.drain()
	l.digest()
	dir := filepath.Join(t.TempDir(), "checkpoint")
	first, code, _ := l.checkpointed(dir, key)
	if code != 0 || first1(t, first).objects == 0 {
		t.Fatalf("first run: exit %d\n%s", code, first)
	}
	older := filepath.Join(t.TempDir(), "older")
	if err := os.CopyFS(older, os.DirFS(dir)); err != nil {
		t.Fatal(err)
	}

	// Since: a record moved on twice, new records, one rewritten by hand.
	a2 := l.next(recs[0], park)
	l.next(a2, unpark)
	l.create("d")
	l.drain()
	l.digest()
	l.create("e")
	l.drain()
	l.digest()
	l.forgeNext(recs[2]) // ledgered: a version no transition makes
	l.drain()
	l.digest()
	l.rewrite(recs[1]) // not ledgered
	whole, _, code := l.run(false, "verify")
	if code != dlqctl.ExitMismatch {
		t.Fatalf("whole run: exit %d\n%s", code, whole)
	}
	mustContain(t, whole, "  MISMATCH "+recs[1].DLQID+": rewritten", "  MISMATCH "+recs[2].DLQID+": forged")
	got, code, rep := l.checkpointed(dir, key)
	if code != dlqctl.ExitMismatch || sameRun(got) != sameRun(whole) {
		t.Fatalf("from the checkpoint (exit %d):\n%s\nwhole:\n%s", code, got, whole)
	}
	// All but one (read from the bucket all the same, at random) of the
	// first run's objects come from the checkpoint.
	if rep.ObjectsReused != first1(t, first).objects-1 || rep.ObjectsRead <= 1 || rep.ChecksSkipped == 0 {
		t.Fatalf("from the checkpoint: %+v, first run read %d objects", rep, first1(t, first).objects)
	}

	// An older checkpoint is an earlier run's: still sound, less to skip.
	if got, _, rep := l.checkpointed(older, key); sameRun(got) != sameRun(whole) || rep.ObjectsReused != first1(t, first).objects-1 {
		t.Fatalf("from an older checkpoint %+v:\n%s", rep, got)
	}

	// Copies changed on disk are read from the bucket again, and said.
	objs, err := filepath.Glob(filepath.Join(dir, "objects", "*"))
	if err != nil || len(objs) < 3 {
		t.Fatal(objs, err)
	}
	for _, o := range objs {
		if err := os.WriteFile(o, []byte("{}"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	got, _, rep = l.checkpointed(dir, key)
	damaged := regexp.MustCompile(`  note: checkpoint: (\d+) copies in ` + regexp.QuoteMeta(dir) + ` did not hash as its manifest says \(changed or damaged on disk\): read from the bucket again\n`)
	m := damaged.FindStringSubmatch(got)
	if m == nil || m[1] != strconv.Itoa(len(objs)-1) || rep.ObjectsRead != len(objs) || rep.ObjectsReused != 0 || sameRun(damaged.ReplaceAllString(got, "")) != sameRun(whole) {
		t.Fatalf("damaged copies %+v (%d copies):\n%s\nwhole:\n%s", rep, len(objs), got, whole)
	}
	// What the manifest does not name is removed: the copies and proofs
	// of earlier runs.
	names := map[string]bool{}
	if err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			names[strings.TrimPrefix(p, dir+"/")] = true
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	_, body := manifestOf(t, dir)
	var man struct {
		Objects map[string]struct{ File string }
		Proofs  struct{ File string }
	}
	if err := json.Unmarshal(body, &man); err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{"checkpoint": true, man.Proofs.File: true}
	for _, o := range man.Objects {
		want[o.File] = true
	}
	if !maps.Equal(names, want) {
		t.Fatalf("DIR holds %v, its manifest names %v", slices.Sorted(maps.Keys(names)), slices.Sorted(maps.Keys(want)))
	}
}

// manifestOf is a checkpoint's manifest: its MAC and its body.
func manifestOf(t *testing.T, dir string) (mac, body []byte) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(dir, "checkpoint"))
	if err != nil {
		t.Fatal(err)
	}
	mac, body, _ = bytes.Cut(raw, []byte("\n"))
	return mac, body
}

// forgeNext writes r's next version by hand, its seal recomputed and
// chained, with a change no transition makes: a forged version.
func (l *ledgerFixture) forgeNext(r *quarantine.Record) {
	l.t.Helper()
	forged := *r
	forged.Version, forged.PrevSeal = r.Version+1, r.Seal
	forged.FailureReason = "nothing to see"
	if err := quarantine.SealRecord(&forged); err != nil {
		l.t.Fatal(err)
	}
	l.put(&forged)
}

// first1 is what a first run's checkpoint line says it read.
func first1(t *testing.T, out string) struct{ objects int } {
	t.Helper()
	m := regexp.MustCompile(`: 0 of (\d+) ledger objects read from it`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no first-run checkpoint line:\n%s", out)
	}
	var n int
	if _, err := fmt.Sscan(m[1], &n); err != nil {
		t.Fatal(err)
	}
	return struct{ objects int }{n}
}

// A checkpoint verify cannot trust stops it: one changed by someone
// without its key (a manifest edited, proofs added to its proofs file),
// one under another key, one in use, one of another bucket; a key file
// others can read, and flags that do not go together, are refused before
// anything is read. Proofs of another build are not used.
func TestVerifyRefusesACheckpointItCannotTrust(t *testing.T) {
	l := newLedgerFixture(t)
	l.create("a")
	l.drain()
	l.digest()
	tmp := t.TempDir()
	key, otherKey := filepath.Join(tmp, "key"), filepath.Join(tmp, "other")
	for _, k := range []string{key, otherKey} {
		if err := dlqctl.WriteCheckpointKey(k); err != nil {
			t.Fatal(err)
		}
	}
	if err := dlqctl.WriteCheckpointKey(key); err == nil {
		t.Fatal("a key file written over")
	}
	dir := filepath.Join(tmp, "checkpoint")
	if _, code, _ := l.checkpointed(dir, key); code != 0 {
		t.Fatalf("exit %d", code)
	}
	refused := func(t *testing.T, dir, key string, exit int, want string, extra ...string) {
		t.Helper()
		out, errOut, code := l.run(false, append([]string{"verify", "--checkpoint", dir, "--checkpoint-key", key}, extra...)...)
		if code != exit || !strings.Contains(errOut, want) {
			t.Fatalf("exit %d, want %d and %q:\n%s%s", code, exit, want, out, errOut)
		}
	}
	copyOf := func(t *testing.T, change func(dir string)) string {
		t.Helper()
		d := filepath.Join(t.TempDir(), "copy")
		if err := os.CopyFS(d, os.DirFS(dir)); err != nil {
			t.Fatal(err)
		}
		change(d)
		return d
	}
	t.Run("manifest edited", func(t *testing.T) {
		d := copyOf(t, func(d string) {
			mac, body := manifestOf(t, d)
			body = bytes.Replace(body, []byte(`"version_id":"`), []byte(`"version_id":"x`), 1)
			if err := os.WriteFile(filepath.Join(d, "checkpoint"), append(append(mac, '\n'), body...), 0o600); err != nil {
				t.Fatal(err)
			}
		})
		refused(t, d, key, 1, "its MAC does not verify under --checkpoint-key")
	})
	t.Run("another key", func(t *testing.T) {
		refused(t, copyOf(t, func(string) {}), otherKey, 1, "its MAC does not verify under --checkpoint-key")
	})
	t.Run("a proof added", func(t *testing.T) {
		d := copyOf(t, func(d string) {
			files, err := filepath.Glob(filepath.Join(d, "proofs-*.bin"))
			if err != nil || len(files) != 1 {
				t.Fatal(files, err)
			}
			f, err := os.OpenFile(files[0], os.O_APPEND|os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f.Write(bytes.Repeat([]byte{7}, 32)); err != nil {
				t.Fatal(err)
			}
			_ = f.Close()
		})
		refused(t, d, key, 1, "is not the one its manifest names")
	})
	t.Run("a proofs file of the same length swapped", func(t *testing.T) {
		d := copyOf(t, func(d string) {
			files, err := filepath.Glob(filepath.Join(d, "proofs-*.bin"))
			if err != nil || len(files) != 1 {
				t.Fatal(files, err)
			}
			raw, err := os.ReadFile(files[0])
			if err != nil || len(raw) == 0 {
				t.Fatal(err)
			}
			raw[0] ^= 1
			if err := os.WriteFile(files[0], raw, 0o600); err != nil {
				t.Fatal(err)
			}
		})
		refused(t, d, key, 1, "is not the one its manifest names")
	})
	t.Run("a file outside DIR named", func(t *testing.T) {
		d := copyOf(t, func(d string) {
			_, body := manifestOf(t, d)
			body = regexp.MustCompile(`"file":"objects/\d+"`).ReplaceAll(body, []byte(`"file":"../../etc/passwd"`))
			writeManifest(t, d, key, body)
		})
		refused(t, d, key, 1, "in file ../../etc/passwd")
	})
	t.Run("objects a link out of DIR", func(t *testing.T) {
		outside := t.TempDir()
		precious := filepath.Join(outside, "precious.txt")
		if err := os.WriteFile(precious, []byte("keep"), 0o600); err != nil {
			t.Fatal(err)
		}
		d := copyOf(t, func(d string) {
			if err := os.RemoveAll(filepath.Join(d, "objects")); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(outside, filepath.Join(d, "objects")); err != nil {
				t.Fatal(err)
			}
		})
		refused(t, d, key, 1, "its objects directory is a L")
		if _, err := os.Stat(precious); err != nil {
			t.Fatalf("a file outside DIR: %v", err)
		}
		if ents, _ := os.ReadDir(outside); len(ents) != 1 {
			t.Fatalf("written outside DIR: %v", ents)
		}
	})
	t.Run("copies that are links out of DIR", func(t *testing.T) {
		outside := t.TempDir()
		var n int
		d := copyOf(t, func(d string) {
			objs, err := filepath.Glob(filepath.Join(d, "objects", "*"))
			if err != nil || len(objs) < 2 {
				t.Fatal(objs, err)
			}
			n = len(objs)
			for i, o := range objs {
				raw, err := os.ReadFile(o) // the right bytes, outside DIR
				if err != nil {
					t.Fatal(err)
				}
				out := filepath.Join(outside, strconv.Itoa(i))
				if err := os.WriteFile(out, raw, 0o600); err != nil {
					t.Fatal(err)
				}
				if err := os.Remove(o); err != nil {
					t.Fatal(err)
				}
				if err := os.Symlink(out, o); err != nil {
					t.Fatal(err)
				}
			}
		})
		out, _, code := l.run(false, "verify", "--checkpoint", d, "--checkpoint-key", key)
		if code != 0 || !strings.Contains(out, fmt.Sprintf("note: checkpoint: %d cop", n-1)) {
			t.Fatalf("exit %d:\n%s", code, out)
		}
	})
	t.Run("a FIFO for its manifest", func(t *testing.T) {
		d := copyOf(t, func(d string) {
			if err := os.Remove(filepath.Join(d, "checkpoint")); err != nil {
				t.Fatal(err)
			}
			if err := syscall.Mkfifo(filepath.Join(d, "checkpoint"), 0o600); err != nil {
				t.Skip("no FIFOs here:", err)
			}
		})
		refused(t, d, key, 1, "not a regular file")
	})
	t.Run("in use", func(t *testing.T) {
		d := copyOf(t, func(d string) {
			if err := os.WriteFile(filepath.Join(d, "lock"), nil, 0o600); err != nil {
				t.Fatal(err)
			}
		})
		refused(t, d, key, 1, "is in use by another verify")
	})
	t.Run("another bucket", func(t *testing.T) {
		d := copyOf(t, func(d string) {
			_, body := manifestOf(t, d)
			body = bytes.Replace(body, []byte(`"bucket":"`), []byte(`"bucket":"other-`), 1)
			writeManifest(t, d, key, body)
		})
		refused(t, d, key, dlqctl.ExitUsage, "give each bucket a checkpoint of its own")
	})
	t.Run("a key others can read", func(t *testing.T) {
		open := filepath.Join(t.TempDir(), "key")
		raw, err := os.ReadFile(key)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(open, raw, 0o644); err != nil {
			t.Fatal(err)
		}
		refused(t, copyOf(t, func(string) {}), open, dlqctl.ExitUsage, "readable by others")
	})
	t.Run("flags", func(t *testing.T) {
		refused(t, dir, key, dlqctl.ExitUsage, "--checkpoint is for verify online", "--no-ledger")
		out, errOut, code := l.run(false, "verify", "--checkpoint", dir)
		if code != dlqctl.ExitUsage || !strings.Contains(errOut, "go together") {
			t.Fatalf("exit %d:\n%s%s", code, out, errOut)
		}
	})
	t.Run("another build's proofs", func(t *testing.T) {
		d := copyOf(t, func(d string) {
			_, body := manifestOf(t, d)
			body = regexp.MustCompile(`"scope":"[0-9a-f]+"`).ReplaceAll(body, []byte(`"scope":"00"`))
			writeManifest(t, d, key, body)
		})
		out, rep := l.checkpointedJSON(d, key)
		if rep.ChecksSkipped != 0 || rep.ObjectsRead != 1 || !strings.Contains(out, "its proofs were made by another build of dlqctl or for other writer keys") {
			t.Fatalf("%+v\n%s", rep, out)
		}
	})
}

// writeManifest writes a checkpoint's manifest under key, as verify does.
func writeManifest(t *testing.T, dir, keyFile string, body []byte) {
	t.Helper()
	raw, err := os.ReadFile(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	key, err := hex.DecodeString(strings.TrimSpace(string(raw)))
	if err != nil {
		t.Fatal(err)
	}
	m := hmac.New(sha256.New, key)
	m.Write([]byte("dlqq-verify-checkpoint-1\n"))
	m.Write(body)
	out := append([]byte(hex.EncodeToString(m.Sum(nil))+"\n"), body...)
	if err := os.WriteFile(filepath.Join(dir, "checkpoint"), out, 0o600); err != nil {
		t.Fatal(err)
	}
}

// countVerifyMac makes dlqctl's KMS client count the VerifyMac calls that
// reach KMS.
func (l *ledgerFixture) countVerifyMac() *atomic.Int64 {
	n := &atomic.Int64{}
	count := middleware.InitializeMiddlewareFunc("countVerifyMac", func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
		if awsmiddleware.GetOperationName(ctx) == "VerifyMac" {
			n.Add(1)
		}
		return next.HandleInitialize(ctx, in)
	})
	l.kms = kms.NewFromConfig(l.st.AWS, func(o *kms.Options) {
		o.APIOptions = append(o.APIOptions, func(s *middleware.Stack) error { return s.Initialize.Add(count, middleware.After) })
	})
	return n
}

// From a checkpoint, a writer proof's MAC an earlier run verified is not
// asked of KMS again, but for each key's first of the run; the output is
// a whole run's. A key disabled since fails the run as it fails a whole
// run (writer-unchecked), and the MAC KMS did not answer keeps no proof:
// once the key is enabled again, the next run asks it.
func TestVerifyFromACheckpointAsksKMSOnlyWhatItMust(t *testing.T) {
	l, keys := writerLedger(t)
	ctx := context.Background()
	admin := kms.NewFromConfig(l.st.AWS)
	store := dynamostore.New(l.st.Clients.DynamoDB, l.table).WithWriter(writerproof.NewProver(kmsmac.MAC{API: admin, KeyID: keys[0]}, writerproof.RoleIngest))
	create := func() {
		t.Helper()
		if err := store.Create(ctx, storetest.Record(t, storetest.UniqueID("m"))); err != nil {
			t.Fatal(err)
		}
		l.drain()
		l.digest()
	}
	for range 4 {
		create()
	}
	calls := l.countVerifyMac()
	writerKeys := "--writer-keys=" + strings.Join(keys, ",")
	whole, errOut, code := l.run(false, "verify", writerKeys)
	macs := calls.Swap(0)
	if code != 0 || macs < 5 || !strings.Contains(whole, "writer proofs since digest #1: 5 versions proved") {
		t.Fatalf("whole run (exit %d, %d VerifyMac calls):\n%s%s", code, macs, whole, errOut)
	}
	key, dir := filepath.Join(t.TempDir(), "key"), filepath.Join(t.TempDir(), "checkpoint")
	if err := dlqctl.WriteCheckpointKey(key); err != nil {
		t.Fatal(err)
	}
	skipped := regexp.MustCompile(`, (\d+) writer MACs not asked of KMS\)`)
	run := func(wantCode int, wantCalls, wantSkipped int64) string {
		t.Helper()
		calls.Store(0)
		out, errOut, code := l.run(false, "verify", writerKeys, "--checkpoint", dir, "--checkpoint-key", key)
		m := skipped.FindStringSubmatch(out)
		if code != wantCode || calls.Load() != wantCalls || m == nil || m[1] != strconv.FormatInt(wantSkipped, 10) {
			t.Fatalf("from the checkpoint: exit %d, %d VerifyMac calls, skipped %q; want exit %d, %d calls, %d skipped\n%s%s", code, calls.Load(), m, wantCode, wantCalls, wantSkipped, out, errOut)
		}
		return out
	}
	if out := run(0, macs, 0); sameRun(out) != sameRun(whole) {
		t.Fatalf("leaving a checkpoint:\n%s\nwhole:\n%s", out, whole)
	}
	if out := run(0, 1, macs-1); sameRun(out) != sameRun(whole) {
		t.Fatalf("from the checkpoint:\n%s\nwhole:\n%s", out, whole)
	}
	create() // a MAC no run has verified yet
	run(0, 2, macs-1)
	macs++

	if _, err := admin.DisableKey(ctx, &kms.DisableKeyInput{KeyId: &keys[0]}); err != nil {
		t.Fatal(err)
	}
	unchecked := regexp.MustCompile(`(?m)^.*writer-unchecked.*$`)
	whole, _, code = l.run(false, "verify", writerKeys)
	if code != dlqctl.ExitMismatch || len(unchecked.FindAllString(whole, -1)) != int(macs) {
		t.Fatalf("whole run with the key disabled (exit %d):\n%s", code, whole)
	}
	if out := run(dlqctl.ExitMismatch, 1, macs-1); len(unchecked.FindAllString(out, -1)) != 1 {
		t.Fatalf("from the checkpoint with the key disabled:\n%s", out)
	}
	if _, err := admin.EnableKey(ctx, &kms.EnableKeyInput{KeyId: &keys[0]}); err != nil {
		t.Fatal(err)
	}
	run(0, 2, macs-2) // the one KMS did not answer, and the key's first
	run(0, 1, macs-1)
}

package dlqctl

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	mathrand "math/rand/v2"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/dlqquarantine/dlqq/shared/domain/ledger"
	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
	"github.com/dlqquarantine/dlqq/shared/domain/writerproof"
)

// A verify checkpoint (verify --checkpoint DIR --checkpoint-key FILE) is
// what one verify leaves for the next, so that a daily verify reads only
// what changed: a copy of every ledger object it read (the first version
// of each key, by its S3 version id) and the proofs of the checks it
// passed (ledger.Proofs: record versions, archived stubs' objects,
// writer proofs' MACs). The
// next verify lists the bucket whole, as always; it reads from the bucket
// only the objects the checkpoint lacks (a version id that S3 gave once
// names the same bytes for ever), and a few it has, at random
// (checkpoint.sample, CheckpointResample: so that a bucket that can no
// longer be read, a key disabled, a permission withdrawn, still fails the
// run), and skips the checks an earlier run passed (the decode and
// re-seal of every record version, the read of an archived stub's object
// and retention, KMS's VerifyMac of a writer MAC: macCache). Every other
// check runs as without a checkpoint, over the whole ledger and the whole
// table, and finds the same (ledger.TestEveryTestAgainWithProofs).
//
// The checkpoint is the auditor's, not the stack's: DIR/checkpoint holds
// its manifest (each object's key, version id, SHA-256 and file; the
// proofs file's SHA-256; the scope its proofs hold for) under an
// HMAC-SHA256 whose key is the file --checkpoint-key names, which no role
// of the stack can read (and each proof is under that key too:
// proofScopeUnder). A manifest that does not verify under the key
// stops verify; a copied object whose bytes do not hash as the manifest
// says is read from the bucket again; proofs made by another build of
// dlqctl or for other writer keys (another scope) are not used. Every
// file of DIR is opened through an os.Root (nothing outside DIR is read,
// written or removed), must be a regular file, and is read no further
// than the manifest says it is long.

// checkpointFormat names the manifest's format.
const checkpointFormat = "dlqq-verify-checkpoint-1"

// checkpointBody is the manifest.
type checkpointBody struct {
	Format string `json:"format"`
	Bucket string `json:"bucket"`
	At     string `json:"at"`
	// Scope is the checks' scope the proofs hold for (proofScope).
	Scope   string                      `json:"scope"`
	Objects map[string]checkpointObject `json:"objects"`
	Proofs  checkpointFile              `json:"proofs"`
}

// checkpointObject is a ledger object's copy: the first version of its
// key, by version id.
type checkpointObject struct {
	VersionID string `json:"version_id"`
	SHA256    string `json:"sha256"`
	Size      int64  `json:"size"`
	File      string `json:"file"`
}

// checkpointFile is the proofs' file: ProofKeys, one after the other.
type checkpointFile struct {
	File   string `json:"file"`
	SHA256 string `json:"sha256"`
	Count  int    `json:"count"`
}

// checkpointFiles are the only names a manifest may give its files.
var (
	checkpointObjectName = regexp.MustCompile(`^objects/[0-9]{8}$`)
	checkpointProofsName = regexp.MustCompile(`^proofs-[0-9]{8}\.bin$`)
)

// checkpoint is an open checkpoint directory: the manifest it had, and
// the one this run writes.
type checkpoint struct {
	dir  string
	root *os.Root
	key  []byte
	prev checkpointBody
	mu   sync.Mutex
	next checkpointBody
	// number is the next file's number.
	number int
	// sample is the one ledger object of those the checkpoint holds that
	// each run reads from the bucket all the same, chosen at random (of
	// archived stubs' proven objects, the first: stubProofs.sampled),
	// besides those CheckpointResample picks: a copy spares the read, and
	// with it the news that the bucket can no longer be read (its KMS key
	// disabled, a permission withdrawn, the prefix moved to another
	// storage class), which a run without the checkpoint fails on. A read
	// that fails fails the run (a stub's names the record), as it would.
	sample string
	// reused and read count the ledger objects taken from the checkpoint
	// and read from the bucket; damaged, the copies that did not hash as
	// the manifest says.
	reused, read, damaged int
	proofs                *ledger.Proofs
	// stubs are the proofs' archived stubs (s3store.StubProofs).
	stubs stubProofs
	// macs are the proofs' writer MACs (macCache.useProofs; nil: no
	// writer keys).
	macs  *macCache
	notes []string
	// failed is why a copy could not be written: the checkpoint is then
	// not written.
	failed error
	// resample is the chance, 1 in resample, that a ledger object or an
	// archived object with a copy or a proof is read all the same
	// (App.CheckpointResample; 0: never).
	resample int
}

// CheckpointResample: each object a checkpoint proves (a ledger object's
// copy, an archived stub's object) is read all the same with a chance of
// 1 in CheckpointResample a run, so that a fault of one object alone
// shows, in time.
const CheckpointResample = 64

// checkpointMaxManifest bounds the manifest's size (about 200 bytes an
// object: 5 million objects, 500 million versions).
const checkpointMaxManifest = 1 << 30

// CheckpointReport is what verify --checkpoint says of its checkpoint.
type CheckpointReport struct {
	Dir string `json:"dir"`
	// ObjectsReused ledger objects were read from the checkpoint,
	// ObjectsRead from the bucket.
	ObjectsReused int `json:"objects_reused"`
	ObjectsRead   int `json:"objects_read"`
	// ChecksSkipped checks were passed by an earlier run (version,
	// archived object and writer MAC checks); of them,
	// ArchivedObjectsSkipped are archived stubs' objects not read (their
	// key's versions are listed all the same) and WriterMACsSkipped writer
	// proofs' MACs not asked of KMS (the rest of each proof is checked
	// all the same). Proofs are those the checkpoint now holds.
	ChecksSkipped          int64 `json:"checks_skipped"`
	ArchivedObjectsSkipped int64 `json:"archived_objects_skipped"`
	WriterMACsSkipped      int64 `json:"writer_macs_skipped"`
	Proofs                 int   `json:"proofs"`
}

// readCheckpointKey reads the checkpoint key: hex, at least 32 bytes,
// in a file only its owner can read.
func readCheckpointKey(path string) ([]byte, error) {
	st, err := os.Stat(path)
	switch {
	case err != nil:
		return nil, &UsageError{fmt.Errorf("--checkpoint-key: %w (dlqctl ledger checkpoint-key FILE makes one)", err)}
	case !st.Mode().IsRegular() || st.Size() > 4096:
		return nil, &UsageError{fmt.Errorf("--checkpoint-key %s: not a key file", path)}
	case runtime.GOOS != "windows" && st.Mode().Perm()&0o077 != 0:
		return nil, &UsageError{fmt.Errorf("--checkpoint-key %s: readable by others (mode %v): chmod 600 it", path, st.Mode().Perm())}
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	key, err := hex.DecodeString(strings.TrimSpace(string(raw)))
	if err != nil || len(key) < 32 {
		return nil, &UsageError{fmt.Errorf("--checkpoint-key %s: not a key (64 or more hex digits, as dlqctl ledger checkpoint-key writes)", path)}
	}
	return key, nil
}

// WriteCheckpointKey writes a new checkpoint key (32 random bytes, hex)
// to path, which must not exist, readable by its owner alone.
func WriteCheckpointKey(path string) error {
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := fmt.Fprintln(f, hex.EncodeToString(key)); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

// openCheckpoint locks dir (made when absent), checks its manifest under
// the key in keyFile, and removes what an unfinished run left. Proofs
// are used when the manifest's scope is scope (under the key: see
// proofScope).
func openCheckpoint(dir, keyFile, bucket, scope string, now func() time.Time, resample int) (*checkpoint, error) {
	key, err := readCheckpointKey(keyFile)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("checkpoint %s: %w", dir, err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("checkpoint %s: %w", dir, err)
	}
	cp := &checkpoint{dir: dir, root: root, key: key, resample: resample}
	f, err := root.OpenFile("lock", os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		_ = root.Close()
		return nil, fmt.Errorf("checkpoint %s is in use by another verify (or by one that was killed: then remove %s): %w", dir, filepath.Join(dir, "lock"), err)
	}
	_ = f.Close()
	fail := func(err error) (*checkpoint, error) {
		cp.close()
		return nil, err
	}
	switch st, err := root.Lstat("objects"); {
	case errors.Is(err, fs.ErrNotExist):
		if err := root.Mkdir("objects", 0o700); err != nil {
			return fail(fmt.Errorf("checkpoint %s: %w", dir, err))
		}
	case err != nil:
		return fail(fmt.Errorf("checkpoint %s: %w", dir, err))
	case !st.IsDir():
		return fail(fmt.Errorf("checkpoint %s refused: its objects directory is a %v, not a directory", dir, st.Mode().Type()))
	}
	cp.next = checkpointBody{Format: checkpointFormat, Bucket: bucket, Scope: proofScopeUnder(key, scope), Objects: map[string]checkpointObject{}}
	if err := cp.load(bucket); err != nil {
		return fail(err)
	}
	var known []ledger.ProofKey
	switch {
	case cp.prev.Format == "":
	case cp.prev.Scope != cp.next.Scope:
		cp.notes = append(cp.notes, "checkpoint: its proofs were made by another build of dlqctl or for other writer keys: every version is checked again")
	default:
		if known, err = cp.loadProofs(); err != nil {
			return fail(err)
		}
	}
	cp.proofs = ledger.NewProofs(cp.next.Scope, known)
	cp.stubs = stubProofs{p: cp.proofs, cp: cp, clock: now, floor: &atomic.Pointer[time.Time]{}, reused: &atomic.Int64{}, sampled: &atomic.Bool{}}
	if keys := slices.Collect(maps.Keys(cp.prev.Objects)); len(keys) > 0 {
		cp.sample = keys[mathrand.IntN(len(keys))]
	}
	if err := cp.removeUnlisted(); err != nil {
		return fail(err)
	}
	return cp, nil
}

// close unlocks the checkpoint.
func (cp *checkpoint) close() {
	_ = cp.root.Remove("lock")
	_ = cp.root.Close()
}

// mac is the manifest's HMAC.
func (cp *checkpoint) mac(body []byte) []byte {
	m := hmac.New(sha256.New, cp.key)
	m.Write([]byte(checkpointFormat + "\n"))
	m.Write(body)
	return m.Sum(nil)
}

// readFile reads a file of the checkpoint: a regular file (never a FIFO,
// a device or a link out of DIR), of at most max bytes.
func (cp *checkpoint) readFile(name string, max int64) ([]byte, error) {
	f, err := cp.root.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	switch {
	case err != nil:
		return nil, err
	case !st.Mode().IsRegular():
		return nil, fmt.Errorf("%s is a %v, not a regular file", name, st.Mode().Type())
	case st.Size() > max:
		return nil, fmt.Errorf("%s holds %d bytes, more than %d", name, st.Size(), max)
	}
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err == nil && int64(len(b)) > max {
		err = fmt.Errorf("%s holds more than %d bytes", name, max)
	}
	return b, err
}

// load reads and checks the manifest (none: a first run).
func (cp *checkpoint) load(bucket string) error {
	if _, err := cp.root.Lstat("checkpoint"); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	refused := func(why string) error {
		return fmt.Errorf("checkpoint %s refused: %s; if the key is right, the checkpoint was changed: remove the directory to start again (the next verify reads the whole ledger)", cp.dir, why)
	}
	raw, err := cp.readFile("checkpoint", checkpointMaxManifest)
	if err != nil {
		return refused(err.Error())
	}
	macHex, body, ok := bytes.Cut(raw, []byte("\n"))
	mac, err := hex.DecodeString(string(macHex))
	switch {
	case !ok || err != nil:
		return refused("no MAC on its first line")
	case !hmac.Equal(mac, cp.mac(body)):
		return refused("its MAC does not verify under --checkpoint-key")
	}
	var b checkpointBody
	if err := json.Unmarshal(body, &b); err != nil || b.Format != checkpointFormat {
		return refused("not a checkpoint of this format")
	}
	if b.Bucket != bucket {
		return &UsageError{fmt.Errorf("checkpoint %s is of ledger bucket %s, not %s: give each bucket a checkpoint of its own", cp.dir, b.Bucket, bucket)}
	}
	for key, o := range b.Objects {
		if !checkpointObjectName.MatchString(o.File) || !strings.HasPrefix(key, ledgerPrefix) || o.Size < 0 {
			return refused("object " + key + " in file " + o.File)
		}
		cp.number = max(cp.number, fileNumber(o.File)+1)
	}
	if b.Proofs.File != "" {
		if !checkpointProofsName.MatchString(b.Proofs.File) || b.Proofs.Count < 0 {
			return refused("proofs in file " + b.Proofs.File)
		}
		cp.number = max(cp.number, fileNumber(b.Proofs.File)+1)
	}
	cp.prev = b
	return nil
}

// fileNumber is the number in a checkpoint file's name.
func fileNumber(name string) int {
	var n int
	_, _ = fmt.Sscanf(strings.TrimPrefix(strings.TrimPrefix(name, "objects/"), "proofs-"), "%d", &n)
	return n
}

// loadProofs reads the proofs the manifest names.
func (cp *checkpoint) loadProofs() ([]ledger.ProofKey, error) {
	p := cp.prev.Proofs
	if p.File == "" {
		return nil, nil
	}
	size := int64(p.Count) * int64(len(ledger.ProofKey{}))
	raw, err := cp.readFile(p.File, size)
	if err != nil || ledger.SHA256Hex(raw) != p.SHA256 || int64(len(raw)) != size {
		return nil, fmt.Errorf("checkpoint %s refused: its proofs file %s is not the one its manifest names (%v): remove the directory to start again", cp.dir, p.File, err)
	}
	known := make([]ledger.ProofKey, p.Count)
	for i := range known {
		copy(known[i][:], raw[i*len(ledger.ProofKey{}):])
	}
	return known, nil
}

// removeUnlisted removes the files the manifest does not name: those of
// a run that ended before it wrote its manifest.
func (cp *checkpoint) removeUnlisted() error {
	listed := map[string]bool{cp.prev.Proofs.File: true}
	for _, o := range cp.prev.Objects {
		listed[o.File] = true
	}
	for _, sub := range []string{"objects", "."} {
		d, err := cp.root.Open(sub)
		if err != nil {
			return fmt.Errorf("checkpoint %s: %w", cp.dir, err)
		}
		ents, err := d.ReadDir(-1)
		_ = d.Close()
		if err != nil {
			return fmt.Errorf("checkpoint %s: %w", cp.dir, err)
		}
		for _, e := range ents {
			name := path.Join(sub, e.Name())
			stale := sub == "objects" || checkpointProofsName.MatchString(name) || name == "checkpoint.tmp"
			if stale && !listed[name] {
				if err := cp.root.Remove(name); err != nil {
					return fmt.Errorf("checkpoint %s: %w", cp.dir, err)
				}
			}
		}
	}
	return nil
}

// get returns the checkpoint's copy of key's first version, when it has
// that version (and its file the bytes the manifest says) and the key is
// not one of the run's sample, and the copy's file name. A version id of
// "" or "null" (a bucket without versioning) names no one version: such
// an object is always read.
func (cp *checkpoint) get(key, versionID string) (b []byte, name string, ok bool) {
	if cp == nil || versionID == "" || versionID == "null" || key == cp.sample || cp.resampled() {
		return nil, "", false
	}
	o, have := cp.prev.Objects[key]
	if !have || o.VersionID != versionID {
		return nil, "", false
	}
	b, err := cp.readFile(o.File, o.Size)
	cp.mu.Lock()
	defer cp.mu.Unlock()
	if err != nil || ledger.SHA256Hex(b) != o.SHA256 {
		cp.damaged++
		return nil, "", false
	}
	cp.reused++
	cp.next.Objects[key] = o
	return b, o.File, true
}

// put copies an object read from the bucket into the checkpoint, and
// returns the copy's file name ("": not copied, and the checkpoint will
// not be written: failed says why).
func (cp *checkpoint) put(key, versionID string, b []byte) string {
	cp.mu.Lock()
	name := fmt.Sprintf("objects/%08d", cp.number)
	cp.number++
	cp.read++
	failed := cp.failed != nil
	cp.mu.Unlock()
	if failed {
		return "" // the checkpoint is not written: no more copies
	}
	err := cp.writeNew(name, b)
	cp.mu.Lock()
	defer cp.mu.Unlock()
	if err != nil {
		if cp.failed == nil {
			cp.failed = fmt.Errorf("copying %s: %w", key, err)
		}
		return ""
	}
	cp.next.Objects[key] = checkpointObject{VersionID: versionID, SHA256: ledger.SHA256Hex(b), Size: int64(len(b)), File: name}
	return name
}

// resampled reports whether an object the checkpoint proves is read all
// the same (1 in cp.resample).
func (cp *checkpoint) resampled() bool {
	return cp.resample > 0 && mathrand.IntN(cp.resample) == 0
}

// readCopy reads the copy name of a segment again (ledger.Input's
// ReadSegment): it must still hash to sha.
func (cp *checkpoint) readCopy(name, sha string, size int64) ([]byte, error) {
	b, err := cp.readFile(name, size)
	if err == nil && ledger.SHA256Hex(b) != sha {
		err = fmt.Errorf("its copy %s changed while verify ran", filepath.Join(cp.dir, name))
	}
	return b, err
}

// writeNew writes a new file of the checkpoint, readable by its owner
// alone, to disk; when that fails, it removes what it wrote.
func (cp *checkpoint) writeNew(name string, b []byte) error {
	f, err := cp.root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = cp.root.Remove(name)
	}
	return err
}

// commit writes the new manifest with the proofs this run holds, in
// place of the old one (a rename: a run that stops before it leaves the
// old one whole), and removes the files only the old one named. written
// says whether the new manifest is in place.
func (cp *checkpoint) commit(at time.Time) (written bool, err error) {
	if cp.failed != nil {
		return false, cp.failed
	}
	proven := cp.proofs.Proven()
	raw := make([]byte, 0, len(proven)*len(ledger.ProofKey{}))
	for _, k := range proven {
		raw = append(raw, k[:]...)
	}
	cp.next.At = at.UTC().Format(time.RFC3339Nano)
	cp.next.Proofs = checkpointFile{File: fmt.Sprintf("proofs-%08d.bin", cp.number), SHA256: ledger.SHA256Hex(raw), Count: len(proven)}
	cp.number++
	if err := cp.writeNew(cp.next.Proofs.File, raw); err != nil {
		return false, err
	}
	body, err := json.Marshal(cp.next)
	if err != nil {
		return false, err
	}
	_ = cp.root.Remove("checkpoint.tmp")
	out := append([]byte(hex.EncodeToString(cp.mac(body))+"\n"), body...)
	if err := cp.writeNew("checkpoint.tmp", out); err != nil {
		return false, err
	}
	if err := cp.root.Rename("checkpoint.tmp", "checkpoint"); err != nil {
		return false, err
	}
	if d, err := cp.root.Open("."); err == nil {
		_ = d.Sync()
		_ = d.Close()
	}
	cp.prev = cp.next
	return true, cp.removeUnlisted()
}

// report is what the run did with the checkpoint.
func (cp *checkpoint) report() *CheckpointReport {
	return &CheckpointReport{Dir: cp.dir, ObjectsReused: cp.reused, ObjectsRead: cp.read, ChecksSkipped: cp.proofs.Reused(),
		ArchivedObjectsSkipped: cp.stubs.reused.Load(), WriterMACsSkipped: cp.macs.skippedCount(), Proofs: cp.next.Proofs.Count}
}

// proofScope is the scope of this build's checks with these writer keys
// (ARN → role): proofs of another build, whose checks may differ, or of
// other keys, are not used. The build is the running executable's bytes
// (on Linux /proc/self/exe: the file it started from, even if replaced
// since).
func proofScope(writerKeys map[string]string) (string, error) {
	exe := "/proc/self/exe"
	if runtime.GOOS != "linux" {
		var err error
		if exe, err = os.Executable(); err != nil {
			return "", err
		}
	}
	raw, err := os.ReadFile(exe)
	if err != nil {
		return "", err
	}
	keys, err := json.Marshal(writerKeys) // sorted by ARN
	if err != nil {
		return "", err
	}
	return ledger.SHA256Hex(append(append([]byte(ledger.SHA256Hex(raw)), 0), keys...)), nil
}

// proofScopeUnder is scope under the checkpoint's key: every proof is
// then a MAC only the key's holder can make, whatever else guards the
// proofs file.
func proofScopeUnder(key []byte, scope string) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte("dlqq-verify-checkpoint-scope\n" + scope))
	return hex.EncodeToString(m.Sum(nil))
}

// openCheckpoint opens o.Checkpoint for this run's ledger bucket and
// writer keys (after writerCheck).
func (a *App) openCheckpoint(o VerifyOptions) (*checkpoint, error) {
	keys := map[string]string{}
	for i, arn := range a.writerARNs {
		keys[arn] = fmt.Sprint(writerproof.Roles[i])
	}
	scope, err := proofScope(keys)
	if err != nil {
		return nil, fmt.Errorf("--checkpoint: the scope of this build's checks: %w", err)
	}
	resample := a.CheckpointResample
	switch {
	case resample == 0:
		resample = CheckpointResample
	case resample < 0:
		resample = 0
	}
	return openCheckpoint(o.Checkpoint, o.CheckpointKey, a.LedgerBucket, scope, a.Now, resample)
}

// addCheckpoint writes the checkpoint and says what the run did with it
// (after addLedger): one it could not write is a note, and the run's
// result stands.
func (res *VerifyResult) addCheckpoint(cp *checkpoint, at time.Time) {
	switch written, err := cp.commit(at); {
	case err != nil && written:
		res.Notes = append(res.Notes, fmt.Sprintf("checkpoint %s: written, but the files it no longer names were not all removed: %v", cp.dir, err))
	case err != nil:
		res.Notes = append(res.Notes, fmt.Sprintf("checkpoint %s: not written (the next verify starts from the one before): %v", cp.dir, err))
	}
	r := cp.report()
	if res.Ledger != nil {
		res.Ledger.Checkpoint = r
	}
	res.Notes = append(res.Notes, cp.notes...)
	if cp.damaged > 0 {
		res.Notes = append(res.Notes, fmt.Sprintf("checkpoint: %s in %s did not hash as its manifest says (changed or damaged on disk): read from the bucket again", plural(cp.damaged, "copy", "copies"), cp.dir))
	}
	res.Notes = append(res.Notes, fmt.Sprintf("checkpoint %s: %d of %d ledger objects read from it, %d from the bucket; %d checks skipped (passed in an earlier verify: versions not re-sealed, %d archived objects not read, %d writer MACs not asked of KMS); %d proofs kept",
		r.Dir, r.ObjectsReused, r.ObjectsReused+r.ObjectsRead, r.ObjectsRead, r.ChecksSkipped, r.ArchivedObjectsSkipped, r.WriterMACsSkipped, r.Proofs))
}

// stubProofs are the checkpoint's proofs of archived stubs' objects
// (s3store.StubProofs): each binds the stub as it is (its JSON), the
// object's bucket and key and its key's first version id. A proof is not
// used from a day before the stub's retain-until date: once a retention
// lapses, S3 lets it be changed.
type stubProofs struct {
	p     *ledger.Proofs
	cp    *checkpoint
	clock func() time.Time
	// floor is the newest signed digest's time (setFloor).
	floor *atomic.Pointer[time.Time]
	// reused counts the objects not read; sampled is set once one proven
	// object was read all the same.
	reused  *atomic.Int64
	sampled *atomic.Bool
}

// setFloor takes the newest signed digest of digests (under the public
// key der) as the earliest the clock may say.
func (s stubProofs) setFloor(digests map[string][]byte, der []byte) {
	if d, _, ok := ledger.NewestSigned(digests, der); ok {
		if at, err := time.Parse(time.RFC3339Nano, d.At); err == nil {
			s.floor.Store(&at)
		}
	}
}

// stubProofMargin is how long before the stub's retain-until date its
// proof stops being used.
const stubProofMargin = 24 * time.Hour

func (s stubProofs) key(stub *quarantine.Record, versionID string) (ledger.ProofKey, bool) {
	raw, err := json.Marshal(stub)
	if err != nil || stub.Archive == nil {
		return ledger.ProofKey{}, false
	}
	a := stub.Archive
	return s.p.Key("archive-stub", raw, []byte(a.Bucket), []byte(a.Key), []byte(versionID)), true
}

func (s stubProofs) Known(stub *quarantine.Record, versionID string) bool {
	if stub.Archive == nil || !s.now().Before(stub.Archive.RetainUntil.Add(-stubProofMargin)) {
		return false
	}
	k, ok := s.key(stub, versionID)
	if !ok || !s.p.Holds(k) {
		return false
	}
	// Read all the same: the first proven object of each run, and any at
	// random (CheckpointResample). The proof is kept only if it passes again
	// (Passed).
	if s.sampled.CompareAndSwap(false, true) || s.cp.resampled() {
		return false
	}
	s.p.Known(k)
	s.reused.Add(1)
	return true
}

// now is the auditor's clock, but never before the newest signed
// digest's time: a clock that lags cannot keep a proof past its margin.
func (s stubProofs) now() time.Time {
	now := s.clock()
	if floor := s.floor.Load(); floor != nil && floor.After(now) {
		return *floor
	}
	return now
}

func (s stubProofs) Passed(stub *quarantine.Record, versionID string) {
	if k, ok := s.key(stub, versionID); ok {
		s.p.Passed(k)
	}
}

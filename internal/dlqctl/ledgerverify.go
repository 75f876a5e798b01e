package dlqctl

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	kmstypes "github.com/aws/aws-sdk-go-v2/service/kms/types"

	"github.com/dlqquarantine/dlqq/shared/adapter/s3store"
	"github.com/dlqquarantine/dlqq/shared/domain/ledger"
)

// LedgerReadConcurrency is how many ledger objects verify and export read
// at once.
const LedgerReadConcurrency = 16

// LedgerReport is the ledger's part of dlqctl verify.
type LedgerReport struct {
	// Versions are the ledgered changes on the shards' chains, in
	// Segments segment objects of Shards shards; Digests signed digests.
	Versions int `json:"versions"`
	Segments int `json:"segments"`
	Shards   int `json:"shards"`
	Digests  int `json:"digests"`
	// NewestDigest is the newest digest whose signature verifies (0:
	// none), signed at NewestDigestAt.
	NewestDigest           int64      `json:"newest_digest"`
	NewestDigestAt         *time.Time `json:"newest_digest_at,omitempty"`
	NewestDigestAgeSeconds float64    `json:"newest_digest_age_seconds"`
	// Problems counts the ledger's problems (in VerifyResult.Problems,
	// with a kind).
	Problems int `json:"problems"`
	// Unanchored changes are ledgered after the newest digest's heads (not
	// a problem); the oldest is OldestUnanchoredSeconds old.
	Unanchored              int     `json:"unanchored"`
	OldestUnanchoredSeconds float64 `json:"oldest_unanchored_seconds"`
	// NotYetLedgered items changed within the grace and the ledger has
	// not seen them yet (not a problem).
	NotYetLedgered int `json:"not_yet_ledgered"`
	// PublicKey says where the public key came from: the configured
	// signing key (GetPublicKey) or a file. Never a key a digest names.
	PublicKey string `json:"public_key"`
	// NewestDigestSHA256 is the SHA-256 of the newest signed digest's
	// bytes: with NewestDigest, what verify --offline --expect-digest
	// takes.
	NewestDigestSHA256 string `json:"newest_digest_sha256,omitempty"`
	// Counters is the counters' recount (nil: not run).
	Counters *CounterReport `json:"counters,omitempty"`
	// Partitions is how many partitions the records were checked in, one
	// after the other, to bound verify's memory (ledger.PartitionsFor).
	Partitions int `json:"partitions"`
	// Checkpoint is what verify --checkpoint read from its checkpoint and
	// kept (nil: none given).
	Checkpoint *CheckpointReport `json:"checkpoint,omitempty"`

	newestAge, oldestUnanchored time.Duration
}

// checkLedgerSettings refuses an online ledger check without a bucket or
// a signing key.
func (a *App) checkLedgerSettings() error {
	// A setting the stack's outputs give is filled when the stack is read
	// (or reading it says which output it lacks): each is checked on its
	// own, so one given by a flag and the other by the stack works.
	switch {
	case strings.TrimSpace(a.LedgerBucket) == "" && !a.fromStack("ledger-bucket"):
		return &UsageError{errors.New("no ledger bucket: set --ledger-bucket or DLQQ_LEDGER_BUCKET (the stack's ArchiveBucket, the ledger function's LEDGER_BUCKET), or verify --no-ledger")}
	case strings.TrimSpace(a.SigningKey) == "" && !a.fromStack("signing-key"):
		return &UsageError{errors.New("no signing key: set --signing-key or DLQQ_SIGNING_KEY (the ledger function's SIGNING_KEY_ID)")}
	}
	return a.checkPin()
}

// publicKey is the configured signing key's public key (DER), from KMS,
// and the key's ARN as KMS answered.
func (a *App) publicKey(ctx context.Context) ([]byte, string, error) {
	c, err := a.connect(ctx)
	if err != nil {
		return nil, "", err
	}
	if c.KMS == nil {
		return nil, "", errors.New("no KMS client")
	}
	out, err := c.KMS.GetPublicKey(ctx, &kms.GetPublicKeyInput{KeyId: aws.String(a.SigningKey)})
	if err != nil {
		return nil, "", fmt.Errorf("the public key of signing key %s (--signing-key, DLQQ_SIGNING_KEY): %w", a.SigningKey, err)
	}
	if out.KeyUsage != kmstypes.KeyUsageTypeSignVerify || len(out.PublicKey) == 0 {
		return nil, "", fmt.Errorf("key %s is not a signing key (key usage %s)", a.SigningKey, out.KeyUsage)
	}
	return out.PublicKey, aws.ToString(out.KeyId), nil
}

// readLedger lists every version and delete marker under ledger/
// (ListObjectVersions), and reads the first version of every digest, then
// every segment, then every baseline object (the records older than the
// stream), by its version id (digests first: every segment they name is
// written before them), LedgerReadConcurrency at once. The first version
// is the one the ledger wrote (If-None-Match) and Object Lock keeps: a
// delete marker or a version put over it hides it from ListObjectsV2 and
// GetObject, not from this read (ledger.Input.Versions names both). Each
// segment goes to segment (called from several goroutines at once), not
// into memory.
//
// With a checkpoint (cp, nil: none), an object whose first version the
// checkpoint holds is read from it, and every other object is copied into
// it as it is read; segment is then given the copy's path.
func (a *App) readLedger(ctx context.Context, cp *checkpoint, segment func(key string, b []byte, path string) error) (digests, baselines map[string][]byte, versions []ledger.ObjectVersion, err error) {
	c, err := a.connect(ctx)
	if err != nil {
		return nil, nil, nil, err
	}
	objs := s3store.ObjectVersions{API: c.S3, Bucket: a.LedgerBucket}
	if versions, err = objs.List(ctx, ledgerPrefix); err != nil {
		return nil, nil, nil, fmt.Errorf("ledger bucket %s: %w", objs.Bucket, err)
	}
	first := ledger.FirstVersions(versions)
	if digests, err = readAll(ctx, objs, cp, first, ledger.DigestPrefix); err != nil {
		return nil, nil, nil, err
	}
	if err = readEach(ctx, objs, cp, first, ledger.SegmentPrefix, segment); err != nil {
		return nil, nil, nil, err
	}
	if baselines, err = readAll(ctx, objs, cp, first, ledger.BaselinePrefix); err != nil {
		return nil, nil, nil, err
	}
	return digests, baselines, versions, nil
}

// ledgerPrefix holds the ledger's objects (ledger.SegmentPrefix,
// DigestPrefix, BaselinePrefix).
const ledgerPrefix = "ledger/"

// readAll reads the first version of every key under prefix.
func readAll(ctx context.Context, objs s3store.ObjectVersions, cp *checkpoint, first map[string]ledger.ObjectVersion, prefix string) (map[string][]byte, error) {
	out := map[string][]byte{}
	var mu sync.Mutex
	err := readEach(ctx, objs, cp, first, prefix, func(key string, b []byte, _ string) error {
		mu.Lock()
		out[key] = b
		mu.Unlock()
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// readEach reads the first version of every key under prefix and passes
// it to put (with its copy's path in the checkpoint cp, when given),
// LedgerReadConcurrency at once.
func readEach(ctx context.Context, objs s3store.ObjectVersions, cp *checkpoint, first map[string]ledger.ObjectVersion, prefix string, put func(key string, b []byte, path string) error) error {
	var keys []string
	for k := range first {
		if strings.HasPrefix(k, prefix) {
			keys = append(keys, k)
		}
	}
	var mu sync.Mutex
	var failed error
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	work := make(chan string)
	var wg sync.WaitGroup
	for range min(LedgerReadConcurrency, max(len(keys), 1)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range work {
				err := readOne(ctx, objs, cp, k, first[k].VersionID, put)
				mu.Lock()
				if err != nil && failed == nil {
					failed = err
					cancel()
				}
				mu.Unlock()
			}
		}()
	}
	for _, k := range keys {
		select {
		case work <- k:
		case <-ctx.Done():
		}
	}
	close(work)
	wg.Wait()
	if failed != nil {
		return failed
	}
	return ctx.Err()
}

// readOne reads the first version of key (from the checkpoint cp when it
// has it, else from the bucket, copied into cp) and passes it to put.
func readOne(ctx context.Context, objs s3store.ObjectVersions, cp *checkpoint, key, versionID string, put func(key string, b []byte, path string) error) error {
	b, path, ok := cp.get(key, versionID)
	if !ok {
		var err error
		if b, err = objs.Get(ctx, key, versionID); err != nil {
			return fmt.Errorf("ledger bucket %s: %w", objs.Bucket, err)
		}
		if cp != nil {
			// A copy that cannot be written (DIR full, say) fails the
			// checkpoint, not the run: the object is checked from the
			// spill directory as without one.
			path = cp.put(key, versionID, b)
		}
	}
	if err := put(key, b, path); err != nil {
		return fmt.Errorf("ledger object %s: %w", key, err)
	}
	return nil
}

// addLedger runs the ledger's verification on in and merges it into res.
// A read that fails (a segment or item file: disk full, say) fails verify.
func (res *VerifyResult) addLedger(in ledger.Input, publicKey string) error {
	lr, err := ledger.VerifyErr(in)
	if err != nil {
		return fmt.Errorf("verify could not read what it checks: %w", err)
	}
	l := &LedgerReport{Versions: lr.Entries, Segments: lr.Segments, Shards: shardCount(in.SegmentKeys), Digests: lr.Digests,
		NewestDigest: lr.LastDigest, Problems: len(lr.Problems), Unanchored: lr.Unanchored, NotYetLedgered: lr.NotYetLedgered,
		PublicKey: publicKey, oldestUnanchored: lr.OldestUnanchored, Partitions: max(1, min(in.Partitions, ledger.MaxPartitions))}
	l.OldestUnanchoredSeconds = lr.OldestUnanchored.Seconds()
	if lr.LastDigest > 0 {
		if d, err := ledger.ParseDigest(in.Digests[ledger.DigestKey(lr.LastDigest)]); err == nil {
			if at, err := time.Parse(time.RFC3339Nano, d.At); err == nil {
				l.NewestDigestAt, l.newestAge = &at, in.Now.Sub(at)
				l.NewestDigestAgeSeconds = l.newestAge.Seconds()
			}
		}
	}
	for _, p := range lr.Problems {
		what := string(p.Kind) + ": " + p.Detail
		if strings.HasPrefix(p.Detail, string(p.Kind)) {
			what = p.Detail // "deleted: deleted (...)" says it twice
		}
		res.Problems = append(res.Problems, Problem{ID: p.Subject, Kind: string(p.Kind), What: what})
	}
	res.Ledger = l
	for _, p := range lr.Pending {
		res.Notes = append(res.Notes, fmt.Sprintf("not yet ledgered: %s, %s old (a change the stream has not delivered yet; named if it stays)", p.ID, age(p.Age)))
	}
	if n := len(lr.PreLedger); n > 0 {
		res.Notes = append(res.Notes, fmt.Sprintf("pre-ledger: %s whose history before the baseline is unproven (%s)", plural(n, "record", "records"), lr.PreLedger[0].Detail))
		for _, p := range lr.PreLedger {
			res.Notes = append(res.Notes, fmt.Sprintf("pre-ledger: %s, %s", p.Subject, strings.TrimPrefix(p.Detail, "pre-ledger: ")))
		}
	}
	for _, n := range lr.Notes { // four-eyes-off actions (dynamostore.LedgerApprovalCheck)
		res.Notes = append(res.Notes, n.Subject+": "+n.Detail)
	}
	for _, n := range lr.HeadsNotReached { // verify_unproven.go
		res.Notes = append(res.Notes, fmt.Sprintf("head not proven yet: %s, %s", n.Subject, n.Detail))
	}
	for _, n := range []string{lr.WriterNote()} { // writers.go
		if n != "" {
			res.Notes = append(res.Notes, n)
		}
	}
	if l.Unanchored > 0 && l.oldestUnanchored > StaleAnchor {
		res.Notes = append(res.Notes, fmt.Sprintf("changes have waited %s for a signed digest (the ledger signs one every 5 minutes when something changed): the digest schedule is not running, or this copy lacks its newest digests", age(l.oldestUnanchored)))
	}
	return nil
}

// StaleAnchor is how long a change may wait for a digest before verify
// says so in a note: the ledger digests every 5 minutes, and at least
// hourly.
const StaleAnchor = time.Hour

// shardCount is the number of shards the segment keys name.
func shardCount(keys []string) int {
	shards := map[string]bool{}
	for _, k := range keys {
		if shard, _, ok := strings.Cut(strings.TrimPrefix(k, ledger.SegmentPrefix), "/"); ok {
			shards[shard] = true
		}
	}
	return len(shards)
}

package dlqctl

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/spf13/cobra"

	"github.com/dlqquarantine/dlqq/shared/adapter/dynamostore"
	"github.com/dlqquarantine/dlqq/shared/adapter/s3store"
	"github.com/dlqquarantine/dlqq/shared/domain/archive"
	"github.com/dlqquarantine/dlqq/shared/domain/ledger"
	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
)

// VerifyOptions are the flags of dlqctl verify.
type VerifyOptions struct {
	// Offline is a directory written by dlqctl ledger export: verify it
	// with PublicKey (a DER file), with no AWS call.
	Offline, PublicKey string
	// NoLedger checks the records only (seals, stubs, bodies), and says so.
	NoLedger bool
	// Grace: an item changed within it that the ledger has not seen yet is
	// counted as not yet ledgered, not named as a problem.
	Grace time.Duration
	// MaxDigestAge is how old the newest signed digest may be (online: at
	// the end of the scan; offline: at the copy's table scan); 0 turns
	// the check off.
	MaxDigestAge time.Duration
	// ExpectDigest is "N:SHA256", a digest recorded from the bucket on its
	// own path: the ledger checked must hold it (ledger.CheckExpectedDigest).
	ExpectDigest string
	// AsOf (offline, RFC 3339) is the time the copy is judged at: its
	// newest signed digest must be fresh then. Empty: now.
	AsOf string
	// ReadStart (offline, RFC 3339) is when the export's ledger read
	// began, as ledger export printed it: the grace runs back from it, so
	// a change made while the export read is not yet ledgered, not a
	// problem. Empty: AsOf (or now).
	ReadStart string
	// SigningKeyARN (offline) is the signing key's ARN, which every
	// digest's key_id must name. Online it is the configured key's.
	SigningKeyARN string
	// Checkpoint (online) is a directory verify reads the ledger from
	// where it can and leaves a checkpoint in, under an HMAC with the key
	// in the file CheckpointKey (checkpoint.go).
	Checkpoint, CheckpointKey string
}

// maxDigestAge is o.MaxDigestAge as ledger.Input takes it (negative:
// off).
func (o VerifyOptions) maxDigestAge() time.Duration {
	if o.MaxDigestAge == 0 {
		return -1
	}
	return o.MaxDigestAge
}

// VerifyResult is what dlqctl verify found.
type VerifyResult struct {
	Records  int `json:"records"`
	Archived int `json:"archived"`
	// Problems are every problem found: the records' and the ledger's.
	Problems []Problem `json:"problems"`
	// Held are the records set aside by an integrity hold (a transition
	// found them failing verification); they are never replayed,
	// re-sealed or archived.
	Held []quarantine.IntegrityHold `json:"held"`
	// Ledger is the ledger's part (nil, and left out, with --no-ledger or
	// when the signing key is not the pinned one).
	Ledger *LedgerReport `json:"ledger,omitempty"`
	// Trust says where the table, ledger bucket and signing key came from
	// and which key verified (online only).
	Trust *Trust `json:"trust,omitempty"`
	// Notes say what was not checked, and why.
	Notes []string `json:"notes"`

	// NotVerified is set when nothing was verified, and says why:
	// "key-fingerprint", the signing key (online) or the --public-key file
	// (offline) is not the one --key-fingerprint pins, so no record or
	// ledger object was read (Records 0 is then not a count).
	NotVerified string `json:"not_verified,omitempty"`

	// ledgerNot says why the ledger was not checked (empty: --no-ledger).
	ledgerNot string
	// notVerified is NotVerified as the text output says it.
	notVerified string
}

// NotVerifiedKeyFingerprint is VerifyResult.NotVerified when the key is
// not the pinned one.
const NotVerifiedKeyFingerprint = "key-fingerprint"

// pinRefused records in t the key verify would use (name: its ARN, or
// "file PATH") and der's fingerprint, and checks it against
// --key-fingerprint. On a mismatch it fills res (the problem, nothing
// verified) and returns true: nothing is read with that key. what is
// "signing key" or "public key"; id names it in the problem.
func (a *App) pinRefused(res *VerifyResult, t *Trust, what, id, name string, der []byte) bool {
	mismatch := t.withKey(name, der, a.KeyFingerprint)
	if mismatch == "" {
		return false
	}
	why := "the " + what + " is not the pinned one"
	res.Problems = append(res.Problems, Problem{ID: id, Kind: "key-fingerprint", What: mismatch})
	res.ledgerNot = why + " (--key-fingerprint)"
	res.NotVerified, res.notVerified = NotVerifiedKeyFingerprint, why
	return true
}

// Problem is one verification problem: the record (or ledger object, or
// shard) and what is wrong, said once (the id is not repeated in What).
// Kind names a ledger problem (ledger.Kind); record problems have none.
type Problem struct {
	ID   string `json:"id"`
	Kind string `json:"kind,omitempty"`
	What string `json:"what"`
}

// problem is p with What rid of the "record <id>: " a seal error starts
// with, which would name the record twice.
func problem(id, what string) Problem {
	return Problem{ID: id, What: strings.Replace(what, "record "+id+": ", "record ", 1)}
}

func plural(n int, one, many string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, one)
	}
	return fmt.Sprintf("%d %s", n, many)
}

func (a *App) verifyCmd() *cobra.Command {
	var o VerifyOptions
	c := command("verify", "Check every record against its seal and the signed ledger; every archived stub against its Object Lock object", func(ctx context.Context) error { return a.Verify(ctx, o) })
	f := c.Flags()
	f.StringVar(&o.Offline, "offline", "", "verify a directory written by dlqctl ledger export instead, with no AWS call (needs --public-key)")
	f.StringVar(&o.PublicKey, "public-key", "", "the signing key's public key, DER (GetPublicKey; public-key.der of an export): with --offline")
	f.BoolVar(&o.NoLedger, "no-ledger", false, "check the records only, not the ledger (the output says so)")
	f.DurationVar(&o.Grace, "grace", time.Minute, "a change this recent that the ledger has not seen yet is counted as not yet ledgered, not as a problem")
	f.DurationVar(&o.MaxDigestAge, "max-digest-age", ledger.DefaultMaxDigestAge, "how old the newest signed digest may be (online: now; offline: --as-of, else now); 0 turns the check off")
	f.StringVar(&o.ExpectDigest, "expect-digest", "", "N:SHA256: digest N (as verify or ledger export printed it) must be in the ledger, hash to SHA256 and verify, with no digest missing before it")
	f.StringVar(&o.AsOf, "as-of", "", "with --offline: judge the copy as of this time (RFC 3339, when it was exported): its newest signed digest must be fresh then (default: now)")
	f.StringVar(&o.ReadStart, "read-start", "", "with --offline: when the export's ledger read began (RFC 3339, as ledger export printed it): the grace runs back from it (default: --as-of, else now)")
	f.StringVar(&o.SigningKeyARN, "signing-key-arn", "", "with --offline: the signing key's ARN, which every digest's key_id must name (default: not checked)")
	f.StringVar(&o.Checkpoint, "checkpoint", "", "a directory of the auditor's: read the ledger objects an earlier verify copied there instead of the bucket, skip the checks it passed, and leave a new checkpoint (needs --checkpoint-key)")
	f.StringVar(&o.CheckpointKey, "checkpoint-key", "", "with --checkpoint: the file holding the key of the checkpoint's HMAC (dlqctl ledger checkpoint-key FILE makes one), which no role of the stack can read")
	a.keyFingerprintFlag(c)
	return c
}

// Verify reads every item of the table (a forensic full read: the one
// command that scans), recomputes each record's seal and body hash,
// re-reads claim-checked bodies, checks archived stubs against their
// objects, and checks the table against the signed ledger (ledger.Verify)
// with the public key of the configured signing key. It returns a
// *MismatchError listing nothing itself when problems were found.
func (a *App) Verify(ctx context.Context, o VerifyOptions) error {
	if err := a.checkOutput(); err != nil {
		return err
	}
	if o.Grace < 0 {
		return &UsageError{fmt.Errorf("--grace %s: not negative", o.Grace)}
	}
	if o.MaxDigestAge < 0 {
		return &UsageError{fmt.Errorf("--max-digest-age %s: not negative (0 turns the check off)", o.MaxDigestAge)}
	}
	ev, err := o.evidence()
	if err != nil {
		return err
	}
	switch {
	case (o.Checkpoint == "") != (o.CheckpointKey == ""):
		return &UsageError{errors.New("--checkpoint and --checkpoint-key go together")}
	case o.Checkpoint != "" && (o.Offline != "" || o.PublicKey != "" || o.NoLedger):
		return &UsageError{errors.New("--checkpoint is for verify online, with the ledger")}
	}
	if o.Offline != "" || o.PublicKey != "" {
		return a.verifyOffline(ctx, o, ev)
	}
	if !o.NoLedger {
		if err := a.checkLedgerSettings(); err != nil {
			return err
		}
	} else if err := a.checkPin(); err != nil {
		return err
	}
	c, err := a.connect(ctx)
	if err != nil {
		return err
	}
	var before map[string]string
	var cp *checkpoint
	_, _, payloads, err := a.store(ctx)
	if err != nil {
		return err
	}
	var proven s3store.StubProofs // the checkpoint's, when given
	rc := &recordCheck{res: newVerifyResult(), ctx: ctx, online: true, verifyStub: func(r *quarantine.Record) ([]archive.Problem, error) {
		return s3store.VerifyStubProven(ctx, c.S3, r, proven)
	}, payloads: payloads, concurrency: a.ObjectConcurrency}
	if ps, ok := payloads.(*s3store.Store); ok {
		ps.PinnedGone = rc.pinnedGone
	}
	// The ledger first, then the table: a change between the two reads is
	// then a table newer than its ledger, never a ledger newer than the
	// table read. The grace runs back from when the ledger read began
	// (ReadStart), so a change made while verify reads is pending however
	// long the reads take.
	in := ledger.Input{Grace: o.Grace, CheckVersion: dynamostore.LedgerVersionCheck(), Across: dynamostore.LedgerApprovalAcross(), MaxDigestAge: o.maxDigestAge(), IndexKey: dynamostore.IndexKeyOf}
	rc.res.Trust = a.trust(!o.NoLedger)
	// What verify reads goes to files, not into memory (verifyspill.go).
	spill, err := os.MkdirTemp("", "dlqctl-verify-")
	if err != nil {
		return fmt.Errorf("verify's working directory: %w", err)
	}
	defer os.RemoveAll(spill)
	segs, err := newSegmentFiles(spill)
	if err != nil {
		return fmt.Errorf("verify's working directory: %w", err)
	}
	table, err := newTableFile(spill)
	if err != nil {
		return fmt.Errorf("verify's working directory: %w", err)
	}
	defer table.close()
	if !o.NoLedger {
		var keyARN string
		if in.PublicKeyDER, keyARN, err = a.publicKey(ctx); err != nil {
			return err
		}
		if a.pinRefused(rc.res, rc.res.Trust, "signing key", "signing key "+a.SigningKey, keyARN, in.PublicKeyDER) {
			return a.report(rc.res)
		}
		if in.CheckWriter, _, err = a.writerCheck(ctx, c); err != nil { // writers.go
			return err
		}
		if o.Checkpoint != "" {
			if cp, err = a.openCheckpoint(o); err != nil {
				return err
			}
			defer cp.close()
			in.Proofs, proven, segs.cp = cp.proofs, cp.stubs, cp
			a.writerMACs.useProofs(cp) // writers.go
		}
		ev.keyARN, ev.keyFrom = keyARN, "the configured signing key"
		if before, err = a.countCheckpoints(ctx); err != nil {
			return err
		}
		in.ReadStart = a.Now()
		if in.Digests, in.Baselines, in.Versions, err = a.readLedger(ctx, cp, segs.put); err != nil {
			return err
		}
		if cp != nil {
			cp.stubs.setFloor(in.Digests, in.PublicKeyDER)
		}
		in.SegmentKeys, in.ReadSegment = segs.keys(), segs.read
		in.Headers = dynamostore.LedgerSegmentHeaders() // the counters' recount then parses a segment again only for a baseline's first changes
	}
	// Which index the listings read, asked before the scan (IndexCheck).
	bySource, err := dynamostore.ReadsSourceIndex(ctx, c.DynamoDB, a.Table)
	if err != nil {
		return err
	}
	scanAt := a.Now()
	// The listings read the source index once the backfill is complete, or
	// from the start on a table without the status index: then every
	// record must be in it.
	index := dynamostore.NewIndexChecker(bySource)
	err = a.scanEach(ctx, func(item map[string]ddbtypes.AttributeValue) error {
		rc.check(item)
		index.Add(item)
		if o.NoLedger {
			return nil
		}
		it, err := dynamostore.LedgerItem(item)
		if err != nil {
			rc.res.Problems = append(rc.res.Problems, problem(itemID(item), "unreadable item: "+err.Error()))
			return nil
		}
		if err := table.add(it); err != nil {
			return fmt.Errorf("verify's working directory: %w", err)
		}
		return nil
	})
	rc.wait() // the archived stubs' and claim-checked bodies' checks
	rc.noteGone()
	if err != nil {
		return err
	}
	in.Now = a.Now()
	for _, p := range index.Problems() {
		rc.res.Problems = append(rc.res.Problems, Problem{ID: p.ID, Kind: "index", What: p.What})
	}
	in.IndexKeyFrom = dynamostore.IndexKeyFrom(table.others, bySource, scanAt)
	in.ScanItems, in.SpillDir = table.scan, spill
	in.Partitions = ledger.PartitionsFor(segs.bytes+table.bytes, a.PartitionBytes)
	if o.NoLedger {
		rc.res.Notes = append(rc.res.Notes, "the ledger was not checked (--no-ledger): a rewritten or deleted record whose seal was recomputed passes")
		if a.KeyFingerprint != "" {
			rc.res.Notes = append(rc.res.Notes, "--key-fingerprint not applied: --no-ledger (no signing key is read)")
		}
		return a.report(rc.res)
	}
	after, err := a.countCheckpoints(ctx)
	if err != nil {
		return err
	}
	ev.counters, ev.tableItems = countersRead(before, after, table.others), table.others
	if err := rc.res.addLedger(in, "signing key "+a.SigningKey+" (GetPublicKey)"); err != nil {
		return err
	}
	if cp != nil {
		rc.res.addCheckpoint(cp, a.Now())
	}
	rc.res.addEvidence(in, ev)
	rc.res.addWriterKeys(in, a.writerARNs) // writers.go
	return a.report(rc.res)
}

func newVerifyResult() *VerifyResult {
	return &VerifyResult{Problems: []Problem{}, Held: []quarantine.IntegrityHold{}, Notes: []string{}}
}

// scanEach reads every item of the table (consistent reads), a page at a
// time, and passes each to each, stopping at its error.
func (a *App) scanEach(ctx context.Context, each func(map[string]ddbtypes.AttributeValue) error) error {
	c, err := a.connect(ctx)
	if err != nil {
		return err
	}
	p := dynamodb.NewScanPaginator(c.DynamoDB, &dynamodb.ScanInput{TableName: aws.String(a.Table), ConsistentRead: aws.Bool(true)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return describe(err, a.Table)
		}
		for _, item := range page.Items {
			if err := each(item); err != nil {
				return err
			}
		}
	}
	return nil
}

func itemID(item map[string]ddbtypes.AttributeValue) string {
	if k, ok := item["dlq_id"].(*ddbtypes.AttributeValueMemberS); ok {
		return k.Value
	}
	return "(no string dlq_id)"
}

// recordCheck is the records' part of verify: seals, stubs, bodies.
type recordCheck struct {
	res *VerifyResult
	ctx context.Context
	// online: archived stubs and claim-checked bodies are checked (else
	// counted in unchecked*).
	online                       bool
	verifyStub                   func(*quarantine.Record) ([]archive.Problem, error)
	payloads                     quarantine.PayloadStore
	uncheckedStubs, uncheckedRef int
	// The reads of S3 objects: archived stubs against their objects
	// (three S3 calls each) and claim-checked bodies (one), concurrency
	// at once (0: ObjectConcurrency), beside the scan; wait puts each
	// one's problems where the scan met its record.
	concurrency int
	jobs        chan objectJob
	queued      int
	jobWG       sync.WaitGroup
	foundMu     sync.Mutex
	found       []objectFound
	// gone are the claim-checked bodies read from their key's current
	// version, their pinned one not readable (s3store.Store.PinnedGone).
	gone []goneBody
}

// goneBody is a body read from its key's current version; notFound: S3
// said the pinned version does not exist (404), else it refused it (403).
type goneBody struct {
	ref      quarantine.ObjectRef
	notFound bool
}

// pinnedGone takes a body read from its key's current version.
func (rc *recordCheck) pinnedGone(ref quarantine.ObjectRef, notFound bool) {
	rc.foundMu.Lock()
	rc.gone = append(rc.gone, goneBody{ref, notFound})
	rc.foundMu.Unlock()
}

// maxGoneNoted is how many bodies read from their current version verify
// names one by one.
const maxGoneNoted = 20

// noteGone notes the bodies read from their key's current version: the
// bytes are the record's, but the version it pins is gone, deleted by
// whoever holds s3:DeleteObjectVersion or expired (a record written
// before uploads reused a key's version may pin one a later upload made
// noncurrent).
func (rc *recordCheck) noteGone() {
	gone := rc.gone
	rc.gone = nil
	slices.SortFunc(gone, func(a, b goneBody) int {
		return cmp.Compare(a.ref.Key+"\x00"+a.ref.VersionID, b.ref.Key+"\x00"+b.ref.VersionID)
	})
	for i, g := range gone {
		if i == maxGoneNoted {
			rc.res.Notes = append(rc.res.Notes, fmt.Sprintf("claim-check bodies: %d more read from their key's current version, the version they pin gone or refused", len(gone)-i))
			break
		}
		what := "is gone"
		if !g.notFound {
			what = "could not be read (S3 said 403: a version gone, to credentials without s3:ListBucket on the bucket, or a read refused)"
		}
		rc.res.Notes = append(rc.res.Notes, fmt.Sprintf("claim-check body %s: the version it pins (%s) %s, and the key's current version holds its bytes: deleted by hand, or expired under a record written before uploads reused a key's version", g.ref.Key, g.ref.VersionID, what))
	}
}

// ObjectConcurrency is how many archived stubs and claim-checked bodies
// verify checks against their S3 objects at once.
const ObjectConcurrency = 16

// objectJob is a record's S3 object to check, the n-th queued, whose
// problems go at position at of VerifyResult.Problems.
type objectJob struct {
	n, at int
	check func() []Problem
}

// objectFound is what an object's check found.
type objectFound struct {
	n, at    int
	problems []Problem
}

// later queues check, whose problems go where the scan is now.
func (rc *recordCheck) later(check func() []Problem) {
	if rc.jobs == nil {
		rc.jobs = make(chan objectJob)
		for range max(1, cmp.Or(rc.concurrency, ObjectConcurrency)) {
			rc.jobWG.Go(func() {
				for j := range rc.jobs {
					probs := j.check()
					if len(probs) == 0 {
						continue // only what a check found is kept
					}
					rc.foundMu.Lock()
					rc.found = append(rc.found, objectFound{n: j.n, at: j.at, problems: probs})
					rc.foundMu.Unlock()
				}
			})
		}
	}
	rc.queued++
	rc.jobs <- objectJob{n: rc.queued, at: len(rc.res.Problems), check: check}
}

// checkStub queues r's check against its archive object.
func (rc *recordCheck) checkStub(r *quarantine.Record) {
	rc.later(func() []Problem {
		probs, err := rc.verifyStub(r)
		if err != nil {
			probs = append(probs, archive.Problem{ID: r.DLQID, What: "archive object unreadable: " + err.Error()})
		}
		var out []Problem
		for _, p := range probs {
			pr := problem(p.ID, p.What)
			if p.Kind != "" {
				pr.Kind, pr.What = p.Kind, p.Kind+": "+pr.What
			}
			out = append(out, pr)
		}
		return out
	})
}

// checkBody queues the read of r's claim-checked body, which must hash
// to its body_sha256.
func (rc *recordCheck) checkBody(r *quarantine.Record) {
	rc.later(func() []Problem {
		if _, err := quarantine.LoadBody(rc.ctx, rc.payloads, r); err != nil {
			return []Problem{problem(r.DLQID, "claim-check body: "+err.Error())}
		}
		return nil
	})
}

// wait waits for the objects' checks and puts each one's problems where
// the scan met its record, as if checked there.
func (rc *recordCheck) wait() {
	if rc.jobs == nil {
		return
	}
	close(rc.jobs)
	rc.jobWG.Wait()
	rc.jobs = nil
	found := rc.found
	rc.found = nil
	slices.SortFunc(found, func(a, b objectFound) int { return cmp.Compare(a.n, b.n) })
	merged := make([]Problem, 0, len(rc.res.Problems))
	next := 0
	for _, f := range found {
		merged = append(merged, rc.res.Problems[next:f.at]...)
		merged = append(merged, f.problems...)
		next = f.at
	}
	rc.res.Problems = append(merged, rc.res.Problems[next:]...)
}

func (rc *recordCheck) check(item map[string]ddbtypes.AttributeValue) {
	res := rc.res
	k, _ := item["dlq_id"].(*ddbtypes.AttributeValueMemberS)
	if k != nil && !dynamostore.IsRecordKey(k.Value) {
		return // a policy, a counter or the ledger's state: not a record
	}
	r, err := dynamostore.Unmarshal(item)
	if err != nil {
		res.Problems = append(res.Problems, problem(itemID(item), "unreadable item: "+err.Error()))
		return
	}
	res.Records++
	if h, held := dynamostore.HoldOf(item); held {
		res.Held = append(res.Held, h)
	}
	if r.Status == quarantine.StatusArchived {
		res.Archived++
		if !rc.online {
			rc.uncheckedStubs++
			return
		}
		rc.checkStub(r)
		return
	}
	if err := quarantine.Verify(r); err != nil {
		res.Problems = append(res.Problems, problem(r.DLQID, err.Error()))
		return
	}
	if r.BodyRef != nil {
		if !rc.online {
			rc.uncheckedRef++
			return
		}
		rc.checkBody(r)
	}
}

// report writes the result and returns the mismatch error when there are
// problems.
func (a *App) report(res *VerifyResult) error {
	if a.Output == "json" {
		if err := a.writeJSON(res); err != nil {
			return err
		}
	} else {
		if res.NotVerified != "" {
			fmt.Fprintf(a.Out, "not verified: %s\n", cmp.Or(res.notVerified, res.NotVerified))
		} else {
			fmt.Fprintf(a.Out, "verified %s (%s): %s\n", plural(res.Records, "record", "records"),
				plural(res.Archived, "archived stub", "archived stubs"), plural(len(res.Problems), "problem", "problems"))
		}
		if l := res.Ledger; l != nil {
			signed := "none signed"
			if l.NewestDigest > 0 {
				signed = fmt.Sprintf("newest #%d, signed %s ago", l.NewestDigest, age(l.newestAge))
			}
			fmt.Fprintf(a.Out, "ledger: %s in %s of %s, %s (%s): %s\n", plural(l.Versions, "version", "versions"),
				plural(l.Segments, "segment", "segments"), plural(l.Shards, "shard", "shards"), plural(l.Digests, "digest", "digests"),
				signed, plural(l.Problems, "problem", "problems"))
			l.writeEvidence(a.Out)
		} else {
			fmt.Fprintf(a.Out, "ledger: not checked (%s)\n", cmp.Or(res.ledgerNot, "--no-ledger"))
		}
		if res.Trust != nil {
			res.Trust.write(a.Out)
		}
		for _, pr := range res.Problems {
			fmt.Fprintf(a.Out, "  MISMATCH %s: %s\n", pr.ID, pr.What)
		}
		if l := res.Ledger; l != nil && l.Unanchored > 0 {
			fmt.Fprintf(a.Out, "  not yet anchored: %s, oldest %s old\n", plural(l.Unanchored, "change", "changes"), age(l.oldestUnanchored))
		}
		if l := res.Ledger; l != nil && l.NotYetLedgered > 0 {
			fmt.Fprintf(a.Out, "  not yet ledgered: %s changed within the grace (--grace)\n", plural(l.NotYetLedgered, "item", "items"))
		}
		for _, h := range res.Held {
			fmt.Fprintf(a.Out, "  HELD %s: version %d, %s, since %s\n", h.ID, h.Version, h.Reason, quarantine.At(h.At))
		}
		for _, n := range res.Notes {
			fmt.Fprintf(a.Out, "  note: %s\n", n)
		}
	}
	if len(res.Problems) > 0 {
		return &MismatchError{Count: len(res.Problems)}
	}
	return nil
}

// age is a duration as verify prints it: whole seconds.
func age(d time.Duration) string {
	if d < 0 {
		d = 0
	}
	return shortDuration(d.Round(time.Second))
}

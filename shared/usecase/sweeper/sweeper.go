// Package sweeper ages PARKED and RESOLVED records into the S3 Object Lock
// archive: it finds them through the status index (never a scan), writes
// one write-once object per record version, turns each record into an
// ARCHIVED stub with one conditional write, and only then deletes its
// claim-check objects. It is bounded by the invocation deadline, resumable,
// and safe to run beside itself, ingest and redrive.
package sweeper

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/cloudwatch"
	cwtypes "github.com/aws/aws-sdk-go-v2/service/cloudwatch/types"

	"github.com/dlqquarantine/dlqq/shared/domain/archive"
	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
	"github.com/dlqquarantine/dlqq/shared/runtime/bytegate"
	"github.com/dlqquarantine/dlqq/shared/runtime/cwmetrics"
	"github.com/dlqquarantine/dlqq/shared/runtime/emf"
	"github.com/dlqquarantine/dlqq/shared/runtime/fanout"
)

// ActorSweeper is the actor recorded on archived stubs.
const ActorSweeper = quarantine.ActorSweeper

// Metric names the sweeper publishes (Config.Namespace; no dimension but
// MetricCompleted's).
const (
	MetricArchived      = "ArchivedRecords"
	MetricFailures      = "ArchiveFailures"
	MetricOldestParkedS = "OldestParkedAgeSeconds"
	// MetricCompleted is 1 for every run that completed, whatever it did
	// (nothing due, or stopped at its deadline or MaxPerRun with the rest
	// left for the next run), with a Table dimension (Config.Table): the
	// heartbeat the template's SweeperHeartbeatAlarm watches. A run that
	// failed publishes nothing, as a heartbeat should.
	MetricCompleted      = "SweepsCompleted"
	defaultMaxPerRun     = 2000
	defaultDeadlineSlack = 20 * time.Second
)

// Config configures the sweeper.
type Config struct {
	// Bucket is the Object Lock archive bucket (ARCHIVE_BUCKET). Required.
	Bucket string
	// KMSKeyID encrypts archive objects (ARCHIVE_KMS_KEY_ID).
	KMSKeyID string
	// ParkAge and ResolvedAge are how long a record stays PARKED or
	// RESOLVED before it is archived (PARK_AGE_SECONDS, RESOLVED_AGE_SECONDS).
	ParkAge, ResolvedAge time.Duration
	// Retention is the COMPLIANCE retention of archive objects
	// (RETENTION_DAYS, default 7 years).
	Retention time.Duration
	// MaxPerRun bounds the records one run archives (default 2000).
	MaxPerRun int
	// DeadlineMargin is the time left at which a run stops (default 20 s).
	DeadlineMargin time.Duration
	// Namespace of the published metrics (default DLQQuarantine).
	Namespace string
	// Table is the quarantine table (TABLE_NAME), the Table dimension of
	// MetricCompleted: another stack's sweeper in the same account and
	// namespace does not beat this one's heart. Empty: no dimension.
	Table string
}

// Validate reports every problem at once.
func (c Config) Validate() error {
	var errs []error
	if c.Bucket == "" {
		errs = append(errs, errors.New("ARCHIVE_BUCKET is required"))
	}
	if c.ParkAge < 0 || c.ResolvedAge < 0 {
		errs = append(errs, errors.New("ages must not be negative"))
	}
	if c.Retention < 24*time.Hour {
		errs = append(errs, fmt.Errorf("retention %s is under a day", c.Retention))
	}
	return errors.Join(errs...)
}

// MetricsAPI is the part of the CloudWatch client the sweeper uses.
type MetricsAPI interface {
	PutMetricData(ctx context.Context, in *cloudwatch.PutMetricDataInput, opts ...func(*cloudwatch.Options)) (*cloudwatch.PutMetricDataOutput, error)
}

// Archiver writes archive objects (adapter/s3store.Archiver): raw under key
// in bucket, encrypted with kmsKey and locked in COMPLIANCE mode until
// retainUntil, only if the key is free or already holds exactly raw (its
// hex SHA-256 sum). It returns the object's version and its actual
// retain-until.
type Archiver interface {
	PutArchive(ctx context.Context, bucket, kmsKey, key string, raw []byte, sum string, retainUntil time.Time) (string, time.Time, error)
}

// Service is the sweeper.
type Service struct {
	store    quarantine.Store
	lister   quarantine.Lister
	payloads quarantine.PayloadStore
	archives Archiver
	metrics  MetricsAPI
	now      func() time.Time
	log      *slog.Logger
	cfg      Config
	// archiving bounds the archive envelopes being built at once
	// (archiveBudget).
	archiving *bytegate.Gate
}

// New returns a Service; now may be nil for time.Now.
func New(store quarantine.Store, lister quarantine.Lister, payloads quarantine.PayloadStore, archives Archiver, metrics MetricsAPI,
	now func() time.Time, log *slog.Logger, cfg Config) *Service {
	if now == nil {
		now = time.Now
	}
	if cfg.MaxPerRun <= 0 {
		cfg.MaxPerRun = defaultMaxPerRun
	}
	if cfg.DeadlineMargin <= 0 {
		cfg.DeadlineMargin = defaultDeadlineSlack
	}
	if cfg.Namespace == "" {
		cfg.Namespace = emf.Namespace
	}
	return &Service{store: store, lister: lister, payloads: payloads, archives: archives, metrics: metrics, now: now, log: log, cfg: cfg,
		archiving: bytegate.New(archiveBudget)}
}

// Archived is one record the run archived.
type Archived struct {
	ID          string    `json:"id"`
	Bucket      string    `json:"bucket"`
	Key         string    `json:"key"`
	VersionID   string    `json:"version_id"`
	RetainUntil time.Time `json:"retain_until"`
}

// Failure names a record the run could not archive and why.
type Failure struct {
	ID   string `json:"id"`
	Kind string `json:"kind"`
}

// Report is the outcome of one run.
type Report struct {
	Archived []Archived `json:"archived"`
	// Skipped changed since they were selected, or were not yet due.
	Skipped int `json:"skipped"`
	// Failed could not be archived this run; they are retried next run.
	Failed   int       `json:"failed"`
	Failures []Failure `json:"failures,omitempty"`
	// Held failed verification (seal, inline body or a claim-checked
	// object): they were set aside by an integrity hold, as found, never
	// archived or re-sealed, and later runs no longer list them.
	Held []Failure `json:"held_integrity,omitempty"`
	// PayloadsLeft are archived records some of whose claim-check objects
	// are not yet deleted: a later run deletes them (IntentGrace).
	PayloadsLeft int `json:"payloads_left,omitempty"`
	// PayloadsFreed are earlier runs' archived records whose claim-check
	// objects this run deleted.
	PayloadsFreed int `json:"payloads_freed,omitempty"`
	// Remaining due records this run did not reach.
	Remaining        int     `json:"remaining"`
	OldestParkedAgeS float64 `json:"oldest_parked_age_seconds"`
	Stopped          string  `json:"stopped"`
}

// Run archives what is due. Failures of single records are counted and
// retried next run; an error means the run could not select records or
// publish its metrics.
func (s *Service) Run(ctx context.Context) (*Report, error) {
	now := s.now()
	rep := &Report{Stopped: "done"}
	s.settleIntents(ctx, now, rep)
	var due []string
	for _, q := range []quarantine.ListQuery{
		{Status: quarantine.StatusParked, StatusSinceBefore: now.Add(-s.cfg.ParkAge), Limit: 1000},
		{Status: quarantine.StatusResolved, StatusSinceBefore: now.Add(-s.cfg.ResolvedAge), Limit: 1000},
	} {
		// Select first, then change (docs/emulators.md).
		for page, err := range quarantine.Pages(ctx, s.lister, q) {
			if err != nil {
				return nil, fmt.Errorf("list %s records: %w", q.Status, err)
			}
			due = append(due, page.IDs...)
			if len(due) > s.cfg.MaxPerRun {
				break
			}
		}
	}
	// An id listed twice (a record that moved between the two listings
	// of an eventually consistent index) is archived once.
	due = uniqueInOrder(due)
	if len(due) > s.cfg.MaxPerRun {
		rep.Remaining, rep.Stopped = len(due)-s.cfg.MaxPerRun, "max_per_run"
		due = due[:s.cfg.MaxPerRun]
	}
	// A batch of up to readAhead records at a time: read again after
	// selection, each archived (its object PUT) and its stub made,
	// Concurrency at once, the batch's stubs announced (one writer-proof
	// MAC for the batch), then the stubs written, Concurrency at once.
	// The report lists the batch in selection order.
	for start := 0; start < len(due); start += readAhead {
		batch := due[start:min(start+readAhead, len(due))]
		fresh, err := s.store.GetMany(ctx, batch)
		if err != nil {
			return nil, fmt.Errorf("read records: %w", err)
		}
		staged, started, errs := s.archiveBatch(ctx, batch, fresh)
		var ready []*stubbed
		for i, id := range batch {
			switch {
			case !started[i]:
				rep.Remaining++
				rep.Stopped = "deadline"
			case errs[i] != nil:
				s.note(ctx, rep, id, errs[i])
			default:
				ready = append(ready, staged[i])
			}
		}
		stubs := make([]*quarantine.Record, len(ready))
		for i, st := range ready {
			stubs[i] = st.stub
		}
		if err := quarantine.Announce(ctx, s.store, stubs); err != nil {
			s.log.WarnContext(ctx, "stubs not announced: each is proved on its own", "error_kind", quarantine.ErrorKind(err))
		}
		// Every archived record's stub write is started, whatever the
		// deadline (its object is in the bucket already; archiveBatch left
		// half the margin for the stubs).
		written, left := make([]*Archived, len(ready)), make([]bool, len(ready))
		stubErrs := fanout.Run(context.WithoutCancel(ctx), len(ready), Concurrency, func(_ context.Context, i int) (err error) {
			defer recoverAs(&err)
			written[i], left[i], err = s.writeStub(ctx, ready[i])
			return err
		})
		for i, st := range ready {
			if stubErrs[i] != nil {
				if ctx.Err() != nil {
					// Out of time: its object is written, and the next run
					// finds it (the archive's conditional PUT) and writes
					// the stub.
					rep.Stopped = "deadline"
				}
				s.note(ctx, rep, st.rec.DLQID, stubErrs[i])
				continue
			}
			rep.Archived = append(rep.Archived, *written[i])
			if left[i] {
				rep.PayloadsLeft++
			}
		}
		if rep.Stopped == "deadline" {
			rep.Remaining += len(due) - start - len(batch)
			break
		}
	}
	oldest, err := s.oldestParked(ctx, now)
	if err != nil {
		return nil, err
	}
	rep.OldestParkedAgeS = oldest.Seconds()
	err = s.publish(ctx, rep)
	s.log.InfoContext(ctx, "sweep finished", "archived", len(rep.Archived), "skipped", rep.Skipped, "failed", rep.Failed, "held_integrity", len(rep.Held),
		"payloads_left", rep.PayloadsLeft, "payloads_freed", rep.PayloadsFreed, "remaining", rep.Remaining, "oldest_parked_age_seconds", rep.OldestParkedAgeS, "stopped", rep.Stopped)
	return rep, err
}

var errSkip = errors.New("record changed or not due")

// heldError says archiveOne set the record aside: it failed verification.
type heldError struct{ reason string }

func (e *heldError) Error() string { return "record held: " + e.reason }

// hold sets rec aside, as found, for failing verification with cause.
func (s *Service) hold(ctx context.Context, rec *quarantine.Record, cause error) error {
	reason := quarantine.HoldReason(cause)
	err := s.store.Hold(ctx, quarantine.IntegrityHold{ID: rec.DLQID, Version: rec.Version, Reason: reason, At: s.now().UTC()})
	switch {
	case errors.Is(err, quarantine.ErrVersionConflict), errors.Is(err, quarantine.ErrNotFound):
		return errSkip // it changed since the read: the next run reads it again
	case err != nil:
		return fmt.Errorf("hold record: %w", err)
	}
	return &heldError{reason: reason}
}

// readAhead is how many selected records one batch read fetches.
const readAhead = 100

// Concurrency is how many records of a batch are archived, and how many
// stubs written, at once: an archive waits on S3 (its payloads' GETs, its
// object's PUT) and DynamoDB, one record at a time about 40 ms under AWS's
// latencies (docs/performance.md). Large records are fewer at once
// (archiveBudget: TestPeakMemoryFitsTheTemplate).
const Concurrency = 8

// archiveBatch archives the records of batch, Concurrency at once and
// within archiveBudget of their envelopes' estimated size, each with
// archiveOne; none starts once less than the deadline margin is left
// (started[i] false: the record is left for the next run), and each must
// be done by half the margin before the deadline (or fails, and is
// archived again next run), so that the other half is left for the stubs.
func (s *Service) archiveBatch(ctx context.Context, batch []string, fresh map[string]*quarantine.Record) (staged []*stubbed, started []bool, errs []error) {
	startCtx, archiveCtx := ctx, ctx
	if dl, ok := ctx.Deadline(); ok {
		var cancelStart, cancelArchive context.CancelFunc
		startCtx, cancelStart = context.WithDeadline(ctx, dl.Add(-s.cfg.DeadlineMargin))
		archiveCtx, cancelArchive = context.WithDeadline(ctx, dl.Add(-s.cfg.DeadlineMargin/2))
		defer cancelStart()
		defer cancelArchive()
	}
	staged, started = make([]*stubbed, len(batch)), make([]bool, len(batch))
	errs = fanout.Run(startCtx, len(batch), Concurrency, func(_ context.Context, i int) (err error) {
		defer s.archiving.Acquire(envelopeEstimate(fresh[batch[i]]))()
		if err := startCtx.Err(); err != nil {
			return err // the margin came while it waited for the budget: not started
		}
		started[i] = true
		defer recoverAs(&err)
		staged[i], err = s.archiveOne(archiveCtx, batch[i], fresh)
		return err
	})
	return staged, started, errs
}

// archiveBudget bounds the estimated size of the archive envelopes being
// built at once: Concurrency records of ordinary size, one at a time when
// each is large (a 1 MiB body with corrections, whose JSON escapes take
// up to six bytes per byte).
const archiveBudget = 32 << 20

// envelopeEstimate is an upper bound of the memory rec's archive envelope
// takes: its bodies (the original, every correction's) and attributes, six
// bytes per byte (json.Marshal writes "<" as \u003c), and the record.
func envelopeEstimate(rec *quarantine.Record) int64 {
	if rec == nil {
		return 1
	}
	size := func(inline int, ref *quarantine.ObjectRef) int64 {
		if ref != nil {
			return ref.Size
		}
		return int64(inline)
	}
	n := size(len(rec.Body), rec.BodyRef)
	for _, c := range rec.Corrections {
		n += size(len(c.Body), c.BodyRef)
	}
	if rec.AttributesRef != nil {
		n += rec.AttributesRef.Size
	}
	return 6*n + 64<<10
}

// recoverAs turns a panic of the archive or stub goroutine into its error:
// the Lambda runtime recovers the handler's goroutine, not these.
func recoverAs(err *error) {
	if p := recover(); p != nil {
		*err = fmt.Errorf("panic: %v", p)
	}
}

// uniqueInOrder is ids without repeats, first occurrences in order.
func uniqueInOrder(ids []string) []string {
	seen := make(map[string]bool, len(ids))
	out := ids[:0:0]
	for _, id := range ids {
		if !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	return out
}

// note counts id's outcome err in rep: skipped, held or failed.
func (s *Service) note(ctx context.Context, rep *Report, id string, err error) {
	var held *heldError
	switch {
	case errors.Is(err, errSkip):
		rep.Skipped++
	case errors.As(err, &held):
		rep.Held = append(rep.Held, Failure{ID: id, Kind: held.reason})
		s.log.WarnContext(ctx, "record fails verification: held, not archived", "record", quarantine.LogRef(id), "reason", held.reason)
	default:
		rep.Failed++
		rep.Failures = append(rep.Failures, Failure{ID: id, Kind: quarantine.ErrorKind(err)})
		s.log.WarnContext(ctx, "archive failed; retried next run", "record", quarantine.LogRef(id), "error_kind", quarantine.ErrorKind(err))
	}
}

// archiveOne archives the record read for id (its object PUT and
// confirmed) and makes its stub; writeStub writes it.
func (s *Service) archiveOne(ctx context.Context, id string, fresh map[string]*quarantine.Record) (*stubbed, error) {
	now := s.now()
	rec := fresh[id] // read after selection (Run's batch read)
	if rec == nil {
		return nil, errSkip // gone since
	}
	// Re-read after selection: a record that changed is archived in its
	// current state or, if no longer due, not at all.
	if !rec.Archivable(now, s.cfg.ParkAge, s.cfg.ResolvedAge) {
		return nil, errSkip
	}
	if err := quarantine.Verify(rec); err != nil {
		// Never archive (or re-seal) a record whose seal does not hold:
		// set it aside where an operator sees it, not failed every run.
		return nil, s.hold(ctx, rec, err)
	}
	env, err := archive.Build(ctx, s.payloads, rec)
	if quarantine.IsIntegrityFailure(err) {
		return nil, s.hold(ctx, rec, err) // a claim-checked object changed
	}
	if err != nil {
		return nil, err
	}
	raw, sum, err := env.Encode()
	if err != nil {
		return nil, err
	}
	key := archive.Key(rec)
	retain := now.Add(s.cfg.Retention).UTC().Truncate(time.Second)
	version, retain, err := s.archives.PutArchive(ctx, s.cfg.Bucket, s.cfg.KMSKeyID, key, raw, sum, retain)
	if err != nil {
		return nil, err
	}
	stub, err := rec.ArchiveStub(ActorSweeper, quarantine.ArchiveRef{
		Bucket: s.cfg.Bucket, Key: key, VersionID: version, RetainUntil: quarantine.At(retain),
		SHA256: sum, Seal: rec.Seal, ArchivedAt: quarantine.At(now),
	}, now)
	if err != nil {
		return nil, err
	}
	return &stubbed{rec: rec, stub: stub, key: key, version: version, retain: retain}, nil
}

// stubbed is a record whose archive object is written and confirmed, and
// the stub that replaces it.
type stubbed struct {
	rec, stub *quarantine.Record
	key       string
	version   string
	retain    time.Time
}

// writeStub replaces the record with its stub, then deletes its
// claim-check objects. Their payload intent is recorded first (after the
// archive object is confirmed, before the stub; no stub without it):
// whatever happens after it (the stub's answer lost, a delete refused, the
// run ending), a later run finishes or drops it (settleIntents).
// payloadsLeft says that some objects are left for a later run.
func (s *Service) writeStub(ctx context.Context, st *stubbed) (_ *Archived, payloadsLeft bool, _ error) {
	rec, stub, id, key, version, retain := st.rec, st.stub, st.rec.DLQID, st.key, st.version, st.retain
	refs := quarantine.PayloadRefs(rec)
	intent := quarantine.PayloadIntent{
		Key: quarantine.PayloadIntentKey(id, stub.Version), ID: id, Source: rec.Source, Version: stub.Version, At: quarantine.At(s.now()),
		Archive: quarantine.ArchiveObject{Bucket: s.cfg.Bucket, Key: key, VersionID: version}, Refs: refs,
	}
	if len(refs) > 0 {
		rev, err := s.store.RecordPayloadIntent(ctx, intent)
		if err != nil {
			// The archive object is written: the next run finds it and
			// tries again.
			return nil, false, fmt.Errorf("record payload intent: %w", err)
		}
		intent.Rev = rev
	}
	if err := s.store.Replace(ctx, rec, stub); err != nil {
		if errors.Is(err, quarantine.ErrVersionConflict) {
			// It changed after the read: the next run archives the new
			// version under its own key, and a later run drops this
			// intent, nothing deleted (or, should the stub be there after
			// all, deletes its objects).
			return nil, false, errSkip
		}
		return nil, false, fmt.Errorf("write stub: %w", err)
	}
	// The archive copy is confirmed and the stub written: only now may the
	// claim-check objects go.
	if len(refs) > 0 {
		payloadsLeft = s.freePayloads(ctx, intent) != nil
	}
	return &Archived{ID: id, Bucket: s.cfg.Bucket, Key: key, VersionID: version, RetainUntil: retain}, payloadsLeft, nil
}

// freePayloads deletes the claim-check objects of in, whose stub is
// written, and drops the intent; when some are not deleted, the intent is
// kept with those alone, postponed (postpone), and the error says so.
func (s *Service) freePayloads(ctx context.Context, in quarantine.PayloadIntent) error {
	var left []quarantine.ObjectRef
	var errs []error
	for _, r := range in.Refs {
		if err := s.payloads.DeletePayload(ctx, r); err != nil {
			left = append(left, r)
			errs = append(errs, err)
			s.log.WarnContext(ctx, "claim-check object not deleted; a later run deletes it", "record", quarantine.LogRef(in.ID), "error_kind", quarantine.ErrorKind(err))
		}
	}
	if len(left) == 0 {
		s.drop(ctx, in)
		return nil
	}
	in.Refs = left
	s.postpone(ctx, in)
	return errors.Join(errs...)
}

// drop drops intent in, unless another run replaced or dropped it since
// (it settles its own). A drop that fails leaves in for a later run: its
// deletes are repeated (DeletePayload: an object deleted already, also
// one whose version the bucket's lifecycle removed since, is done).
func (s *Service) drop(ctx context.Context, in quarantine.PayloadIntent) {
	if err := s.store.DropPayloadIntent(ctx, in); err != nil && !errors.Is(err, quarantine.ErrIntentMoved) {
		s.log.WarnContext(ctx, "payload intent not dropped; a later run settles it again", "record", quarantine.LogRef(in.ID), "error_kind", quarantine.ErrorKind(err))
	}
}

// postpone stores in again as written now, so that it comes due after
// IntentGrace behind the intents waiting (one that cannot be settled never
// holds the others up), unless another run replaced or dropped it since.
func (s *Service) postpone(ctx context.Context, in quarantine.PayloadIntent) {
	in.At = quarantine.At(s.now())
	if _, err := s.store.ReplacePayloadIntent(ctx, in); err != nil && !errors.Is(err, quarantine.ErrIntentMoved) {
		s.log.WarnContext(ctx, "payload intent not postponed", "record", quarantine.LogRef(in.ID), "error_kind", quarantine.ErrorKind(err))
	}
}

// IntentGrace is how old a payload intent must be before a later run
// settles it: longer than a sweeper invocation can last (Lambda's 15
// minutes), so that the run that wrote it has ended.
const IntentGrace = 20 * time.Minute

// intentsPerRun bounds the payload intents one run settles (Concurrency
// at once, a few requests each).
const intentsPerRun = 1000

// settleIntents finishes or drops the payload intents earlier runs left
// (IntentGrace), before the run archives anything (a run that archives
// until its deadline still settles them): when the record's stub is the
// one the intent was written for (ARCHIVED, pointing at the intent's
// archive object, its seal intact), the intent's objects are deleted, each
// only if it is one of that record's claim-check objects
// (quarantine.OwnsPayload) in the payload bucket; when the record is not
// archived, is gone or points at another archive object, the stub was
// never written: the intent is dropped and nothing deleted. What it cannot
// settle is a failure of the run, and postponed.
func (s *Service) settleIntents(ctx context.Context, now time.Time, rep *Report) {
	fail := func(id, kind string) {
		rep.Failed++
		rep.Failures = append(rep.Failures, Failure{ID: id, Kind: kind})
	}
	due, err := s.store.DuePayloadIntents(ctx, now.Add(-IntentGrace), intentsPerRun)
	if err != nil {
		s.log.WarnContext(ctx, "payload intents not read; the next run reads them", "error_kind", quarantine.ErrorKind(err))
		fail("", "payload_intents_unread")
		return
	}
	kinds := make([]string, len(due))
	errs := fanout.Run(ctx, len(due), Concurrency, func(_ context.Context, i int) (err error) {
		defer recoverAs(&err)
		in := due[i]
		kinds[i] = "payload_intent_panic" // until settleIntent says
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) < s.cfg.DeadlineMargin {
			kinds[i] = ""
			return nil // the next run settles the rest
		}
		if in.Malformed != "" {
			// Written by no run of the sweeper: nothing it names is
			// deleted, and it is not read again.
			s.log.WarnContext(ctx, "payload intent does not read: dropped, nothing deleted", "intent", quarantine.LogRef(in.Key), "reason", in.Malformed)
			s.drop(ctx, in)
			kinds[i] = "payload_intent_malformed"
			return errMalformedIntent
		}
		kinds[i], err = s.settleIntent(ctx, in)
		if err != nil {
			s.log.WarnContext(ctx, "payload intent not settled; a later run tries again", "record", quarantine.LogRef(in.ID), "kind", kinds[i], "error_kind", quarantine.ErrorKind(err))
		}
		return err
	})
	for i, in := range due {
		switch {
		case kinds[i] == "":
			// Not started (the run's time is up): the next run settles it.
		case errs[i] != nil && in.Malformed != "":
			fail(in.Key, kinds[i])
		case errs[i] != nil:
			fail(in.ID, kinds[i])
		case kinds[i] == "freed":
			rep.PayloadsFreed++
		}
	}
}

var errMalformedIntent = errors.New("payload intent does not read")

// settleIntent settles one intent: "freed" (its objects deleted) or
// "dropped" (no stub of it: nothing deleted); an error with the kind of
// failure otherwise (the intent postponed).
func (s *Service) settleIntent(ctx context.Context, in quarantine.PayloadIntent) (string, error) {
	rec, err := s.store.Get(ctx, in.ID)
	if err != nil && !errors.Is(err, quarantine.ErrNotFound) {
		s.postpone(ctx, in)
		return "payload_intent_unread_record", err
	}
	a := in.Archive
	if rec == nil || rec.Status != quarantine.StatusArchived || rec.Archive == nil ||
		rec.Archive.Bucket != a.Bucket || rec.Archive.Key != a.Key || rec.Archive.VersionID != a.VersionID {
		// The stub was never written (or another run's is there, with its
		// own intent): the objects may still be a live record's.
		if err := s.store.DropPayloadIntent(ctx, in); err != nil && !errors.Is(err, quarantine.ErrIntentMoved) {
			return "payload_intent_not_dropped", err
		}
		s.log.InfoContext(ctx, "payload intent of a stub never written: dropped, nothing deleted", "record", quarantine.LogRef(in.ID))
		return "dropped", nil
	}
	if err := quarantine.Verify(rec); err != nil {
		// Evidence is kept: nothing is deleted for a stub whose seal fails.
		s.postpone(ctx, in)
		return "payload_intent_stub_unverified", err
	}
	for _, r := range in.Refs {
		if !quarantine.OwnsPayload(rec, r.Key) {
			s.postpone(ctx, in)
			return "payload_intent_foreign_object", quarantine.ErrForeignPayload
		}
	}
	if err := s.freePayloads(ctx, in); err != nil {
		if errors.Is(err, quarantine.ErrForeignPayload) {
			return "payload_intent_foreign_object", err // outside the payload bucket
		}
		return "payload_delete", err
	}
	return "freed", nil
}

// oldestParked is the age, from first_seen, of the oldest PARKED record:
// one indexed query of one item per index partition (across sources, a
// store that lists source by source is asked for the oldest of each:
// quarantine.Oldest).
func (s *Service) oldestParked(ctx context.Context, now time.Time) (time.Duration, error) {
	// (Past the oldest records under an integrity hold, which a store may
	// filter out after its Limit: an empty page is not the end.)
	e, ok, err := quarantine.Oldest(ctx, s.lister, quarantine.ListQuery{Status: quarantine.StatusParked, Limit: 1})
	if err != nil {
		return 0, fmt.Errorf("oldest parked: %w", err)
	}
	if !ok {
		return 0, nil
	}
	rec, err := s.store.Get(ctx, e.ID)
	if err != nil {
		return 0, fmt.Errorf("oldest parked: %w", err)
	}
	return now.Sub(rec.FirstSeen.Time), nil
}

func (s *Service) publish(ctx context.Context, rep *Report) error {
	if s.metrics == nil {
		return nil
	}
	var table []cwtypes.Dimension
	if s.cfg.Table != "" {
		table = append(table, cwmetrics.Dim("Table", s.cfg.Table))
	}
	err := cwmetrics.Put(ctx, s.metrics, s.cfg.Namespace, []cwtypes.MetricDatum{
		cwmetrics.Datum(MetricArchived, float64(len(rep.Archived)), cwtypes.StandardUnitCount),
		cwmetrics.Datum(MetricFailures, float64(rep.Failed), cwtypes.StandardUnitCount),
		cwmetrics.Datum(MetricOldestParkedS, rep.OldestParkedAgeS, cwtypes.StandardUnitSeconds),
		cwmetrics.Datum(MetricCompleted, 1, cwtypes.StandardUnitCount, table...),
	})
	if err != nil {
		return fmt.Errorf("publish metrics: %w", err)
	}
	return nil
}

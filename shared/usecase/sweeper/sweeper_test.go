package sweeper_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatch"
	cwtypes "github.com/aws/aws-sdk-go-v2/service/cloudwatch/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/dlqquarantine/dlqq/shared/adapter/dynamostore"
	"github.com/dlqquarantine/dlqq/shared/adapter/s3store"
	"github.com/dlqquarantine/dlqq/shared/dev/countstream"
	"github.com/dlqquarantine/dlqq/shared/dev/embedded"
	"github.com/dlqquarantine/dlqq/shared/dev/memstore"
	"github.com/dlqquarantine/dlqq/shared/dev/storetest"
	"github.com/dlqquarantine/dlqq/shared/domain/archive"
	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
	"github.com/dlqquarantine/dlqq/shared/runtime/clock"
	"github.com/dlqquarantine/dlqq/shared/usecase/ingest"
	"github.com/dlqquarantine/dlqq/shared/usecase/sweeper"
)

// env is one stack per test: the sweeper works across the whole table.
type env struct {
	st       *embedded.Stack
	store    *dynamostore.Store
	lister   *dynamostore.Lister
	payloads *s3store.Store
	q        *ingest.Quarantiner
	k        quarantine.Corrector
	src      *quarantine.Source
	clock    *clock.Fake
	bucket   string
}

func newEnv(t *testing.T) *env {
	t.Helper()
	st, err := embedded.Start(context.Background(), embedded.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	table := st.Names["QuarantineTable"]
	e := &env{
		st: st, store: dynamostore.New(st.Clients.DynamoDB, table), lister: dynamostore.NewLister(st.Clients.DynamoDB, table),
		payloads: s3store.New(st.Clients.S3, st.Names["PayloadBucket"], ""),
		src:      &quarantine.Source{Name: "inventory", ARN: "arn:aws:sqs:us-east-1:000000000000:inventory", IdempotencyPointer: "/event_id", RedriveCap: 3},
		clock:    clock.NewFake(time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)),
		bucket:   st.Names["ArchiveBucket"],
	}
	e.q = ingest.NewQuarantiner(e.store, e.payloads, e.clock.Now, ingest.QuarantinerConfig{Sources: map[string]*quarantine.Source{"inventory": e.src}})
	e.k = quarantine.Corrector{Store: e.store, Payloads: e.payloads, Now: e.clock.Now, Sources: map[string]*quarantine.Source{"inventory": e.src}}
	return e
}

func (e *env) sweeper(store quarantine.Store, s3api s3store.ArchiveAPI) *sweeper.Service {
	return e.sweeperOn(store, e.lister, s3api)
}

// sweeperOn is the sweeper on store (nil: the env's), listing with lister.
func (e *env) sweeperOn(store quarantine.Store, lister quarantine.Lister, s3api s3store.ArchiveAPI) *sweeper.Service {
	// Each stack its own namespace: the emulator's CloudWatch is process-wide.
	if store == nil {
		store = e.store
	}
	if s3api == nil {
		s3api = e.st.Clients.S3
	}
	return sweeper.New(store, lister, e.payloads, s3store.Archiver{API: s3api}, e.st.Clients.CloudWatch, e.clock.Now,
		slog.New(slog.NewJSONHandler(io.Discard, nil)),
		// Retention is counted from the fake clock: ten years keeps its
		// retain-until in the real future, as S3 requires.
		sweeper.Config{Bucket: e.bucket, ParkAge: time.Hour, ResolvedAge: 2 * time.Hour, Retention: 3650 * 24 * time.Hour, Namespace: e.st.Env.StackName})
}

// quarantine stores one record and returns it.
func (e *env) quarantine(t *testing.T, id, body string) *quarantine.Record {
	t.Helper()
	out, err := e.q.Quarantine(context.Background(), ingest.Message{MessageID: "m-" + id, SourceARN: e.src.ARN, Body: []byte(body)})
	if err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(time.Millisecond)
	return out.Record
}

func inv(id, pad string) string {
	return `{"event_id":"` + id + `","ndc":"12345-678-90","lot":"L","quantity_delta":1,"schedule":"CII","facility":"F","occurred_at":"2026-11-01T10:00:00Z","note":"` + pad + `"}`
}

// park moves a record to PARKED as poison, as redrive does at the cap.
func (e *env) park(t *testing.T, r *quarantine.Record) *quarantine.Record {
	t.Helper()
	r, err := e.store.Get(context.Background(), r.DLQID)
	if err != nil {
		t.Fatal(err)
	}
	p, err := r.ParkPoison("test", e.clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	if err := e.store.Replace(context.Background(), r, p); err != nil {
		t.Fatal(err)
	}
	return p
}

// parked stores record id, its event padded with pad, and parks it.
func (e *env) parked(t *testing.T, id, pad string) *quarantine.Record {
	t.Helper()
	return e.park(t, e.quarantine(t, id, inv(id, pad)))
}

// resolve takes a record through one replay to RESOLVED.
func (e *env) resolve(t *testing.T, r *quarantine.Record) *quarantine.Record {
	t.Helper()
	ctx := context.Background()
	c, err := r.Claim("test", e.clock.Now(), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	m, err := c.MarkRedriven("test", "msg", e.clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	s, err := m.Settle(e.clock.Now(), 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, step := range [][2]*quarantine.Record{{r, c}, {c, m}, {m, s}} { // each version written, as redrive writes them
		if err := e.store.Replace(ctx, step[0], step[1]); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// arriveAgain records one more failure of the record at id, as an arrival
// racing the sweeper does (it fails t without stopping the sweeper's write
// it runs in).
func (e *env) arriveAgain(t *testing.T, id string) {
	ctx := context.Background()
	cur, _ := e.store.Get(ctx, id)
	next, err := cur.Arrive(quarantine.Attempt{At: quarantine.At(e.clock.Now()), Stage: "consumer", Reason: "again", MessageID: "x", Actor: quarantine.ActorIngest},
		quarantine.Classification{Class: quarantine.ClassExhausted, Stage: "consumer", Reason: "again", Signature: "consumer|again|"}, 20, e.clock.Now())
	if err != nil {
		t.Error(err)
		return
	}
	if err := e.store.Replace(ctx, cur, next); err != nil {
		t.Error(err)
	}
}

func (e *env) get(t *testing.T, id string) *quarantine.Record {
	t.Helper()
	r, err := e.store.Get(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func (e *env) versions(t *testing.T, key string) int {
	t.Helper()
	out, err := e.st.Clients.S3.ListObjectVersions(context.Background(), &s3.ListObjectVersionsInput{Bucket: aws.String(e.bucket), Prefix: aws.String(key)})
	if err != nil {
		t.Fatal(err)
	}
	return len(out.Versions)
}

func TestArchiveIsWriteOnceAndVerifies(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	parked := e.parked(t, "a", "")
	big := e.parked(t, "big", strings.Repeat("x", 300<<10))
	if big.BodyRef == nil {
		t.Fatal("the large record has no claim check")
	}
	resolved := e.resolve(t, e.quarantine(t, "r", inv("r", "")))
	e.clock.Advance(3 * time.Hour)
	rep, err := e.sweeper(nil, nil).Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Archived) != 3 || rep.Failed != 0 {
		t.Fatalf("report %+v", rep)
	}
	for _, r := range []*quarantine.Record{parked, big, resolved} {
		stub := e.get(t, r.DLQID)
		if stub.Status != quarantine.StatusArchived || stub.Body != "" || stub.BodyRef != nil || stub.Archive == nil {
			t.Fatalf("%s: stub %+v", r.DLQID, stub)
		}
		problems, err := s3store.VerifyStub(ctx, e.st.Clients.S3, stub)
		if err != nil || len(problems) != 0 {
			t.Fatalf("%s: %v %v", r.DLQID, problems, err)
		}
		if stub.PrevSeal != r.Seal || stub.Archive.Seal != r.Seal {
			t.Fatalf("%s: the stub does not chain to the archived version", r.DLQID)
		}
		a := stub.Archive
		// COMPLIANCE: the version cannot be deleted, nor its retention shortened.
		if _, err := e.st.Clients.S3.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(a.Bucket), Key: aws.String(a.Key), VersionId: aws.String(a.VersionID)}); err == nil {
			t.Fatalf("%s: archived version deleted", r.DLQID)
		}
		if _, err := e.st.Clients.S3.PutObjectRetention(ctx, &s3.PutObjectRetentionInput{Bucket: aws.String(a.Bucket), Key: aws.String(a.Key), VersionId: aws.String(a.VersionID),
			Retention: &s3types.ObjectLockRetention{Mode: s3types.ObjectLockRetentionModeCompliance, RetainUntilDate: aws.Time(a.RetainUntil.Add(-24 * time.Hour))}}); err == nil {
			t.Fatalf("%s: retention shortened", r.DLQID)
		}
		if problems, _ := s3store.VerifyStub(ctx, e.st.Clients.S3, stub); len(problems) != 0 {
			t.Fatalf("%s after the attempts: %v", r.DLQID, problems)
		}
	}
	// The claim-check body is in the archive, and gone from the payload bucket.
	if _, err := e.payloads.GetPayload(ctx, quarantine.ObjectRef{Bucket: big.BodyRef.Bucket, Key: big.BodyRef.Key, SHA256: big.BodyRef.SHA256}); err == nil {
		t.Fatal("claim-check object still readable after archiving")
	}
	obj, err := e.st.Clients.S3.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(e.bucket), Key: aws.String(e.get(t, big.DLQID).Archive.Key)})
	if err != nil {
		t.Fatal(err)
	}
	var env archive.Envelope
	if err := json.NewDecoder(obj.Body).Decode(&env); err != nil {
		t.Fatal(err)
	}
	body, err := env.Body()
	if err != nil || quarantine.BodySHA256(body) != big.BodySHA256 {
		t.Fatal("archived claim-check body does not match")
	}
}

// stubFailStore fails the first write of an ARCHIVED stub: a crash between
// the S3 put and the DynamoDB update.
type stubFailStore struct {
	quarantine.Store
	once sync.Once
}

func (s *stubFailStore) Replace(ctx context.Context, prev, r *quarantine.Record) error {
	failed := false
	if r.Status == quarantine.StatusArchived {
		s.once.Do(func() { failed = true })
	}
	if failed {
		return errors.New("crash before the stub write")
	}
	return s.Store.Replace(ctx, prev, r)
}

func TestRerunAfterCrashMakesNoSecondVersion(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.parked(t, "c", "")
	e.clock.Advance(2 * time.Hour)
	rep, err := e.sweeper(&stubFailStore{Store: e.store}, nil).Run(context.Background())
	if err != nil || rep.Failed != 1 {
		t.Fatalf("crashed run: %+v %v", rep, err)
	}
	if got := e.get(t, r.DLQID); got.Status != quarantine.StatusParked {
		t.Fatalf("status %s after the crash", got.Status)
	}
	key := archive.Key(r)
	if n := e.versions(t, key); n != 1 {
		t.Fatalf("%d versions after the crash", n)
	}
	e.clock.Advance(time.Minute)
	rep, err = e.sweeper(nil, nil).Run(context.Background())
	if err != nil || len(rep.Archived) != 1 {
		t.Fatalf("rerun: %+v %v", rep, err)
	}
	if n := e.versions(t, key); n != 1 {
		t.Fatalf("%d object versions after the rerun, want 1", n)
	}
	if problems, err := s3store.VerifyStub(context.Background(), e.st.Clients.S3, e.get(t, r.DLQID)); err != nil || len(problems) != 0 {
		t.Fatal(problems, err)
	}
}

// changingLister lets ingest append an attempt to the record right after the
// sweeper selected it.
type changingLister struct {
	quarantine.Lister
	change func()
	once   sync.Once
}

func (c *changingLister) List(ctx context.Context, q quarantine.ListQuery) (quarantine.ListPage, error) {
	p, err := c.Lister.List(ctx, q)
	if len(p.IDs) > 0 {
		c.once.Do(c.change)
	}
	return p, err
}

// racingStore lets ingest change the record between the sweeper's read and
// its stub write: the first stub written, or the first of record id when
// id is set.
type racingStore struct {
	quarantine.Store
	id     string
	change func()
	once   sync.Once
}

func (s *racingStore) Replace(ctx context.Context, prev, r *quarantine.Record) error {
	if r.Status == quarantine.StatusArchived && (s.id == "" || r.DLQID == s.id) {
		s.once.Do(s.change)
	}
	return s.Store.Replace(ctx, prev, r)
}

func TestConcurrentIngestIsNeverArchivedStale(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	r := e.parked(t, "d", "")
	e.clock.Advance(2 * time.Hour)
	refail := func(id string) func() {
		return func() {
			if _, err := e.q.Quarantine(ctx, ingest.Message{MessageID: "again-" + id, SourceARN: e.src.ARN, Body: []byte(inv("d", ""))}); err != nil {
				t.Error(err)
			}
		}
	}
	// Changed after selection: archived in its current state.
	svc := sweeper.New(e.store, &changingLister{Lister: e.lister, change: refail("1")}, e.payloads, s3store.Archiver{API: e.st.Clients.S3}, nil, e.clock.Now,
		slog.New(slog.NewJSONHandler(io.Discard, nil)), sweeper.Config{Bucket: e.bucket, ParkAge: time.Hour, ResolvedAge: time.Hour, Retention: 3650 * 24 * time.Hour})
	rep, err := svc.Run(ctx)
	if err != nil || len(rep.Archived) != 1 {
		t.Fatalf("%+v %v", rep, err)
	}
	stub := e.get(t, r.DLQID)
	obj, _ := e.st.Clients.S3.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(e.bucket), Key: aws.String(stub.Archive.Key)})
	var env archive.Envelope
	_ = json.NewDecoder(obj.Body).Decode(&env)
	if env.Record.AttemptCount != r.AttemptCount+1 || env.Record.Version != r.Version+1 {
		t.Fatalf("archived version %d with %d attempts; the record had moved to version %d", env.Record.Version, env.Record.AttemptCount, r.Version+1)
	}

	// Changed between the read and the stub write: no stub for the old
	// state; the next run archives the new version.
	r2 := e.parked(t, "e", "")
	e.clock.Advance(2 * time.Hour)
	change := func() { e.arriveAgain(t, r2.DLQID) }
	rep, err = e.sweeper(&racingStore{Store: e.store, change: change}, nil).Run(ctx)
	if err != nil || len(rep.Archived) != 0 || rep.Skipped != 1 {
		t.Fatalf("raced run: %+v %v", rep, err)
	}
	if got := e.get(t, r2.DLQID); got.Status != quarantine.StatusParked || got.Archive != nil {
		t.Fatalf("a stub points at the old state: %+v", got)
	}
	rep, err = e.sweeper(nil, nil).Run(ctx)
	if err != nil || len(rep.Archived) != 1 {
		t.Fatalf("next run: %+v %v", rep, err)
	}
	if problems, err := s3store.VerifyStub(ctx, e.st.Clients.S3, e.get(t, r2.DLQID)); err != nil || len(problems) != 0 {
		t.Fatal(problems, err)
	}
}

func TestYoungRecordsAreUntouched(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	p := e.parked(t, "y1", "")
	res := e.resolve(t, e.quarantine(t, "y2", inv("y2", "")))
	q := e.quarantine(t, "y3", inv("y3", ""))
	e.clock.Advance(90 * time.Minute) // parked is due (1 h), resolved is not (2 h)
	rep, err := e.sweeper(nil, nil).Run(ctx)
	if err != nil || len(rep.Archived) != 1 || rep.Archived[0].ID != p.DLQID {
		t.Fatalf("%+v %v", rep, err)
	}
	if e.get(t, res.DLQID).Status != quarantine.StatusResolved || e.get(t, q.DLQID).Status != quarantine.StatusQuarantined {
		t.Fatal("a young record was touched")
	}
	e.clock.Advance(time.Hour)
	rep, err = e.sweeper(nil, nil).Run(ctx)
	if err != nil || len(rep.Archived) != 1 || rep.Archived[0].ID != res.DLQID {
		t.Fatalf("%+v %v", rep, err)
	}
	if e.get(t, q.DLQID).Status != quarantine.StatusQuarantined {
		t.Fatal("a quarantined record was archived")
	}
}

// unavailableS3 answers every PutObject with a 503.
type unavailableS3 struct{ s3store.ArchiveAPI }

type slowDown struct{}

func (slowDown) Error() string {
	return "api error SlowDown: Please reduce your request rate. StatusCode: 503"
}
func (slowDown) ErrorCode() string { return "SlowDown" }

func (unavailableS3) PutObject(context.Context, *s3.PutObjectInput, ...func(*s3.Options)) (*s3.PutObjectOutput, error) {
	return nil, slowDown{}
}

func TestS3FailuresLeaveRecordsForTheNextRun(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	big := e.parked(t, "f", strings.Repeat("y", 300<<10))
	e.clock.Advance(2 * time.Hour)
	rep, err := e.sweeper(nil, unavailableS3{e.st.Clients.S3}).Run(ctx)
	if err != nil || rep.Failed != 1 || len(rep.Archived) != 0 {
		t.Fatalf("%+v %v", rep, err)
	}
	got := e.get(t, big.DLQID)
	if got.Status != quarantine.StatusParked || got.BodyRef == nil {
		t.Fatal("the record changed although the archive failed")
	}
	if _, err := quarantine.LoadBody(ctx, e.payloads, got); err != nil {
		t.Fatalf("claim-check object gone before the archive was confirmed: %v", err)
	}
	rep, err = e.sweeper(nil, nil).Run(ctx)
	if err != nil || len(rep.Archived) != 1 {
		t.Fatalf("next run: %+v %v", rep, err)
	}
}

func TestConcurrentSweepersArchiveEachRecordOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	var recs []*quarantine.Record
	for _, id := range []string{"g1", "g2", "g3", "g4", "g5", "g6"} {
		recs = append(recs, e.parked(t, id, ""))
	}
	e.clock.Advance(2 * time.Hour)
	var wg sync.WaitGroup
	total := make([]int, 2)
	for i := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rep, err := e.sweeper(nil, nil).Run(ctx)
			if err != nil {
				t.Error(err)
				return
			}
			total[i] = len(rep.Archived)
		}()
	}
	wg.Wait()
	if total[0]+total[1] != len(recs) {
		t.Fatalf("archived %d + %d of %d", total[0], total[1], len(recs))
	}
	for _, r := range recs {
		if n := e.versions(t, archive.Key(r)); n != 1 {
			t.Fatalf("%s: %d versions", r.DLQID, n)
		}
	}
}

// The metrics a run publishes can be read back from the emulator's CloudWatch.
func TestMetricsPublished(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	first := e.parked(t, "h1", "")
	e.clock.Advance(2 * time.Hour)
	e.parked(t, "h2", "") // not yet due
	rep, err := e.sweeper(nil, nil).Run(ctx)
	if err != nil || len(rep.Archived) != 1 {
		t.Fatalf("%+v %v", rep, err)
	}
	wantAge := e.clock.Now().Sub(first.FirstSeen.Time).Seconds() - 2*3600
	if rep.OldestParkedAgeS < wantAge-1 || rep.OldestParkedAgeS > wantAge+1 {
		t.Fatalf("oldest parked age %v, want about %v", rep.OldestParkedAgeS, wantAge)
	}
	for name, want := range map[string]float64{sweeper.MetricArchived: 1, sweeper.MetricFailures: 0, sweeper.MetricOldestParkedS: rep.OldestParkedAgeS} {
		out, err := e.st.Clients.CloudWatch.GetMetricStatistics(ctx, &cloudwatch.GetMetricStatisticsInput{
			Namespace: aws.String(e.st.Env.StackName), MetricName: aws.String(name),
			StartTime: aws.Time(time.Now().Add(-time.Hour)), EndTime: aws.Time(time.Now().Add(time.Hour)),
			Period: aws.Int32(60), Statistics: []cwtypes.Statistic{cwtypes.StatisticMaximum},
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Datapoints) == 0 || aws.ToFloat64(out.Datapoints[0].Maximum) != want {
			t.Fatalf("%s: datapoints %+v, want %v", name, out.Datapoints, want)
		}
	}
}

// A message that fails again after its record was archived opens a new
// record, linked to the stub, which goes through the normal lifecycle; the
// stub and its archive object are not touched and still verify.
func TestArrivalAfterArchiveOpensASuccessorAndKeepsTheStub(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	r := e.parked(t, "z", "")
	e.clock.Advance(2 * time.Hour)
	if rep, err := e.sweeper(nil, nil).Run(ctx); err != nil || len(rep.Archived) != 1 {
		t.Fatalf("%+v %v", rep, err)
	}
	before := e.get(t, r.DLQID)
	out, err := e.q.Quarantine(ctx, ingest.Message{MessageID: "again", SourceARN: e.src.ARN, Body: []byte(inv("z", ""))})
	if err != nil || out.Result != ingest.ResultCreated || out.Record.DLQID != r.DLQID+"#r1" {
		t.Fatalf("%+v %v", out, err)
	}
	succ := e.get(t, out.Record.DLQID)
	if succ.Status != quarantine.StatusQuarantined || succ.Predecessor == nil || succ.Predecessor.ID != r.DLQID || succ.Predecessor.Seal != before.Seal {
		t.Fatalf("successor %s linked to %+v", succ.Status, succ.Predecessor)
	}
	stub := e.get(t, r.DLQID)
	if stub.Status != quarantine.StatusArchived || stub.Seal != before.Seal || stub.Version != before.Version || stub.AttemptCount != before.AttemptCount {
		t.Fatalf("stub %s v%d → v%d", stub.Status, before.Version, stub.Version)
	}
	if problems, err := s3store.VerifyStub(ctx, e.st.Clients.S3, stub); err != nil || len(problems) != 0 {
		t.Fatal(problems, err)
	}
	// A swapped object is still caught.
	stub.Archive.SHA256 = strings.Repeat("0", 64)
	if problems, _ := s3store.VerifyStub(ctx, e.st.Clients.S3, stub); len(problems) == 0 {
		t.Fatal("a stub whose checksum does not match verifies")
	}
	// The successor is parked and archived in its turn, beside the stub.
	e.park(t, succ)
	e.clock.Advance(2 * time.Hour)
	if rep, err := e.sweeper(nil, nil).Run(ctx); err != nil || len(rep.Archived) != 1 || rep.Archived[0].ID != succ.DLQID {
		t.Fatalf("%+v %v", rep, err)
	}
	for _, id := range []string{r.DLQID, succ.DLQID} {
		if problems, err := s3store.VerifyStub(ctx, e.st.Clients.S3, e.get(t, id)); err != nil || len(problems) != 0 {
			t.Fatal(id, problems, err)
		}
	}
}

// The archive object of a corrected record holds the original, every
// correction (one kept in the claim-check store for its size) and their
// authors; the stub verifies against it.
func TestCorrectedRecordArchivesOriginalAndCorrections(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	orig := inv("ev-corr", "first")
	r := e.quarantine(t, "ev-corr", orig)
	small := inv("ev-corr", "fixed by hand")
	if _, err := e.k.Correct(ctx, r.DLQID, quarantine.CorrectionRequest{Actor: "fixer@ops", Reason: "typo", Body: []byte(small)}); err != nil {
		t.Fatal(err)
	}
	large := inv("ev-corr", strings.Repeat("n", 350<<10))
	c2, err := e.k.Correct(ctx, r.DLQID, quarantine.CorrectionRequest{Actor: "lead@ops", Reason: "full note restored", Body: []byte(large)})
	if err != nil {
		t.Fatal(err)
	}
	if c2.Corrections[1].BodyRef == nil || c2.Corrections[0].BodyRef != nil {
		t.Fatal("the large correction was not claim-checked, or the small one was")
	}
	p, err := c2.ParkManual("ops", "hold for audit", e.clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	if err := e.store.Replace(ctx, c2, p); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(2 * time.Hour)
	rep, err := e.sweeper(nil, nil).Run(ctx)
	if err != nil || len(rep.Archived) != 1 {
		t.Fatalf("sweep: %+v %v", rep, err)
	}
	stub := e.get(t, r.DLQID)
	if problems, err := s3store.VerifyStub(ctx, e.st.Clients.S3, stub); err != nil || len(problems) > 0 {
		t.Fatalf("stub: %v %v", problems, err)
	}
	env, err := s3store.ReadArchive(ctx, e.st.Clients.S3, stub.Archive)
	if err != nil {
		t.Fatal(err)
	}
	if b, err := env.Body(); err != nil || string(b) != orig {
		t.Fatal("the archive does not hold the original verbatim")
	}
	for i, want := range []string{small, large} {
		b, err := env.CorrectionBody(i + 1)
		if err != nil || string(b) != want {
			t.Fatalf("correction %d: %v", i+1, err)
		}
	}
	if a := env.Record.Corrections; len(a) != 2 || a[0].Actor != "fixer@ops" || a[1].Actor != "lead@ops" || a[1].Reason != "full note restored" {
		t.Fatalf("archived corrections %+v", a)
	}
	// An archived stub takes no correction.
	var ce *quarantine.CorrectionError
	if _, err := e.k.Correct(ctx, r.DLQID, quarantine.CorrectionRequest{Actor: "a", Reason: "r", Body: []byte(inv("ev-corr", "again"))}); !errors.As(err, &ce) {
		t.Fatalf("correcting an archived stub: %v", err)
	}
	// (The current object, not the version: the payload bucket keeps
	// noncurrent versions until its lifecycle rule expires them.)
	ref := c2.Corrections[1].BodyRef
	if _, err := e.payloads.GetPayload(ctx, quarantine.ObjectRef{Bucket: ref.Bucket, Key: ref.Key, SHA256: ref.SHA256}); err == nil {
		t.Fatal("the claim-checked correction outlived its archiving")
	}
}

// A PARKED record whose sealed field was changed in the table is held, as
// found, instead of failing every run: never archived, counted once, and
// not selected again; the records beside it are archived.
func TestTamperedParkedRecordIsHeldNotFailedEveryRun(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	forged := e.parked(t, "t1", "")
	good := e.parked(t, "t2", "")
	// Someone with write access to the table changes the class back, and
	// keeps the seal.
	r := e.get(t, forged.DLQID)
	r.FailureClass = quarantine.ClassExhausted
	item, err := dynamostore.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.st.Clients.DynamoDB.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(e.st.Names["QuarantineTable"]), Item: item}); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(2 * time.Hour)
	rep, err := e.sweeper(nil, nil).Run(ctx)
	if err != nil || len(rep.Archived) != 1 || rep.Archived[0].ID != good.DLQID || rep.Failed != 0 ||
		len(rep.Held) != 1 || rep.Held[0].ID != forged.DLQID || rep.Held[0].Kind != "seal_mismatch" {
		t.Fatalf("first run: %+v %v", rep, err)
	}
	rep, err = e.sweeper(nil, nil).Run(ctx)
	if err != nil || len(rep.Archived) != 0 || rep.Failed != 0 || len(rep.Held) != 0 || rep.Skipped != 0 {
		t.Fatalf("second run: %+v %v", rep, err)
	}
	after := e.get(t, forged.DLQID)
	if after.Status != quarantine.StatusParked || after.Seal != r.Seal || after.Version != r.Version || after.FailureClass != quarantine.ClassExhausted || quarantine.Verify(after) == nil {
		t.Fatalf("the held record changed: %+v", after)
	}
	if n := storetest.HeldCount(t, countstream.NewReader(e.st), e.src.Name); n != 1 {
		t.Fatalf("held counter %d, want 1", n)
	}
}

// The parked age is the oldest PARKED record's that is not under an
// integrity hold, never 0 because the oldest one is held: DynamoDB applies
// the listing's hold filter after its Limit, so a one-item page of the
// held record comes back empty with a cursor, and the sweeper reads on.
func TestOldestParkedAgeLooksPastAHeldRecord(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	mem := memstore.New()
	for _, s := range []struct {
		name   string
		store  quarantine.Store
		lister quarantine.Lister
	}{{"dynamodb", e.store, e.lister}, {"memstore", mem, mem}} {
		t.Run(s.name, func(t *testing.T) {
			q := ingest.NewQuarantiner(s.store, e.payloads, e.clock.Now, ingest.QuarantinerConfig{Sources: map[string]*quarantine.Source{"inventory": e.src}})
			var parked []*quarantine.Record
			for _, id := range []string{"o1", "o2"} {
				out, err := q.Quarantine(ctx, ingest.Message{MessageID: "m-" + id, SourceARN: e.src.ARN, Body: []byte(inv(id, ""))})
				if err != nil {
					t.Fatal(err)
				}
				p, err := s.store.Update(ctx, out.Record.DLQID, func(r *quarantine.Record) (*quarantine.Record, error) { return r.ParkPoison("test", e.clock.Now()) })
				if err != nil {
					t.Fatal(err)
				}
				parked = append(parked, p)
				e.clock.Advance(time.Minute)
			}
			held := parked[0]
			if err := s.store.Hold(ctx, quarantine.IntegrityHold{ID: held.DLQID, Version: held.Version, Reason: "payload_mismatch", At: e.clock.Now()}); err != nil {
				t.Fatal(err)
			}
			rep, err := e.sweeperOn(s.store, s.lister, nil).Run(ctx)
			if err != nil || len(rep.Archived) != 0 {
				t.Fatalf("%+v %v", rep, err)
			}
			if want := e.clock.Now().Sub(parked[1].FirstSeen.Time).Seconds(); rep.OldestParkedAgeS != want {
				t.Fatalf("oldest parked age %v with the oldest record held, want %v (the oldest not held)", rep.OldestParkedAgeS, want)
			}
		})
	}
}

// The payload bucket's lifecycle removes only versions tagged archived
// (infra/template.yaml). The sweeper marks a record's claim-check version
// only once the record's ARCHIVED stub is written: not a record whose stub
// write lost a race, not a record that is not due.
func TestOnlyArchivedRecordsBodiesAreMarked(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	big := strings.Repeat("b", 200<<10)
	archived := e.parked(t, "ma", big)
	raced := e.parked(t, "mb", big)
	open := e.quarantine(t, "mq", inv("mq", big))
	for _, r := range []*quarantine.Record{archived, raced, open} {
		if r.BodyRef == nil {
			t.Fatalf("%s: body not claim-checked", r.DLQID)
		}
	}
	e.clock.Advance(2 * time.Hour)
	// raced changes after the sweeper read it: its stub write conflicts.
	change := func() { e.arriveAgain(t, raced.DLQID) }
	rep, err := e.sweeper(&racingStore{Store: e.store, id: raced.DLQID, change: change}, nil).Run(ctx)
	if err != nil || len(rep.Archived) != 1 || rep.Archived[0].ID != archived.DLQID {
		t.Fatalf("run: %+v %v", rep, err)
	}
	tags := func(ref *quarantine.ObjectRef) map[string]string {
		out, err := e.st.Clients.S3.GetObjectTagging(ctx, &s3.GetObjectTaggingInput{Bucket: aws.String(ref.Bucket), Key: aws.String(ref.Key), VersionId: aws.String(ref.VersionID)})
		if err != nil {
			t.Fatalf("tags of %s: %v", ref.Key, err)
		}
		m := map[string]string{}
		for _, tg := range out.TagSet {
			m[aws.ToString(tg.Key)] = aws.ToString(tg.Value)
		}
		return m
	}
	if got := tags(archived.BodyRef); got[s3store.ArchivedTagKey] != s3store.ArchivedTagValue {
		t.Errorf("the archived record's body version is not marked for the lifecycle: %v", got)
	}
	for _, r := range []*quarantine.Record{raced, open} {
		if got := tags(r.BodyRef); got[s3store.ArchivedTagKey] != "" {
			t.Errorf("%s is not archived, yet its body is marked for removal: %v", r.DLQID, got)
		}
		if _, err := quarantine.LoadBody(ctx, e.payloads, e.get(t, r.DLQID)); err != nil {
			t.Errorf("%s: body unreadable: %v", r.DLQID, err)
		}
	}
}

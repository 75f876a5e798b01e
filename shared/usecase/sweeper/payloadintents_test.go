package sweeper_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/dlqquarantine/dlqq/shared/adapter/s3store"
	"github.com/dlqquarantine/dlqq/shared/dev/memstore"
	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
	"github.com/dlqquarantine/dlqq/shared/runtime/clock"
	"github.com/dlqquarantine/dlqq/shared/usecase/ingest"
	"github.com/dlqquarantine/dlqq/shared/usecase/sweeper"
)

// refusingPayloads refuses to delete the objects named in refuse.
type refusingPayloads struct {
	quarantine.PayloadStore
	refuse map[string]bool
}

func (p refusingPayloads) DeletePayload(ctx context.Context, ref quarantine.ObjectRef) error {
	if p.refuse[ref.Key] {
		return errors.New("AccessDenied")
	}
	return p.PayloadStore.DeletePayload(ctx, ref)
}

// stubAnswers answers the stub writes of the records named: "lost" writes
// the stub and answers with an error (the answer lost), "refused" writes
// nothing and answers with an error.
type stubAnswers struct {
	quarantine.Store
	answer map[string]string
}

func (s stubAnswers) Replace(ctx context.Context, prev, r *quarantine.Record) error {
	if r.Status != quarantine.StatusArchived {
		return s.Store.Replace(ctx, prev, r)
	}
	switch s.answer[r.DLQID] {
	case "lost":
		if err := s.Store.Replace(ctx, prev, r); err != nil {
			return err
		}
		return errors.New("RequestTimeout: the answer was lost")
	case "refused":
		return errors.New("InternalServerError")
	}
	return s.Store.Replace(ctx, prev, r)
}

// A claim-check object is never left behind by an archived record: when
// its delete is refused, or the stub write's answer is lost (the run
// cannot tell that the stub is written), a later run past IntentGrace
// deletes it; when the stub was never written, nothing is deleted and the
// live record still reads its body. Real DynamoDB and S3 (the emulators):
// the intent items, the version tag the bucket's lifecycle acts on, the
// delete marker.
func TestObjectsAnArchiveLeavesAreDeletedByALaterRun(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	big := strings.Repeat("b", 200<<10)
	// refused has two objects: its body and a correction's.
	refused := e.quarantine(t, "la", inv("la", big))
	if _, err := e.k.Correct(ctx, refused.DLQID, quarantine.CorrectionRequest{Actor: "fixer@ops", Reason: "typo", Body: []byte(inv("la", strings.Repeat("n", 350<<10)))}); err != nil {
		t.Fatal(err)
	}
	refused = e.park(t, refused)
	lost, never := e.parked(t, "lb", big), e.parked(t, "lc", big)
	for _, r := range []*quarantine.Record{refused, lost, never} {
		if r.BodyRef == nil {
			t.Fatalf("%s: body not claim-checked", r.DLQID)
		}
	}
	correction := refused.Corrections[0].BodyRef
	if correction == nil {
		t.Fatal("the correction is not claim-checked")
	}
	e.clock.Advance(2 * time.Hour)
	sweep := func(store quarantine.Store, payloads quarantine.PayloadStore) *sweeper.Report {
		t.Helper()
		svc := sweeper.New(store, e.lister, payloads, s3store.Archiver{API: e.st.Clients.S3}, nil, e.clock.Now, slog.New(slog.NewJSONHandler(io.Discard, nil)),
			sweeper.Config{Bucket: e.bucket, ParkAge: time.Hour, ResolvedAge: 2 * time.Hour, Retention: 3650 * 24 * time.Hour})
		rep, err := svc.Run(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return rep
	}
	rep := sweep(stubAnswers{Store: e.store, answer: map[string]string{lost.DLQID: "lost", never.DLQID: "refused"}},
		refusingPayloads{PayloadStore: e.payloads, refuse: map[string]bool{correction.Key: true}})
	if len(rep.Archived) != 1 || rep.Archived[0].ID != refused.DLQID || rep.PayloadsLeft != 1 || rep.Failed != 2 {
		t.Fatalf("first run: %+v", rep)
	}
	if got := e.get(t, lost.DLQID); got.Status != quarantine.StatusArchived {
		t.Fatalf("the lost answer's stub is not written: %s", got.Status)
	}
	// The live record goes back to work: not due, its stub never written.
	if _, err := e.store.Update(ctx, never.DLQID, func(r *quarantine.Record) (*quarantine.Record, error) {
		return r.Unpark("ops", "consumer fixed", e.clock.Now())
	}); err != nil {
		t.Fatal(err)
	}
	current := func(ref *quarantine.ObjectRef) bool {
		_, err := e.st.Clients.S3.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(ref.Bucket), Key: aws.String(ref.Key)})
		return err == nil
	}
	tagged := func(ref *quarantine.ObjectRef) bool {
		out, err := e.st.Clients.S3.GetObjectTagging(ctx, &s3.GetObjectTaggingInput{Bucket: aws.String(ref.Bucket), Key: aws.String(ref.Key), VersionId: aws.String(ref.VersionID)})
		if err != nil {
			t.Fatalf("tags of %s: %v", ref.Key, err)
		}
		return slices.ContainsFunc(out.TagSet, func(tg s3types.Tag) bool { return aws.ToString(tg.Key) == s3store.ArchivedTagKey })
	}
	for _, r := range []*quarantine.Record{lost, never} {
		if !current(r.BodyRef) || tagged(r.BodyRef) {
			t.Fatalf("%s: its object went before a run could know its stub is written", r.DLQID)
		}
	}
	// The body deleted, the correction's object refused: the intent keeps
	// that one alone (the body's version may be gone from the bucket by the
	// time a later run comes).
	if current(refused.BodyRef) || !current(correction) {
		t.Fatalf("refused's body current %v, correction current %v", current(refused.BodyRef), current(correction))
	}
	kept, err := e.store.DuePayloadIntents(ctx, e.clock.Now().Add(time.Hour), 100)
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range kept {
		if in.ID == refused.DLQID && !slices.Equal(in.Refs, []quarantine.ObjectRef{*correction}) {
			t.Fatalf("refused's intent names %+v, want its correction's object alone", in.Refs)
		}
	}
	// Within IntentGrace the run that wrote them may still be running.
	e.clock.Advance(sweeper.IntentGrace - time.Minute)
	if rep := sweep(e.store, e.payloads); rep.PayloadsFreed != 0 || rep.Failed != 0 {
		t.Fatalf("a run within the grace: %+v", rep)
	}
	if !current(correction) || !current(lost.BodyRef) {
		t.Fatal("objects deleted within the grace")
	}
	e.clock.Advance(2 * time.Minute)
	rep = sweep(e.store, e.payloads)
	if rep.PayloadsFreed != 2 || rep.Failed != 0 {
		t.Fatalf("the run past the grace: %+v", rep)
	}
	for _, ref := range []*quarantine.ObjectRef{refused.BodyRef, correction, lost.BodyRef} {
		if current(ref) || !tagged(ref) {
			t.Errorf("%s is left behind (current %v, tagged %v)", ref.Key, current(ref), tagged(ref))
		}
	}
	if !current(never.BodyRef) || tagged(never.BodyRef) {
		t.Error("the object of a record whose stub was never written is deleted")
	}
	if _, err := quarantine.LoadBody(ctx, e.payloads, e.get(t, never.DLQID)); err != nil {
		t.Errorf("the live record's body: %v", err)
	}
	left, err := e.store.DuePayloadIntents(ctx, e.clock.Now().Add(time.Hour), 100)
	if err != nil || len(left) != 0 {
		t.Fatalf("intents left: %+v %v", left, err)
	}
}

// memArchiver "writes" every archive object as version "v-<key>".
type memArchiver struct{}

func (memArchiver) PutArchive(_ context.Context, _, _, key string, _ []byte, _ string, retain time.Time) (string, time.Time, error) {
	return "v-" + key, retain, nil
}

// intentEnv is the sweeper on memstore, with claim-checked records.
type intentEnv struct {
	mem *memstore.Store
	pay *memstore.Payloads
	clk *clock.Fake
	q   *ingest.Quarantiner
}

func newIntentEnv() *intentEnv {
	mem, pay := memstore.New(), memstore.NewPayloads()
	clk := clock.NewFake(time.Date(2026, 12, 7, 9, 0, 0, 0, time.UTC))
	src := &quarantine.Source{Name: "inventory", ARN: "arn:aws:sqs:us-east-1:000000000000:inventory", IdempotencyPointer: "/event_id", RedriveCap: 3}
	return &intentEnv{mem: mem, pay: pay, clk: clk,
		q: ingest.NewQuarantiner(mem, pay, clk.Now, ingest.QuarantinerConfig{Sources: map[string]*quarantine.Source{"inventory": src}})}
}

// quarantined quarantines key with a claim-checked body.
func (e *intentEnv) quarantined(t *testing.T, key string) *quarantine.Record {
	t.Helper()
	out, err := e.q.Quarantine(context.Background(), ingest.Message{MessageID: "m-" + key, SourceARN: "arn:aws:sqs:us-east-1:000000000000:inventory", Body: []byte(inv(key, strings.Repeat("p", 200<<10)))})
	if err != nil || out.Record.BodyRef == nil {
		t.Fatalf("%s: %+v %v", key, out, err)
	}
	return out.Record
}

// parked quarantines key with a claim-checked body and parks it.
func (e *intentEnv) parked(t *testing.T, key string) *quarantine.Record {
	t.Helper()
	id := e.quarantined(t, key).DLQID
	r, err := e.mem.Update(context.Background(), id, func(r *quarantine.Record) (*quarantine.Record, error) { return r.ParkPoison("test", e.clk.Now()) })
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func (e *intentEnv) run(t *testing.T, store quarantine.Store, payloads quarantine.PayloadStore) *sweeper.Report {
	t.Helper()
	rep, err := testSweeper(store, e.mem, payloads, memArchiver{}, e.clk, 0).Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// failureKinds are rep's failures as "<id> <kind>", sorted.
func failureKinds(rep *sweeper.Report) []string {
	var kinds []string
	for _, f := range rep.Failures {
		kinds = append(kinds, f.ID+" "+f.Kind)
	}
	slices.Sort(kinds)
	return kinds
}

// A payload intent makes a run delete only objects of the record it names,
// only while that record's stub is the one it was written for and its seal
// holds, and only in the payload bucket; what no run of the sweeper wrote
// deletes nothing (as one written by a role that the template's Deny
// missed, or an administrator).
func TestPayloadIntentsDeleteOnlyWhatTheirStubFrees(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newIntentEnv()
	mem, pay, clk := e.mem, e.pay, e.clk
	a, d := e.parked(t, "a"), e.parked(t, "d")
	clk.Advance(2 * time.Hour)
	live := e.quarantined(t, "live")
	sweep := func(payloads quarantine.PayloadStore) *sweeper.Report {
		t.Helper()
		return e.run(t, mem, payloads)
	}
	rep := sweep(refusingPayloads{PayloadStore: pay, refuse: map[string]bool{d.BodyRef.Key: true}})
	if len(rep.Archived) != 2 || rep.PayloadsLeft != 1 {
		t.Fatalf("first run: %+v", rep)
	}
	stubA, stubD := get(t, mem, a.DLQID), get(t, mem, d.DLQID)
	archiveOf := func(r *quarantine.Record) quarantine.ArchiveObject {
		return quarantine.ArchiveObject{Bucket: r.Archive.Bucket, Key: r.Archive.Key, VersionID: r.Archive.VersionID}
	}
	forge := func(id string, version int64, arch quarantine.ArchiveObject, refs ...quarantine.ObjectRef) string {
		in := quarantine.PayloadIntent{ID: id, Source: "inventory", Version: version, At: quarantine.At(clk.Now()), Archive: arch, Refs: refs}
		if _, err := mem.RecordPayloadIntent(ctx, in); err != nil {
			t.Fatal(err)
		}
		return quarantine.PayloadIntentKey(id, version)
	}
	// The stub's own objects, for an archive object it does not point at.
	otherVersion, otherBucketArchive, otherKey := archiveOf(stubA), archiveOf(stubA), archiveOf(stubA)
	otherVersion.VersionID += "-2"
	otherBucketArchive.Bucket += "-2"
	otherKey.Key += "-2"
	forge(stubA.DLQID, stubA.Version+3, otherVersion, *a.BodyRef)
	forge(stubA.DLQID, stubA.Version+4, otherBucketArchive, *a.BodyRef)
	forge(stubA.DLQID, stubA.Version+6, otherKey, *a.BodyRef)
	// An item under an intent's key that does not read.
	malformed := quarantine.PayloadIntentKey(stubA.DLQID, stubA.Version+5)
	if _, err := mem.RecordPayloadIntent(ctx, quarantine.PayloadIntent{Key: malformed, Malformed: "intent is not an intent's JSON"}); err != nil {
		t.Fatal(err)
	}
	foreign := forge(stubA.DLQID, stubA.Version+1, archiveOf(stubA), *live.BodyRef)                                       // another record's object
	forge(live.DLQID, live.Version+1, quarantine.ArchiveObject{Bucket: "archive", Key: "records/live"}, *live.BodyRef)    // a live record
	forge(stubA.DLQID, stubA.Version+2, quarantine.ArchiveObject{Bucket: "archive", Key: "records/other"}, *live.BodyRef) // another archive object
	forge(quarantine.RecordID("inventory", "nobody"), 3, archiveOf(stubA), *live.BodyRef)                                 // no such record
	elsewhere := *d.BodyRef
	elsewhere.Bucket = "someone-elses-bucket"
	otherBucket := forge(stubD.DLQID, stubD.Version+1, archiveOf(stubD), elsewhere) // the record's key, in another bucket
	// d's stub is changed behind its seal: nothing is deleted for it.
	mem.Tamper(d.DLQID, func(r *quarantine.Record) { r.RedriveCap++ })
	clk.Advance(sweeper.IntentGrace + time.Minute)
	rep = sweep(pay)
	kinds := failureKinds(rep)
	want := []string{malformed + " payload_intent_malformed", stubA.DLQID + " payload_intent_foreign_object", stubD.DLQID + " payload_intent_stub_unverified", stubD.DLQID + " payload_intent_stub_unverified"}
	if rep.PayloadsFreed != 0 || !slices.Equal(kinds, want) {
		t.Fatalf("forged intents: freed %d, failures %v, want %v", rep.PayloadsFreed, kinds, want)
	}
	for _, r := range []*quarantine.Record{live, d} {
		if _, err := pay.GetPayload(ctx, *r.BodyRef); err != nil {
			t.Fatalf("%s's object deleted by a forged intent or for a tampered stub: %v", r.DLQID, err)
		}
	}
	keys := func() []string {
		var out []string
		for _, in := range mem.PayloadIntentsLeft() {
			out = append(out, in.Key)
		}
		slices.Sort(out)
		return out
	}
	wantLeft := []string{foreign, otherBucket, quarantine.PayloadIntentKey(stubD.DLQID, stubD.Version)}
	slices.Sort(wantLeft)
	if got := keys(); !slices.Equal(got, wantLeft) {
		t.Fatalf("intents kept %v, want %v (the unsettled ones; those of no stub dropped)", got, wantLeft)
	}
	// The stub restored: its own intent deletes its object; the one naming
	// another bucket deletes nothing there and stays. (What was not settled
	// is postponed: due again after the grace.)
	mem.Tamper(d.DLQID, func(r *quarantine.Record) { r.RedriveCap-- })
	if rep = sweep(pay); rep.Failed != 0 || rep.PayloadsFreed != 0 {
		t.Fatalf("postponed intents settled within the grace: %+v", rep)
	}
	clk.Advance(sweeper.IntentGrace + time.Minute)
	rep = sweep(pay)
	if kinds, want := failureKinds(rep), []string{stubA.DLQID + " payload_intent_foreign_object", stubD.DLQID + " payload_intent_foreign_object"}; !slices.Equal(kinds, want) {
		t.Fatalf("failures %v, want %v (another bucket is a foreign object too)", kinds, want)
	}
	if rep.PayloadsFreed != 1 || rep.Failed != 2 {
		t.Fatalf("after the stub is restored: %+v", rep)
	}
	if _, err := pay.GetPayload(ctx, *d.BodyRef); err == nil {
		t.Fatal("d's object is still there")
	}
	if got := keys(); !slices.Equal(got, []string{foreign, otherBucket}) && !slices.Equal(got, []string{otherBucket, foreign}) {
		t.Fatalf("intents kept %v", got)
	}
}

func get(t *testing.T, s quarantine.Store, id string) *quarantine.Record {
	t.Helper()
	r, err := s.Get(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// A run settles an intent only once the run that wrote it must have
// ended: the grace outlasts the longest Lambda invocation (the template's
// sweeper timeout is at most that).
func TestIntentGraceOutlastsAnyInvocation(t *testing.T) {
	if sweeper.IntentGrace <= 15*time.Minute {
		t.Fatalf("IntentGrace %s: a sweeper invocation may last 15 minutes", sweeper.IntentGrace)
	}
}

// intentFaults fails the intent calls named, and runs onGet once after the
// first read of record id.
type intentFaults struct {
	quarantine.Store
	failRecord, failDue, failGet bool
	id                           string
	onGet                        func()
}

func (f *intentFaults) RecordPayloadIntent(ctx context.Context, in quarantine.PayloadIntent) (string, error) {
	if f.failRecord {
		return "", errors.New("ProvisionedThroughputExceededException")
	}
	return f.Store.RecordPayloadIntent(ctx, in)
}

func (f *intentFaults) DuePayloadIntents(ctx context.Context, before time.Time, limit int) ([]quarantine.PayloadIntent, error) {
	if f.failDue {
		return nil, errors.New("InternalServerError")
	}
	return f.Store.DuePayloadIntents(ctx, before, limit)
}

func (f *intentFaults) Get(ctx context.Context, id string) (*quarantine.Record, error) {
	if f.failGet && id == f.id {
		return nil, errors.New("InternalServerError")
	}
	r, err := f.Store.Get(ctx, id)
	if id == f.id && f.onGet != nil {
		hook := f.onGet
		f.onGet = nil
		hook()
	}
	return r, err
}

// No stub without its intent; an intent whose record cannot be read, or
// intents that cannot be read at all, are failures of the run, and
// nothing is deleted for them.
func TestIntentFailuresDeleteNothing(t *testing.T) {
	t.Parallel()
	e := newIntentEnv()
	x := e.parked(t, "x")
	e.clk.Advance(2 * time.Hour)
	rep := e.run(t, &intentFaults{Store: e.mem, failRecord: true}, e.pay)
	if len(rep.Archived) != 0 || rep.Failed != 1 || get(t, e.mem, x.DLQID).Status != quarantine.StatusParked {
		t.Fatalf("an intent not recorded: %+v (the stub must wait for it)", rep)
	}
	// The stub written, its answer lost: the intent stays.
	if rep := e.run(t, stubAnswers{Store: e.mem, answer: map[string]string{x.DLQID: "lost"}}, e.pay); rep.Failed != 1 || len(e.mem.PayloadIntentsLeft()) != 1 {
		t.Fatalf("lost answer: %+v, %d intents", rep, len(e.mem.PayloadIntentsLeft()))
	}
	e.clk.Advance(sweeper.IntentGrace + time.Minute)
	if rep := e.run(t, &intentFaults{Store: e.mem, failDue: true}, e.pay); rep.Failed != 1 || rep.Failures[0].Kind != "payload_intents_unread" {
		t.Fatalf("intents unread: %+v", rep)
	}
	if rep := e.run(t, &intentFaults{Store: e.mem, failGet: true, id: x.DLQID}, e.pay); rep.Failed != 1 || rep.Failures[0].Kind != "payload_intent_unread_record" {
		t.Fatalf("record unread: %+v", rep)
	}
	if _, err := e.pay.GetPayload(context.Background(), *x.BodyRef); err != nil || len(e.mem.PayloadIntentsLeft()) != 1 {
		t.Fatalf("deleted for an intent not settled: %v, %d intents", err, len(e.mem.PayloadIntentsLeft()))
	}
	// Postponed: due again after the grace, then settled.
	if rep := e.run(t, e.mem, e.pay); rep.PayloadsFreed != 0 {
		t.Fatalf("a postponed intent settled within the grace: %+v", rep)
	}
	e.clk.Advance(sweeper.IntentGrace + time.Minute)
	if rep := e.run(t, e.mem, e.pay); rep.PayloadsFreed != 1 || len(e.mem.PayloadIntentsLeft()) != 0 {
		t.Fatalf("settled: %+v, %d intents", rep, len(e.mem.PayloadIntentsLeft()))
	}
}

// A run settling an intent whose stub it finds unwritten drops only the
// revision it read: an overlapping run that archives the same version
// meanwhile (its intent under the same key, its stub's answer lost) keeps
// its intent, and the objects go. (From review: an unconditional drop
// left them for good.)
func TestSettlingNeverDropsAnOverlappingRunsIntent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newIntentEnv()
	x := e.parked(t, "x")
	e.clk.Advance(2 * time.Hour)
	// A: the stub write refused: its intent stays, X stays PARKED.
	e.run(t, stubAnswers{Store: e.mem, answer: map[string]string{x.DLQID: "refused"}}, e.pay)
	e.clk.Advance(30 * time.Minute)
	// B reads A's intent and X; C archives X right then (answer lost).
	b := &intentFaults{Store: e.mem, id: x.DLQID, onGet: func() {
		e.run(t, stubAnswers{Store: e.mem, answer: map[string]string{x.DLQID: "lost"}}, e.pay)
	}}
	svc := sweeper.New(b, e.mem, e.pay, memArchiver{}, nil, e.clk.Now, slog.New(slog.NewJSONHandler(io.Discard, nil)),
		sweeper.Config{Bucket: "archive", ParkAge: 10000 * time.Hour, ResolvedAge: 10000 * time.Hour, Retention: 24 * time.Hour})
	if _, err := svc.Run(ctx); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		e.clk.Advance(sweeper.IntentGrace + time.Minute)
		e.run(t, e.mem, e.pay)
	}
	if _, err := e.pay.GetPayload(ctx, *x.BodyRef); err == nil || get(t, e.mem, x.DLQID).Status != quarantine.StatusArchived {
		t.Fatalf("X archived with its object left behind (%d intents left)", len(e.mem.PayloadIntentsLeft()))
	}
}

// Intents that cannot be settled never hold up the others: each is
// postponed behind those waiting. (From review: 100 stuck at the head of
// the oldest-first read kept every later one waiting for good.)
func TestStuckIntentsNeverStarveTheOthers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newIntentEnv()
	stuck := map[string]bool{}
	for i := range 100 {
		stuck[e.parked(t, fmt.Sprintf("s%03d", i)).BodyRef.Key] = true
	}
	e.clk.Advance(2 * time.Hour)
	if rep := e.run(t, e.mem, refusingPayloads{PayloadStore: e.pay, refuse: stuck}); rep.PayloadsLeft != 100 {
		t.Fatalf("first run: %+v", rep)
	}
	e.clk.Advance(sweeper.IntentGrace + time.Minute)
	// Every one of them comes due and is refused again: postponed.
	if rep := e.run(t, e.mem, refusingPayloads{PayloadStore: e.pay, refuse: stuck}); rep.Failed != 100 {
		t.Fatalf("stuck run: %+v", rep)
	}
	late := e.parked(t, "zz-late")
	e.clk.Advance(2 * time.Hour)
	refuseLate := map[string]bool{late.BodyRef.Key: true}
	for k := range stuck {
		refuseLate[k] = true
	}
	if rep := e.run(t, e.mem, refusingPayloads{PayloadStore: e.pay, refuse: refuseLate}); len(rep.Archived) != 1 || rep.PayloadsLeft != 1 {
		t.Fatalf("late run: %+v", rep)
	}
	for range 3 {
		e.clk.Advance(sweeper.IntentGrace + time.Minute)
		e.run(t, e.mem, refusingPayloads{PayloadStore: e.pay, refuse: stuck})
	}
	if _, err := e.pay.GetPayload(ctx, *late.BodyRef); err == nil {
		t.Fatalf("the late record's object waits behind 100 stuck intents (%d intents left)", len(e.mem.PayloadIntentsLeft()))
	}
}

// Intents are settled first: a run that archives until its deadline (as
// every run of a backlog does) still settles them.
func TestIntentsAreSettledBeforeTheBacklog(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newIntentEnv()
	x := e.parked(t, "x")
	e.clk.Advance(2 * time.Hour)
	if rep := e.run(t, e.mem, refusingPayloads{PayloadStore: e.pay, refuse: map[string]bool{x.BodyRef.Key: true}}); rep.PayloadsLeft != 1 {
		t.Fatalf("%+v", rep)
	}
	parked(t, e.mem, e.clk, 40) // (and 2 hours on)
	// The backlog's archives use all the time there is.
	dctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	slow := &gatedArchiver{gate: 1, pause: 600 * time.Millisecond, open: make(chan struct{})}
	rep, err := testSweeper(e.mem, e.mem, e.pay, slow, e.clk, 2*time.Second).Run(dctx)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Stopped != "deadline" || rep.PayloadsFreed != 1 {
		t.Fatalf("stopped %q, freed %d", rep.Stopped, rep.PayloadsFreed)
	}
}

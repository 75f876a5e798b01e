package wire_test

import (
	"bytes"
	"context"
	"errors"
	"github.com/aws/aws-lambda-go/events"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	kmstypes "github.com/aws/aws-sdk-go-v2/service/kms/types"

	"github.com/dlqquarantine/dlqq/shared/adapter/dynamostore"
	"github.com/dlqquarantine/dlqq/shared/adapter/s3store"
	"github.com/dlqquarantine/dlqq/shared/dev/embedded"
	"github.com/dlqquarantine/dlqq/shared/dev/faults"
	"github.com/dlqquarantine/dlqq/shared/dev/localrunner"
	"github.com/dlqquarantine/dlqq/shared/dev/storetest"
	dl "github.com/dlqquarantine/dlqq/shared/domain/ledger"
	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
	"github.com/dlqquarantine/dlqq/shared/usecase/ledger"
	"github.com/dlqquarantine/dlqq/shared/wire"
)

type ledgerStack struct {
	t       *testing.T
	st      *embedded.Stack
	table   string
	objects s3store.LedgerObjects
	svc     *ledger.Service
	poller  *localrunner.StreamPoller
	der     []byte
}

// startLedger starts the embedded stack and the ledger on it; extra
// variables add to (or replace) the ledger's environment.
func startLedger(t *testing.T, extra ...map[string]string) *ledgerStack {
	t.Helper()
	ctx := context.Background()
	st, err := embedded.Start(ctx, embedded.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	kc := kms.NewFromConfig(st.AWS)
	key, err := kc.CreateKey(ctx, &kms.CreateKeyInput{KeySpec: kmstypes.KeySpecEccNistP256, KeyUsage: kmstypes.KeyUsageTypeSignVerify})
	if err != nil {
		t.Fatal(err)
	}
	pub, err := kc.GetPublicKey(ctx, &kms.GetPublicKeyInput{KeyId: key.KeyMetadata.Arn})
	if err != nil {
		t.Fatal(err)
	}
	arn := st.StreamARNs["QuarantineTable"]
	if arn == "" {
		t.Fatal("the embedded quarantine table has no stream")
	}
	env := map[string]string{"TABLE_NAME": st.Names["QuarantineTable"], "LEDGER_BUCKET": st.Names["ArchiveBucket"],
		"SIGNING_KEY_ID": aws.ToString(key.KeyMetadata.Arn), "STREAM_ARN": arn, "LEDGER_RETENTION_DAYS": "1"}
	for _, x := range extra {
		maps.Copy(env, x)
	}
	// The digest function's settings (a superset of the stream
	// function's), in one process serving both, without the pipeline
	// check (no Lambda client here): no function names.
	env["STREAM_FUNCTION_NAME"], env["AWS_LAMBDA_FUNCTION_NAME"] = "wire-ledger", "wire-digest"
	cfg, err := ledger.DigestConfigFromEnv(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	cfg.StreamFunctionName, cfg.FunctionName = "", ""
	var emf bytes.Buffer
	svc, err := wire.Ledger(ctx, cfg, &wire.Clients{DynamoDB: st.Clients.DynamoDB, S3: st.Clients.S3, KMS: kc, DynamoDBStreams: st.Clients.DynamoDBStreams},
		wire.Runtime{Metrics: &emf})
	if err != nil {
		t.Fatal(err)
	}
	return &ledgerStack{t: t, st: st, table: cfg.TableName, svc: svc, der: pub.PublicKey,
		objects: s3store.LedgerObjects{API: st.Clients.S3, Bucket: cfg.Bucket},
		poller:  &localrunner.StreamPoller{API: st.Clients.DynamoDBStreams, StreamARN: arn, Handler: svc.HandleStream, BatchSize: 2}}
}

// put writes a record version through the store, as the functions do:
// one conditional PutItem (a new record when prevVersion is 0, else in
// place of the stored version prevVersion).
func (l *ledgerStack) put(r *quarantine.Record, prevVersion int64) {
	l.t.Helper()
	ctx := context.Background()
	store := dynamostore.New(l.st.Clients.DynamoDB, l.table)
	if prevVersion == 0 {
		if err := store.Create(ctx, r); err != nil {
			l.t.Fatal(err)
		}
		return
	}
	prev, err := store.Get(ctx, r.DLQID)
	if err != nil {
		l.t.Fatal(err)
	}
	if prev.Version != prevVersion {
		l.t.Fatalf("%s is at v%d, not v%d", r.DLQID, prev.Version, prevVersion)
	}
	if err := store.Replace(ctx, prev, r); err != nil {
		l.t.Fatal(err)
	}
}

func (l *ledgerStack) drain() int {
	l.t.Helper()
	n, err := l.poller.Drain(context.Background())
	if err != nil {
		l.t.Fatalf("drain: %v", err)
	}
	return n
}

func (l *ledgerStack) digest() ledger.DigestReport {
	l.t.Helper()
	rep, err := l.svc.Digest(context.Background())
	if err != nil {
		l.t.Fatalf("digest: %v", err)
	}
	return rep
}

// verify runs the pure verification on what the table and the bucket hold.
func (l *ledgerStack) verify(opts ...func(*dl.Input)) dl.Result {
	l.t.Helper()
	ctx := context.Background()
	in := dl.Input{Segments: map[string][]byte{}, Digests: map[string][]byte{}, PublicKeyDER: l.der, Now: time.Now()}
	for _, o := range opts {
		o(&in)
	}
	p := dynamodb.NewScanPaginator(l.st.Clients.DynamoDB, &dynamodb.ScanInput{TableName: aws.String(l.table), ConsistentRead: aws.Bool(true)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			l.t.Fatal(err)
		}
		for _, item := range page.Items {
			it, err := dynamostore.LedgerItem(item)
			if err != nil {
				l.t.Fatal(err)
			}
			in.Items = append(in.Items, it)
		}
	}
	for prefix, into := range map[string]map[string][]byte{dl.SegmentPrefix: in.Segments, dl.DigestPrefix: in.Digests} {
		keys, err := l.objects.List(ctx, prefix, "")
		if err != nil {
			l.t.Fatal(err)
		}
		for _, k := range keys {
			if into[k], err = l.objects.Get(ctx, k); err != nil {
				l.t.Fatal(err)
			}
		}
	}
	return dl.Verify(in)
}

func (l *ledgerStack) objectCount() int {
	l.t.Helper()
	keys, err := l.objects.List(context.Background(), "ledger/", "")
	if err != nil {
		l.t.Fatal(err)
	}
	return len(keys)
}

func next(t *testing.T, r *quarantine.Record, edit func(*quarantine.Record)) *quarantine.Record {
	t.Helper()
	n := *r
	n.Version, n.PrevSeal = r.Version+1, r.Seal
	edit(&n)
	if err := quarantine.SealRecord(&n); err != nil {
		t.Fatal(err)
	}
	return &n
}

// The ledger end to end on the embedded stack: records written to the
// table reach the Object Lock bucket through the stream, a signed digest
// anchors them, the pure verification finds nothing, and then names a
// record rewritten and re-sealed through the SDK, before and after the
// ledger saw the rewrite, and a record deleted.
func TestLedgerEndToEnd(t *testing.T) {
	l := startLedger(t)
	a, b, c := storetest.Record(t, storetest.UniqueID("a")), storetest.Record(t, storetest.UniqueID("b")), storetest.Record(t, storetest.UniqueID("c"))
	for _, r := range []*quarantine.Record{a, b, c} {
		l.put(r, 0)
	}
	b2 := next(t, b, func(r *quarantine.Record) { r.Status = quarantine.StatusParked })
	l.put(b2, 1)
	if n := l.drain(); n < 4 {
		t.Fatalf("drained %d changes, want the 4 writes at least", n)
	}
	if rep := l.digest(); !rep.Written || rep.N != 1 || rep.Shards == 0 {
		t.Fatalf("digest %+v", rep)
	}
	before := l.objectCount()
	l.drain() // the ledger's own head and digest items come back: nothing is ledgered
	if after := l.objectCount(); after != before {
		t.Fatalf("the ledger's own writes made %d objects", after-before)
	}
	if res := l.verify(); !res.OK() || res.Items != 3 || res.Entries != 4 || res.LastDigest != 1 || res.Unanchored != 0 {
		t.Fatalf("verify: %+v", res)
	}

	// An insider rewrites b and re-seals it: its own seal verifies.
	forged := *b2
	forged.Status, forged.FailureReason = quarantine.StatusResolved, "fixed by hand"
	if err := quarantine.SealRecord(&forged); err != nil {
		t.Fatal(err)
	}
	if err := quarantine.Verify(&forged); err != nil {
		t.Fatalf("the forged record's seal: %v", err)
	}
	item, err := dynamostore.Marshal(&forged)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.st.Clients.DynamoDB.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: aws.String(l.table), Item: item}); err != nil {
		t.Fatal(err)
	}
	if res := l.verify(); !res.Has(dl.KindRewritten, b.DLQID) || len(res.Problems) != 1 {
		t.Fatalf("before the ledger saw it: %v", res.Problems)
	}
	l.drain()
	if res := l.verify(); !res.Has(dl.KindRewritten, b.DLQID) || res.Unanchored != 1 {
		t.Fatalf("after the ledger saw it: %+v", res)
	}

	// A record deleted through the SDK.
	if _, err := l.st.Clients.DynamoDB.DeleteItem(context.Background(), &dynamodb.DeleteItemInput{TableName: aws.String(l.table),
		Key: map[string]types.AttributeValue{"dlq_id": &types.AttributeValueMemberS{Value: c.DLQID}}}); err != nil {
		t.Fatal(err)
	}
	if res := l.verify(); !res.Has(dl.KindDeleted, c.DLQID) {
		t.Fatalf("deleted, not yet ledgered: %v", res.Problems)
	}
	l.drain()
	if rep := l.digest(); !rep.Written || rep.N != 2 {
		t.Fatalf("digest %+v", rep)
	}
	res := l.verify()
	if !res.Has(dl.KindDeleted, c.DLQID) || !res.Has(dl.KindRewritten, b.DLQID) || len(res.Problems) != 2 || res.Unanchored != 0 {
		t.Fatalf("after the second digest: %+v", res)
	}
	if !strings.Contains(res.Problems[0].Detail+res.Problems[1].Detail, "REMOVE") {
		t.Fatalf("the deletion is not named as the ledgered REMOVE: %v", res.Problems)
	}
}

// A forged digest in the bucket (a digest key taken before the ledger
// writes it) fails its signature.
func TestLedgerDigestSignatureOnTheStack(t *testing.T) {
	l := startLedger(t)
	l.put(storetest.Record(t, storetest.UniqueID("a")), 0)
	l.drain()
	l.digest()
	raw, err := l.objects.Get(context.Background(), dl.DigestKey(1))
	if err != nil {
		t.Fatal(err)
	}
	d, err := dl.ParseDigest(raw)
	if err != nil {
		t.Fatal(err)
	}
	if err := dl.VerifyDigest(d, l.der); err != nil {
		t.Fatalf("KMS's signature does not verify offline: %v", err)
	}
	d.Shards[0].Segments = 7
	if err := dl.VerifyDigest(d, l.der); err == nil {
		t.Fatal("a changed digest verifies")
	}
}

// crashOnce refuses the first head update (the function died between the
// segment's PUT and the head's update).
type crashOnce struct {
	ledger.State
	crashed bool
}

func (c *crashOnce) AdvanceHead(ctx context.Context, h ledger.Head, prev string, pending time.Time) error {
	if !c.crashed {
		c.crashed = true
		return errors.New("the process died")
	}
	return c.State.AdvanceHead(ctx, h, prev, pending)
}

// lostOnce applies the first segment PUT and loses its answer.
type lostOnce struct {
	ledger.Objects
	lost bool
}

func (l *lostOnce) PutIfAbsent(ctx context.Context, key string, body []byte, until time.Time) error {
	err := l.Objects.PutIfAbsent(ctx, key, body, until)
	if err == nil && !l.lost {
		l.lost = true
		return errors.New("connection reset")
	}
	return err
}

// A crash mid-batch and a lost answer on the real stack, with the batch
// bisected and delivered again: every change is ledgered once.
func TestLedgerCrashMidBatchOnTheStack(t *testing.T) {
	l := startLedger(t)
	crash := &crashOnce{State: l.svc.State}
	l.svc.State = crash
	l.svc.Objects = &lostOnce{Objects: l.svc.Objects}
	// The first two counter transactions are applied and their answers
	// lost: the SDK and then the retried batch send them again.
	lossy, lost := faults.LoseDynamoDBAnswers(l.st.AWS, "TransactWriteItems", 2)
	l.svc.Counts = dynamostore.NewCounts(lossy, l.table)
	l.poller.BatchSize, l.poller.Bisect = 3, true
	var recs []*quarantine.Record
	for range 5 {
		r := storetest.Record(t, storetest.UniqueID("m"))
		recs = append(recs, r)
		l.put(r, 0)
	}
	l.put(next(t, recs[0], func(r *quarantine.Record) { r.Status = quarantine.StatusParked }), 1)
	l.drain()
	if !crash.crashed {
		t.Fatal("no crash happened")
	}
	if rep := l.digest(); !rep.Written {
		t.Fatalf("digest %+v", rep)
	}
	res := l.verify()
	if !res.OK() || res.Entries != 6 || res.Items != 5 {
		t.Fatalf("verify %+v, want 6 changes of 5 records, no problem", res)
	}
	// The counters equal a full recount of the table: each change counted
	// once through the crash, the lost answers and the retried batches.
	if lost.Lost() != 2 {
		t.Fatalf("%d counter answers lost, want 2", lost.Lost())
	}
	store := dynamostore.New(l.st.Clients.DynamoDB, l.table)
	want := map[[2]string]int64{}
	for _, r := range recs {
		cur, err := store.Get(context.Background(), r.DLQID)
		if err != nil {
			t.Fatal(err)
		}
		want[[2]string{string(cur.Status), string(cur.FailureClass)}]++
	}
	for _, st := range []quarantine.Status{quarantine.StatusQuarantined, quarantine.StatusParked, quarantine.StatusRedriven} {
		for _, c := range []quarantine.Class{quarantine.ClassExhausted, quarantine.ClassValidation, quarantine.ClassPoison} {
			if got, w := storetest.StateCount(t, store, "src", st, c), want[[2]string{string(st), string(c)}]; got != w {
				t.Errorf("counter %s/%s = %d, the table holds %d", st, c, got, w)
			}
		}
	}
}

// An insider's forged next version on the stack: version 3 written by
// PutItem with prev_seal = version 2's seal and a recomputed seal, the
// payload changed. The stream ledgers it like any write and a digest
// anchors it; Verify with dynamostore.LedgerVersionCheck names it.
func TestLedgerVerifyNamesAForgedNextVersionOnTheStack(t *testing.T) {
	l := startLedger(t)
	ctx := context.Background()
	now := time.Now()
	a := storetest.Record(t, storetest.UniqueID("a"))
	l.put(a, 0)
	a2, err := a.Claim("ops", now, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	l.put(a2, 1)
	a3, err := a2.MarkRedriven("ops", "mid-1", now)
	if err != nil {
		t.Fatal(err)
	}
	// The forgery: a legitimate-looking version 3 whose payload changed.
	a3.Body = `{"forged":true}`
	a3.BodySHA256, a3.BodySize = quarantine.BodySHA256([]byte(a3.Body)), int64(len(a3.Body))
	if err := quarantine.SealRecord(a3); err != nil {
		t.Fatal(err)
	}
	if err := quarantine.VerifyChain(a2, a3); err != nil {
		t.Fatalf("the forgery's own seal and chain: %v", err)
	}
	item, err := dynamostore.Marshal(a3)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.st.Clients.DynamoDB.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(l.table), Item: item}); err != nil {
		t.Fatal(err)
	}
	l.drain()
	if rep := l.digest(); !rep.Written {
		t.Fatalf("digest %+v", rep)
	}
	// The table and the bucket, as dlqctl verify reads them.
	in := dl.Input{Segments: map[string][]byte{}, Digests: map[string][]byte{}, PublicKeyDER: l.der, Now: time.Now()}
	out, err := l.st.Clients.DynamoDB.Scan(ctx, &dynamodb.ScanInput{TableName: aws.String(l.table), ConsistentRead: aws.Bool(true)})
	if err != nil {
		t.Fatal(err)
	}
	for _, raw := range out.Items {
		it, err := dynamostore.LedgerItem(raw)
		if err != nil {
			t.Fatal(err)
		}
		in.Items = append(in.Items, it)
	}
	for prefix, into := range map[string]map[string][]byte{dl.SegmentPrefix: in.Segments, dl.DigestPrefix: in.Digests} {
		keys, err := l.objects.List(ctx, prefix, "")
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range keys {
			if into[k], err = l.objects.Get(ctx, k); err != nil {
				t.Fatal(err)
			}
		}
	}
	if res := dl.Verify(in); !res.OK() || res.Entries != 3 {
		t.Fatalf("without the hook (what chains): %+v", res)
	}
	in.CheckVersion = dynamostore.LedgerVersionCheck()
	res := dl.Verify(in)
	if !res.Has(dl.KindForged, a.DLQID) || len(res.Problems) != 1 {
		t.Fatalf("with the hook: %v, want %s forged", res.Problems, a.DLQID)
	}
	if d := res.Problems[0].Detail; !strings.Contains(d, "version 3 is not a transition of version 2") || !strings.Contains(d, "BodySHA256") {
		t.Fatalf("detail %q", d)
	}
}

// A retried batch delivered out of order on the real stack (Lambda may do
// so): its later half first, then its earlier half. The earlier changes
// are ledgered late, not dropped, and counted once: the counters equal a
// recount of the table, and the digest lists the stream's shards.
func TestLedgerOutOfOrderRetryOnTheStack(t *testing.T) {
	l := startLedger(t)
	l.poller.BatchSize = 10
	swapped := false
	l.poller.Handler = func(ctx context.Context, ev events.DynamoDBTimeWindowEvent) (events.DynamoDBTimeWindowEventResponse, error) {
		if swapped || len(ev.Records) < 4 {
			return l.svc.HandleStream(ctx, ev)
		}
		swapped = true
		half := len(ev.Records) / 2
		first, second := ev, ev
		first.Records, second.Records = ev.Records[:half], ev.Records[half:]
		if resp, err := l.svc.HandleStream(ctx, second); err != nil || len(resp.BatchItemFailures) > 0 {
			return resp, err
		}
		return l.svc.HandleStream(ctx, first)
	}
	var recs []*quarantine.Record
	for range 6 {
		r := storetest.Record(t, storetest.UniqueID("o"))
		recs = append(recs, r)
		l.put(r, 0)
	}
	l.put(next(t, recs[0], func(r *quarantine.Record) { r.Status = quarantine.StatusParked }), 1)
	l.drain()
	if !swapped {
		t.Fatal("no batch was delivered out of order")
	}
	rep := l.digest()
	if !rep.Written || rep.Shards < 1 {
		t.Fatalf("digest %+v", rep)
	}
	res := l.verify()
	if !res.OK() || res.Entries != 7 || res.Items != 6 {
		t.Fatalf("verify %+v, want 7 changes of 6 records, no problem", res)
	}
	late := 0
	keys, err := l.objects.List(context.Background(), dl.SegmentPrefix, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		raw, err := l.objects.Get(context.Background(), k)
		if err != nil {
			t.Fatal(err)
		}
		seg, err := dl.ParseSegment(raw)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range seg.Entries {
			if e.Late {
				late++
			}
		}
	}
	if late == 0 {
		t.Fatal("no entry ledgered late")
	}
	store := dynamostore.New(l.st.Clients.DynamoDB, l.table)
	want := map[[2]string]int64{}
	for _, r := range recs {
		cur, err := store.Get(context.Background(), r.DLQID)
		if err != nil {
			t.Fatal(err)
		}
		want[[2]string{string(cur.Status), string(cur.FailureClass)}]++
	}
	for _, st := range []quarantine.Status{quarantine.StatusQuarantined, quarantine.StatusParked} {
		for _, c := range []quarantine.Class{quarantine.ClassExhausted, quarantine.ClassValidation, quarantine.ClassPoison} {
			if got, w := storetest.StateCount(t, store, "src", st, c), want[[2]string{string(st), string(c)}]; got != w {
				t.Errorf("counter %s/%s = %d, the table holds %d", st, c, got, w)
			}
		}
	}
}

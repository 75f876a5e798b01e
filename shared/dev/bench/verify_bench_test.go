package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/lambda"

	"github.com/dlqquarantine/dlqq/internal/dlqctl"
	"github.com/dlqquarantine/dlqq/shared/adapter/dynamostore"
	"github.com/dlqquarantine/dlqq/shared/adapter/kmssign"
	"github.com/dlqquarantine/dlqq/shared/adapter/s3store"
	"github.com/dlqquarantine/dlqq/shared/dev/embedded"
	"github.com/dlqquarantine/dlqq/shared/dev/heappeak"
	"github.com/dlqquarantine/dlqq/shared/dev/localrunner"
	"github.com/dlqquarantine/dlqq/shared/dev/storetest"
	"github.com/dlqquarantine/dlqq/shared/dev/testkeys"
	dl "github.com/dlqquarantine/dlqq/shared/domain/ledger"
	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
	"github.com/dlqquarantine/dlqq/shared/runtime/awsclients"
)

// Verify benchmark's shape: records, versions of each, stream shards and
// changes a segment (the ledger mapping's batch size).
const (
	verifyRecords  = 100000
	verifyVersions = 3
	verifyShards   = 4
	verifySegment  = 100
)

// BenchmarkVerify times dlqctl verify, online and offline, over a ledger
// of 100,000 records of 3 versions each (DLQQ_VERIFY_BENCH_RECORDS
// overrides the count). The ledger is not built by the ledger function
// (300,000 stream changes through kumo take too long for a benchmark): the
// table is written with BatchWriteItem (each record's newest version), and
// the segments and the digest with the ledger's own builders
// (ledger.NewSegment, NewDigest), written by its S3 adapter
// (s3store.LedgerObjects: If-None-Match, COMPLIANCE) and signed by its KMS
// adapter (kmssign) with the stack's signing key: the objects are those the
// function writes, over 4 shards of 100-change segments. Run it with
// -run '^$' -bench BenchmarkVerify -benchtime=1x.
func BenchmarkVerify(b *testing.B) {
	n := verifyRecords
	if s := os.Getenv("DLQQ_VERIFY_BENCH_RECORDS"); s != "" {
		var err error
		if n, err = strconv.Atoi(s); err != nil || n < 1 {
			b.Fatalf("DLQQ_VERIFY_BENCH_RECORDS=%q", s)
		}
	}
	ctx := context.Background()
	st := embedded.ForTest(b, embedded.Options{})
	fns, err := localrunner.NewFunctions(st, nil, slog.New(slog.NewJSONHandler(io.Discard, nil)), io.Discard)
	if err != nil {
		b.Fatal(err)
	}
	table, bucket, key := st.Names["QuarantineTable"], fns.LedgerConfig.Bucket, fns.LedgerConfig.SigningKey
	start := time.Now()
	newest, entries := verifyLedgerData(b, n)
	writeTable(b, st, table, newest)
	writeSourceMarker(b, st, table, newest[0])
	objs := s3store.LedgerObjects{API: st.Clients.S3, Bucket: bucket}
	heads := writeSegments(b, objs, entries)
	signer, err := kmssign.New(ctx, st.Clients.KMS, key)
	if err != nil {
		b.Fatal(err)
	}
	d := dl.NewDigest(1, time.Now(), st.StreamARNs["QuarantineTable"], signer.KeyID(), signer.Algorithm(), nil, heads)
	h, err := d.SigningHash()
	if err != nil {
		b.Fatal(err)
	}
	sig, err := signer.Sign(ctx, h)
	if err != nil {
		b.Fatal(err)
	}
	d.Signature = base64.StdEncoding.EncodeToString(sig)
	raw, err := d.Encode()
	if err != nil {
		b.Fatal(err)
	}
	if err := objs.PutIfAbsent(ctx, dl.DigestKey(1), raw, time.Now().Add(24*time.Hour)); err != nil {
		b.Fatal(err)
	}
	b.Logf("built %d records, %d versions, %d segments in %s", n, n*verifyVersions, countSegments(heads), time.Since(start).Round(time.Second))

	// runWith runs dlqctl on clients: the stack's, or the same with the
	// latency model on every call (modelClients).
	runWith := func(clients *awsclients.Clients, args ...string) (string, time.Duration) {
		var out, errw bytes.Buffer
		a := dlqctl.NewApp(strings.NewReader(""), &out, &errw)
		a.Connect = func(context.Context, string, string) (*dlqctl.Clients, error) {
			return &dlqctl.Clients{Clients: clients, Lambda: lambda.NewFromConfig(st.AWS), Local: true}, nil
		}
		t0 := time.Now()
		code := a.Main(ctx, append([]string{"--actor", "bench", "--table", table, "--ledger-bucket", bucket, "--signing-key", key}, args...))
		took := time.Since(t0)
		if code != 0 {
			b.Fatalf("dlqctl %v (exit %d): %s%s", args, code, firstN(out.String(), 2000), errw.String())
		}
		return out.String(), took
	}
	run := func(args ...string) (string, time.Duration) { return runWith(st.Clients, args...) }
	model := modelClients(st, 43)
	dir := filepath.Join(b.TempDir(), "export")
	b.ResetTimer()
	for range b.N {
		out, online := run("verify")
		want := fmt.Sprintf("verified %d records (0 archived stubs): 0 problems\nledger: %d versions", n, n*verifyVersions)
		if !strings.HasPrefix(out, want) {
			b.Fatalf("verify:\n%s", firstN(out, 2000))
		}
		// A daily verify from its checkpoint: the run that leaves it, then
		// one from it, nothing changed since (verify --checkpoint).
		cpDir, cpKey := filepath.Join(b.TempDir(), "checkpoint"), filepath.Join(b.TempDir(), "key")
		if err := dlqctl.WriteCheckpointKey(cpKey); err != nil {
			b.Fatal(err)
		}
		cpOut, cpFirst := run("verify", "--checkpoint", cpDir, "--checkpoint-key", cpKey)
		againOut, cpAgain := run("verify", "--checkpoint", cpDir, "--checkpoint-key", cpKey)
		for _, o := range []string{cpOut, againOut} {
			if !strings.HasPrefix(o, want) {
				b.Fatalf("verify --checkpoint:\n%s", firstN(o, 2000))
			}
		}
		m := regexp.MustCompile(`: (\d+) of (\d+) ledger objects read from it, (\d+) from the bucket; (\d+) checks skipped`).FindStringSubmatch(againOut)
		// The objects from the checkpoint but those read all the same (one
		// at random, and each with a chance of 1 in 64), every version
		// check skipped.
		if m == nil || atoi(m[1])+atoi(m[3]) != atoi(m[2]) || atoi(m[3]) < 1 || m[4] != strconv.Itoa(n*verifyVersions) {
			b.Fatalf("verify from the checkpoint: %q\n%s", m, firstN(againOut, 4000))
		}
		b.ReportMetric(float64(atoi(m[3])), "checkpoint-again-objects-read")
		b.ReportMetric(cpFirst.Seconds(), "checkpoint-first-s")
		b.ReportMetric(cpAgain.Seconds(), "checkpoint-again-s")
		b.ReportMetric(cpAgain.Seconds()/online.Seconds(), "again/online")
		b.Logf("%d records: verify leaving a checkpoint %s, again from it (nothing changed, %s of %s objects from it) %s", n, cpFirst.Round(time.Millisecond), m[1], m[2], cpAgain.Round(time.Millisecond))
		// The same two under the latency model (latency.AWS: S3 25 ms a
		// call, DynamoDB 8 ms a Scan page, KMS 8 ms): what the checkpoint
		// spares is calls, which the in-process stack answers at once.
		modelOut, modelOnline := runWith(model, "verify")
		modelAgainOut, modelAgain := runWith(model, "verify", "--checkpoint", cpDir, "--checkpoint-key", cpKey)
		for _, o := range []string{modelOut, modelAgainOut} {
			if !strings.HasPrefix(o, want) {
				b.Fatalf("verify under the latency model:\n%s", firstN(o, 2000))
			}
		}
		b.ReportMetric(modelOnline.Seconds(), "model-online-s")
		b.ReportMetric(modelAgain.Seconds(), "model-checkpoint-again-s")
		b.ReportMetric(modelAgain.Seconds()/modelOnline.Seconds(), "model-again/online")
		b.Logf("%d records under the latency model: online verify %s, again from the checkpoint %s", n, modelOnline.Round(time.Millisecond), modelAgain.Round(time.Millisecond))
		_, export := run("ledger", "export", dir)
		off, offline := run("verify", "--offline", dir, "--public-key", filepath.Join(dir, dlqctl.ExportPublicKey))
		if !strings.HasPrefix(off, want) {
			b.Fatalf("verify --offline:\n%s", firstN(off, 2000))
		}
		b.ReportMetric(online.Seconds(), "online-s")
		b.ReportMetric(offline.Seconds(), "offline-s")
		b.ReportMetric(export.Seconds(), "export-s")
		b.ReportMetric(float64(n), "records")
		b.Logf("%d records: online verify %s, ledger export %s, offline verify %s", n, online.Round(time.Millisecond), export.Round(time.Millisecond), offline.Round(time.Millisecond))
		os.RemoveAll(dir)
	}
}

// atoi is s as a number (0: not one).
func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}

func firstN(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

func countSegments(heads []dl.Head) int64 {
	var s int64
	for _, h := range heads {
		s += h.Segments
	}
	return s
}

// verifyLedgerData builds n records of verifyVersions versions each: each
// record's newest version (the table) and every shard's changes in order
// (the stream), a record's changes on one shard as DynamoDB Streams keeps
// them.
func verifyLedgerData(b *testing.B, n int) ([]*quarantine.Record, [][]dl.Entry) {
	b.Helper()
	newest := make([]*quarantine.Record, n)
	entries := make([][]dl.Entry, verifyShards)
	seqs := make([]*big.Int, verifyShards)
	for s := range seqs {
		seqs[s] = new(big.Int).Exp(big.NewInt(10), big.NewInt(20), nil) // 21 digits
	}
	at := time.Now().UTC().Add(-time.Hour).Format(time.RFC3339Nano)
	for i := range n {
		var es []dl.Entry
		newest[i], es = recordVersions(b, i, seqs[i%verifyShards], at)
		entries[i%verifyShards] = append(entries[i%verifyShards], es...)
	}
	return newest, entries
}

// recordVersions builds record i in verifyVersions versions, each a real
// transition of the one before it (verify checks each is one: parked by
// hand, then back to quarantine, and so on), and their changes, numbered
// on from seq.
func recordVersions(b *testing.B, i int, seq *big.Int, at string) (*quarantine.Record, []dl.Entry) {
	r := storetest.Record(b, fmt.Sprintf("verify-%07d", i))
	var prevItem dl.Item
	entries := make([]dl.Entry, 0, verifyVersions)
	for v := 1; v <= verifyVersions; v++ {
		if v > 1 {
			var next *quarantine.Record
			var err error
			if r.Status == quarantine.StatusParked {
				next, err = r.Unpark(quarantine.WithApproval("operator:bench", quarantine.FourEyesOff), "bench", r.StatusSince.Add(time.Minute))
			} else {
				next, err = r.ParkManual("operator:bench", "bench", r.LastSeen.Add(time.Minute))
			}
			if err != nil {
				b.Fatal(err)
			}
			r = next
		}
		it := storetest.LedgerItem(b, r)
		seq.Add(seq, big.NewInt(1))
		e := dl.Entry{Seq: seq.String(), Event: dl.EventInsert, At: at, Key: r.DLQID, Item: it}
		if v > 1 {
			e.Event, e.Old, e.OldItem = dl.EventModify, &dl.Old{Version: r.Version - 1, Seal: r.PrevSeal}, prevItem
		}
		prevItem = it
		entries = append(entries, e)
	}
	return r, entries
}

// writeTable writes the records with BatchWriteItem, 8 writers.
func writeTable(b *testing.B, st *embedded.Stack, table string, recs []*quarantine.Record) {
	b.Helper()
	ctx := context.Background()
	work := make(chan []*quarantine.Record)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var first error
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for chunk := range work {
				reqs := make([]ddbtypes.WriteRequest, 0, len(chunk))
				for _, r := range chunk {
					item, err := dynamostore.Marshal(r)
					if err != nil {
						mu.Lock()
						first = err
						mu.Unlock()
						return
					}
					reqs = append(reqs, ddbtypes.WriteRequest{PutRequest: &ddbtypes.PutRequest{Item: item}})
				}
				for len(reqs) > 0 {
					out, err := st.Clients.DynamoDB.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: map[string][]ddbtypes.WriteRequest{table: reqs}})
					if err != nil {
						mu.Lock()
						first = err
						mu.Unlock()
						return
					}
					reqs = out.UnprocessedItems[table]
				}
			}
		}()
	}
	for i := 0; i < len(recs); i += 25 {
		work <- recs[i:min(i+25, len(recs))]
	}
	close(work)
	wg.Wait()
	if first != nil {
		b.Fatal(first)
	}
}

// writeSourceMarker writes the marker of r's source, as the store's first
// write of a source does (dynamostore's source index: without it verify
// reports that listings across sources cannot reach the source).
func writeSourceMarker(b *testing.B, st *embedded.Stack, table string, r *quarantine.Record) {
	b.Helper()
	s := func(v string) ddbtypes.AttributeValue { return &ddbtypes.AttributeValueMemberS{Value: v} }
	if _, err := st.Clients.DynamoDB.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: aws.String(table), Item: map[string]ddbtypes.AttributeValue{
		dynamostore.KeyAttr: s("#src#" + r.Source), "status": s(dynamostore.SourcePartition), dynamostore.IndexKeyAttr: s(dynamostore.SourcePartition),
		"first_seen": s(r.FirstSeen.String()), "source": s(r.Source),
	}}); err != nil {
		b.Fatal(err)
	}
}

// writeSegments chains each shard's entries into segments of
// verifySegment changes and writes them, 16 at once; it returns the
// shards' heads.
func writeSegments(b *testing.B, objs s3store.LedgerObjects, entries [][]dl.Entry) []dl.Head {
	b.Helper()
	segs, heads := buildSegments(b, entries)
	type put struct {
		key string
		raw []byte
	}
	var puts []put
	for key, raw := range segs {
		puts = append(puts, put{key, raw})
	}
	ctx := context.Background()
	until := time.Now().Add(24 * time.Hour)
	work := make(chan put)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var first error
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for p := range work {
				if err := objs.PutIfAbsent(ctx, p.key, p.raw, until); err != nil {
					mu.Lock()
					first = err
					mu.Unlock()
				}
			}
		}()
	}
	for _, p := range puts {
		work <- p
	}
	close(work)
	wg.Wait()
	if first != nil {
		b.Fatal(first)
	}
	return heads
}

// buildSegments chains each shard's entries into segments of
// verifySegment changes, as the ledger function writes them; it returns
// them by key, and the shards' heads.
func buildSegments(b *testing.B, entries [][]dl.Entry) (map[string][]byte, []dl.Head) {
	b.Helper()
	segs := map[string][]byte{}
	var heads []dl.Head
	for s, es := range entries {
		shard := fmt.Sprintf("shardId-%020d", s)
		var prev *dl.Ref
		var h dl.Head
		for i := 0; i < len(es); i += verifySegment {
			seg, err := dl.NewSegment("bench-stream", shard, prev, es[i:min(i+verifySegment, len(es))])
			if err != nil {
				b.Fatal(err)
			}
			raw, err := seg.Encode()
			if err != nil {
				b.Fatal(err)
			}
			key := dl.SegmentKey(shard, seg.FirstSeq)
			segs[key] = raw
			prev = &dl.Ref{Key: key, SHA256: dl.SHA256Hex(raw)}
			h = dl.Head{Shard: shard, LastSeq: seg.LastSeq, SegmentKey: key, SegmentSHA256: prev.SHA256, Segments: h.Segments + 1}
		}
		if h.Segments > 0 {
			heads = append(heads, h)
		}
	}
	return segs, heads
}

// BenchmarkVerifyVersions runs the ledger's verification alone
// (ledger.Verify, no emulator) on DLQQ_VERIFY_BENCH_VERSIONS versions
// (300,000 unless set: make bench's VERIFY_VERSIONS): real records
// (storetest.Record, about 3 KB each) in 3 versions each over 4 shards of
// 100-change segments, with the checks dlqctl verify runs on them
// (dynamostore's version, approval and index-key checks; the writer
// proofs, which need KMS, are left out). The ledger and the table are
// written to files first, as dlqctl verify keeps them (one file a
// segment, one line an item), and Verify reads them from there, checking
// the keys in ledger.PartitionsFor partitions through its spill files:
// "streamed". Up to 300,000 versions it also runs Verify with everything
// in memory, as before ("in-memory"), for the ratio. Each reports
// versions verified per second and the Go heap Verify held above its
// input (heappeak): the objects (garbage included, at this process's GOGC)
// and the live heap, in total and per version. "streamed-from-proofs" is
// the streamed run again from the proofs of an earlier one (a daily
// verify from its checkpoint, nothing changed since).
func BenchmarkVerifyVersions(b *testing.B) {
	versions := 300000
	if s := os.Getenv("DLQQ_VERIFY_BENCH_VERSIONS"); s != "" {
		var err error
		if versions, err = strconv.Atoi(s); err != nil || versions < verifyVersions {
			b.Fatalf("DLQQ_VERIFY_BENCH_VERSIONS=%q", s)
		}
	}
	records := versions / verifyVersions
	dir := b.TempDir()
	start := time.Now()
	files := writeLedgerFiles(b, dir, records)
	key, der := testkeys.ECDSA(b)
	now := time.Now()
	rawDigest, err := testkeys.SignDigest(b, key, dl.NewDigest(1, now, "bench-stream", "key", dl.AlgECDSA, nil, files.heads)).Encode()
	if err != nil {
		b.Fatal(err)
	}
	b.Logf("wrote %d records, %d versions, %d segments (%.0f MiB) and the table (%.0f MiB) in %s", records, records*verifyVersions,
		len(files.segments), float64(files.segmentBytes)/(1<<20), float64(files.itemBytes)/(1<<20), time.Since(start).Round(time.Second))
	base := dl.Input{Digests: map[string][]byte{dl.DigestKey(1): rawDigest}, PublicKeyDER: der, Now: now,
		CheckVersion: dynamostore.LedgerVersionCheck(), Across: dynamostore.LedgerApprovalAcross(), IndexKey: dynamostore.IndexKeyOf, MaxDigestAge: -1}
	run := func(b *testing.B, in dl.Input) {
		for range b.N {
			var res dl.Result
			var err error
			t0 := time.Now()
			peak := heappeak.Measure(func() { res, err = dl.VerifyErr(in) })
			took := time.Since(t0)
			if err != nil || !res.OK() || res.Entries != records*verifyVersions {
				b.Fatalf("%v, %d problems (%v), %d entries", err, len(res.Problems), firstProblems(res.Problems), res.Entries)
			}
			const mib = 1 << 20
			b.ReportMetric(float64(res.Entries)/took.Seconds(), "versions/s")
			b.ReportMetric(float64(peak.Objects)/mib, "peak-heap-MiB")
			b.ReportMetric(float64(peak.Live)/mib, "peak-live-MiB")
			b.ReportMetric(float64(peak.Objects)/float64(res.Entries)/1024, "heap-KiB/version")
			b.ReportMetric(float64(peak.Live)/float64(res.Entries)/1024, "live-KiB/version")
			b.ReportMetric(float64(files.segmentBytes)/float64(res.Entries)/1024, "segment-KiB/version")
			b.ReportMetric(float64(in.Partitions), "partitions")
		}
	}
	streamed := base
	streamed.SegmentKeys, streamed.ReadSegment, streamed.ScanItems = files.segments, files.readSegment, files.scanItems
	streamed.Partitions, streamed.SpillDir = dl.PartitionsFor(files.segmentBytes+files.itemBytes, 0), dir
	b.Run("streamed", func(b *testing.B) { run(b, streamed) })
	// A daily verify from its checkpoint where nothing changed: every
	// check but those an earlier run passed (dl.Proofs: each version's
	// decode and re-seal), as dlqctl verify --checkpoint runs it. The run
	// that collects the proofs is not timed.
	b.Run("streamed-from-proofs", func(b *testing.B) {
		first := streamed
		first.Proofs = dl.NewProofs("bench", nil)
		if res, err := dl.VerifyErr(first); err != nil || !res.OK() {
			b.Fatalf("%v %v", err, firstProblems(res.Problems))
		}
		in := streamed
		in.Proofs = dl.NewProofs("bench", first.Proofs.Proven())
		run(b, in)
		b.ReportMetric(float64(in.Proofs.Reused())/float64(b.N), "checks-skipped")
	})
	if versions > 300000 {
		return // in memory, it would hold about 36 KiB a version
	}
	b.Run("in-memory", func(b *testing.B) {
		in := base
		in.Segments = map[string][]byte{}
		for _, k := range files.segments {
			raw, err := files.readSegment(k)
			if err != nil {
				b.Fatal(err)
			}
			in.Segments[k] = raw
		}
		if err := files.scanItems(func(it dl.Item) error { in.Items = append(in.Items, it); return nil }); err != nil {
			b.Fatal(err)
		}
		run(b, in)
	})
}

// ledgerFiles are a ledger and its table written to files: one a segment,
// one line of table.jsonl an item.
type ledgerFiles struct {
	dir                     string
	segments                []string // keys
	heads                   []dl.Head
	segmentBytes, itemBytes int64
}

func (f *ledgerFiles) segmentPath(key string) string {
	return filepath.Join(f.dir, "segments", strings.NewReplacer("/", "_").Replace(key))
}

func (f *ledgerFiles) readSegment(key string) ([]byte, error) { return os.ReadFile(f.segmentPath(key)) }

func (f *ledgerFiles) scanItems(yield func(dl.Item) error) error {
	for s := range verifyShards {
		fh, err := os.Open(filepath.Join(f.dir, fmt.Sprintf("table-%d.jsonl", s)))
		if err != nil {
			return err
		}
		sc := bufio.NewScanner(fh)
		sc.Buffer(make([]byte, 0, 1<<16), 4<<20)
		for sc.Scan() {
			it, err := dl.ParseItem(sc.Bytes())
			if err == nil {
				err = yield(it)
			}
			if err != nil {
				fh.Close()
				return err
			}
		}
		fh.Close()
		if err := sc.Err(); err != nil {
			return err
		}
	}
	return nil
}

// writeLedgerFiles writes n records of verifyVersions versions each, as
// verifyLedgerData builds them, to files under dir, a shard at a time on
// each CPU: each shard's segments of verifySegment changes, and each
// record's newest version as the table holds it. It holds one record and
// one segment a shard.
func writeLedgerFiles(b *testing.B, dir string, n int) *ledgerFiles {
	b.Helper()
	f := &ledgerFiles{dir: dir}
	if err := os.MkdirAll(filepath.Join(dir, "segments"), 0o700); err != nil {
		b.Fatal(err)
	}
	type shardOut struct {
		keys                    []string
		head                    dl.Head
		segmentBytes, itemBytes int64
		err                     error
	}
	outs := make([]shardOut, verifyShards)
	var wg sync.WaitGroup
	sem := make(chan struct{}, max(runtime.GOMAXPROCS(0), 1))
	for s := range verifyShards {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			o := &outs[s]
			shard := fmt.Sprintf("shardId-%020d", s)
			table, err := os.Create(filepath.Join(dir, fmt.Sprintf("table-%d.jsonl", s)))
			if err != nil {
				o.err = err
				return
			}
			defer table.Close()
			w := bufio.NewWriterSize(table, 1<<16)
			var prev *dl.Ref
			var pending []dl.Entry
			flush := func() error {
				if len(pending) == 0 {
					return nil
				}
				seg, err := dl.NewSegment("bench-stream", shard, prev, pending)
				if err != nil {
					return err
				}
				raw, err := seg.Encode()
				if err != nil {
					return err
				}
				key := dl.SegmentKey(shard, seg.FirstSeq)
				if err := os.WriteFile(f.segmentPath(key), raw, 0o600); err != nil {
					return err
				}
				prev = &dl.Ref{Key: key, SHA256: dl.SHA256Hex(raw)}
				o.head = dl.Head{Shard: shard, LastSeq: seg.LastSeq, SegmentKey: key, SegmentSHA256: prev.SHA256, Segments: o.head.Segments + 1}
				o.keys, o.segmentBytes, pending = append(o.keys, key), o.segmentBytes+int64(len(raw)), pending[:0]
				return nil
			}
			seq := new(big.Int).Exp(big.NewInt(10), big.NewInt(20), nil) // 21 digits
			at := time.Now().UTC().Add(-time.Hour).Format(time.RFC3339Nano)
			for i := s; i < n; i += verifyShards {
				newest, entries := recordVersions(b, i, seq, at)
				pending = append(pending, entries...)
				if len(pending) >= verifySegment {
					if o.err = flush(); o.err != nil {
						return
					}
				}
				line, err := json.Marshal(storetest.LedgerItem(b, newest))
				if err != nil {
					o.err = err
					return
				}
				o.itemBytes += int64(len(line)) + 1
				if _, o.err = w.Write(append(line, '\n')); o.err != nil {
					return
				}
			}
			if o.err = flush(); o.err == nil {
				o.err = w.Flush()
			}
		})
	}
	wg.Wait()
	for _, o := range outs {
		if o.err != nil {
			b.Fatal(o.err)
		}
		f.segments = append(f.segments, o.keys...)
		f.segmentBytes += o.segmentBytes
		f.itemBytes += o.itemBytes
		if o.head.Segments > 0 {
			f.heads = append(f.heads, o.head)
		}
	}
	return f
}

func firstProblems(ps []dl.Problem) []dl.Problem {
	return ps[:min(len(ps), 3)]
}

// BenchmarkVerifyClaimCheckedBodies times dlqctl verify --no-ledger over
// 200 records whose 300 KiB bodies are in the payload bucket, under the
// latency model (latency.AWS: S3 25 ms a call): each body read one at a
// time (ObjectConcurrency 1, as verify read them before) and 16 at once
// (one-at-a-time-s, at-once-s, speedup).
func BenchmarkVerifyClaimCheckedBodies(b *testing.B) {
	const n = 200
	ctx := context.Background()
	st := embedded.ForTest(b, embedded.Options{})
	table := st.Names["QuarantineTable"]
	store := dynamostore.New(st.Clients.DynamoDB, table)
	payloads := s3store.New(st.Clients.S3, st.Names["PayloadBucket"], "")
	body := bytes.Repeat([]byte("x"), 300<<10)
	for range n {
		r := storetest.Record(b, storetest.UniqueID("cc"))
		ref, err := payloads.PutPayload(ctx, "payloads/"+r.IdempotencyKey, body)
		if err != nil {
			b.Fatal(err)
		}
		r.Body, r.BodyRef, r.BodySHA256, r.BodySize = "", &ref, quarantine.BodySHA256(body), int64(len(body))
		if err := quarantine.SealRecord(r); err != nil {
			b.Fatal(err)
		}
		if err := store.Create(ctx, r); err != nil {
			b.Fatal(err)
		}
	}
	model := modelClients(st, 47)
	run := func(concurrency int) time.Duration {
		var out, errw bytes.Buffer
		a := dlqctl.NewApp(strings.NewReader(""), &out, &errw)
		a.ObjectConcurrency = concurrency
		a.Connect = func(context.Context, string, string) (*dlqctl.Clients, error) {
			return &dlqctl.Clients{Clients: model, Lambda: lambda.NewFromConfig(st.AWS), Local: true}, nil
		}
		t0 := time.Now()
		code := a.Main(ctx, []string{"--actor", "bench", "--table", table, "verify", "--no-ledger"})
		took := time.Since(t0)
		if want := fmt.Sprintf("verified %d records (0 archived stubs): 0 problems", n); code != 0 || !strings.HasPrefix(out.String(), want) {
			b.Fatalf("verify (exit %d): %s%s", code, firstN(out.String(), 2000), errw.String())
		}
		return took
	}
	b.ResetTimer()
	for range b.N {
		one, many := run(1), run(0)
		b.ReportMetric(one.Seconds(), "one-at-a-time-s")
		b.ReportMetric(many.Seconds(), "at-once-s")
		b.ReportMetric(one.Seconds()/many.Seconds(), "speedup")
	}
}

package ledger

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	dl "github.com/dlqquarantine/dlqq/shared/domain/ledger"
)

func (r *rig) digest() DigestReport {
	r.t.Helper()
	rep, err := r.svc.Digest(context.Background())
	if err != nil {
		r.t.Fatalf("Digest: %v", err)
	}
	return rep
}

// digestWritten runs a digest and fails the test unless it wrote digest n
// (why says what for).
func (r *rig) digestWritten(n int64, why string) {
	r.t.Helper()
	if rep := r.digest(); !rep.Written || rep.N != n {
		r.t.Fatalf("report %+v, want digest %d%s", rep, n, why)
	}
}

// emfMetrics merges the metrics of EMF documents, one a line.
func emfMetrics(t *testing.T, b []byte) map[string]any {
	t.Helper()
	out := map[string]any{}
	for line := range bytes.Lines(b) {
		var doc map[string]any
		if err := json.Unmarshal(line, &doc); err != nil {
			t.Fatalf("emf line %s: %v", line, err)
		}
		for k, v := range doc {
			if k != "_aws" {
				out[k] = v
			}
		}
	}
	return out
}

func TestDigestAnchorsTheHeadsAndChains(t *testing.T) {
	t.Parallel()
	s := newStream()
	s.many("shard-1", 4)
	s.many("shard-2", 2)
	r := newRig(t, "shard-1", "shard-2", "shard-3")
	var emf bytes.Buffer
	r.svc.Metrics = &emf
	r.handle(batch("shard-1", s.recs["shard-1"]))
	r.handle(batch("shard-2", s.recs["shard-2"]))
	r.now = r.now.Add(time.Minute)
	rep := r.digest()
	if rep.N != 1 || !rep.Written || rep.Shards != 3 || rep.LagSeconds <= 0 {
		t.Fatalf("report %+v", rep)
	}
	// Every listed shard, with its parent; shard-3 has no chain yet.
	d1, err := dl.ParseDigest(r.objects.under(dl.DigestPrefix)[dl.DigestKey(1)])
	if err != nil || len(d1.Shards) != 3 || d1.Shards[1].ParentShard != "shard-1" || d1.Shards[1].SegmentKey == "" ||
		d1.Shards[2] != (dl.Head{Shard: "shard-3", ParentShard: "shard-2"}) {
		t.Fatalf("digest 1 lists %+v (%v), want the three shards with their parents, shard-3 empty", d1.Shards, err)
	}
	for _, h := range r.state.heads {
		if !h.PendingSince.IsZero() || h.AnchoredSeq != h.LastSeq {
			t.Fatalf("head %+v not anchored", h)
		}
	}
	doc := emfMetrics(t, emf.Bytes())
	if doc[MetricAnchoringLag] != rep.LagSeconds || doc[MetricHeadsUnproven] != 0.0 {
		t.Fatalf("emf %s, want the lag %v and no unproven head", emf.String(), rep.LagSeconds)
	}
	if !strings.Contains(emf.String(), `"Unit":"Seconds"`) {
		t.Fatalf("emf %s: lag not in seconds", emf.String())
	}

	// Nothing moved, the digest is young: nothing written.
	r.now = r.now.Add(5 * time.Minute)
	if rep := r.digest(); rep.Written || rep.N != 1 {
		t.Fatalf("report %+v, want nothing written", rep)
	}
	// Nothing moved but the digest is old: written.
	r.now = r.now.Add(DefaultDigestMaxAge)
	r.digestWritten(2, "")
	// A head moved: written.
	s.many("shard-3", 2)
	r.handle(batch("shard-3", s.recs["shard-3"]))
	r.now = r.now.Add(time.Minute)
	if rep := r.digest(); !rep.Written || rep.N != 3 || rep.Shards != 3 {
		t.Fatalf("report %+v, want digest 3 over 3 shards", rep)
	}
	r.exact(s)
}

func TestTwoConcurrentDigestRunsWriteOneDigest(t *testing.T) {
	t.Parallel()
	s, r, recs := oneShard(t, 4)
	r.handle(batch("shard-1", recs))
	other := r.service("shard-1")
	var otherRep DigestReport
	var otherErr error
	ran := false
	r.objects.beforePut = func(key string) {
		if strings.HasPrefix(key, dl.DigestPrefix) && !ran {
			ran = true // the other run writes digest 1 between this run's build and its PUT
			otherRep, otherErr = other.Digest(context.Background())
		}
	}
	rep := r.digest()
	if otherErr != nil {
		t.Fatal(otherErr)
	}
	if !otherRep.Written || rep.Written || !rep.Adopted || rep.N != 1 || otherRep.N != 1 {
		t.Fatalf("reports %+v and %+v: want one written, one adopted, both digest 1", otherRep, rep)
	}
	if n := len(r.objects.under(dl.DigestPrefix)); n != 1 || r.state.digest.N != 1 {
		t.Fatalf("%d digests, head %d", n, r.state.digest.N)
	}
	r.exact(s)
}

func TestADigestRunCrashingAfterItsPUTIsAdopted(t *testing.T) {
	t.Parallel()
	s, r, recs := oneShard(t, 4)
	r.handle(batch("shard-1", recs[:2]))
	r.state.failDigest = func() error { return errors.New("the process died") }
	if _, err := r.svc.Digest(context.Background()); err == nil {
		t.Fatal("a digest run whose head update failed reported success")
	}
	r.state.failDigest = nil
	r.now = r.now.Add(time.Minute)
	if rep := r.digest(); !rep.Adopted || rep.N != 1 {
		t.Fatalf("report %+v, want digest 1 adopted", rep)
	}
	r.handle(batch("shard-1", recs[2:]))
	r.digestWritten(2, "")
	r.exact(s)
}

func TestADigestHeadUpdateWhoseAnswerWasLostStands(t *testing.T) {
	t.Parallel()
	s, r, recs := oneShard(t, 2)
	r.handle(batch("shard-1", recs))
	r.state.afterDigest = func() error { return errLost }
	r.digestWritten(1, "")
	r.exact(s)
}

func TestAForgedDigestInTheBucketIsNotAdopted(t *testing.T) {
	t.Parallel()
	_, r, recs := oneShard(t, 2)
	r.handle(batch("shard-1", recs))
	forged := dl.NewDigest(1, r.now, streamARN, "k", dl.AlgECDSA, nil, nil)
	forged.Signature = "AAAA"
	raw, _ := forged.Encode()
	r.objects.objs[dl.DigestKey(1)] = raw
	if _, err := r.svc.Digest(context.Background()); !errors.Is(err, dl.ErrChainBroken) {
		t.Fatalf("err = %v, want ErrChainBroken", err)
	}
}

func TestEachEntryDispatchesItsEvents(t *testing.T) {
	t.Parallel()
	_, r, recs := oneShard(t, 2)
	ev, _ := json.Marshal(batch("shard-1", recs))
	resp, err := r.svc.StreamEntry(context.Background(), ev)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := json.Marshal(resp)
	if !strings.Contains(string(body), `"state":{}`) || len(r.objects.under(dl.SegmentPrefix)) != 1 {
		t.Fatalf("stream answer %s", body)
	}
	// A tumbling window's final invoke, without records, succeeds.
	final := `{"Records":[],"shardId":"shard-1","eventSourceARN":"` + streamARN + `","isFinalInvokeForWindow":true,"state":{}}`
	if resp, err := r.svc.StreamEntry(context.Background(), json.RawMessage(final)); err != nil || resp.State == nil {
		t.Fatalf("the final invoke of a window: %+v %v", resp, err)
	}
	out, err := r.svc.DigestEntry(context.Background(), json.RawMessage(`{"action":"digest"}`))
	if rep, ok := out.(DigestReport); err != nil || !ok || rep.N != 1 {
		t.Fatalf("digest answer %#v, %v", out, err)
	}
	for _, bad := range []string{`{}`, `[1]`, `{"Records":"x"}`, `null`, `"x"`} {
		if _, err := r.svc.StreamEntry(context.Background(), json.RawMessage(bad)); err == nil {
			t.Errorf("the stream entry accepted %s", bad)
		}
	}
	for _, bad := range []string{`{"action":"sweep"}`, `{}`, `[1]`, `{"action":"digest","force":true}`, `null`, `{"action":["digest"]}`} {
		if _, err := r.svc.DigestEntry(context.Background(), json.RawMessage(bad)); !errors.Is(err, ErrNotThisEntry) {
			t.Errorf("the digest entry: %s gives %v, want ErrNotThisEntry", bad, err)
		}
	}
}

func TestConfigFromEnv(t *testing.T) {
	t.Parallel()
	env := map[string]string{"TABLE_NAME": "q", "LEDGER_BUCKET": "b", "SIGNING_KEY_ID": "alias/k", "STREAM_ARN": streamARN, "LEDGER_RETENTION_DAYS": "30"}
	get := func(k string) string { return env[k] }
	// The stream function: no function name, no digest setting needed.
	cfg, err := StreamConfigFromEnv(get)
	if err != nil || cfg.Ledger.Retention != 30*24*time.Hour || cfg.Ledger.Namespace == "" || cfg.StreamFunctionName != "" || cfg.FunctionName != "" {
		t.Fatalf("cfg %+v, %v", cfg, err)
	}
	// The digest function fails its init without the stream function's
	// name (and its own, which Lambda sets).
	_, err = DigestConfigFromEnv(get)
	for _, name := range []string{"STREAM_FUNCTION_NAME", "AWS_LAMBDA_FUNCTION_NAME"} {
		if err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("the digest function without %s: %v", name, err)
		}
	}
	env["STREAM_FUNCTION_NAME"], env["AWS_LAMBDA_FUNCTION_NAME"] = "prod-ledger", "prod-digest"
	cfg, err = DigestConfigFromEnv(get)
	if err != nil || cfg.Ledger.DigestMaxAge != DefaultDigestMaxAge || cfg.StreamFunctionName != "prod-ledger" || cfg.FunctionName != "prod-digest" {
		t.Fatalf("digest cfg %+v, %v", cfg, err)
	}
	env["STREAM_FUNCTION_NAME"] = "prod-digest"
	if _, err := DigestConfigFromEnv(get); err == nil || !strings.Contains(err.Error(), "names the digest function itself") {
		t.Errorf("STREAM_FUNCTION_NAME naming the digest function: %v", err)
	}
	for _, load := range []func(func(string) string) (FunctionConfig, error){StreamConfigFromEnv, DigestConfigFromEnv} {
		_, err = load(func(k string) string { return map[string]string{"DIGEST_MAX_AGE": "soon"}[k] })
		for _, name := range []string{"TABLE_NAME", "LEDGER_BUCKET", "SIGNING_KEY_ID", "STREAM_ARN", "LEDGER_RETENTION_DAYS"} {
			if err == nil || !strings.Contains(err.Error(), name) {
				t.Errorf("error %v does not name %s", err, name)
			}
		}
	}
	if _, err = DigestConfigFromEnv(func(k string) string { return map[string]string{"DIGEST_MAX_AGE": "soon"}[k] }); err == nil || !strings.Contains(err.Error(), "DIGEST_MAX_AGE") {
		t.Errorf("error %v does not name DIGEST_MAX_AGE", err)
	}
}

// Every metric the ledger publishes carries the Table dimension when the
// function knows its table (TABLE_NAME): two stacks in one account and
// region publish into one namespace, and one stack's digest runs must not
// keep another stack's anchoring-lag alarm quiet (issue 26).
func TestLedgerMetricsNameTheirTable(t *testing.T) {
	t.Parallel()
	for _, table := range []string{"prod-quarantinetable-1a2b", ""} {
		var out bytes.Buffer
		for _, name := range []string{MetricAnchoringLag, MetricPipelineProblems, MetricHeadsUnproven} {
			if err := writeEMF(&out, Config{Namespace: "DLQQuarantine", Table: table}, time.Unix(1, 0), name, 1, "Count"); err != nil {
				t.Fatal(err)
			}
		}
		for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
			var doc struct {
				Table string `json:"Table"`
				AWS   struct {
					CloudWatchMetrics []struct{ Dimensions [][]string }
				} `json:"_aws"`
			}
			if err := json.Unmarshal([]byte(line), &doc); err != nil {
				t.Fatal(err)
			}
			dims := doc.AWS.CloudWatchMetrics[0].Dimensions
			switch {
			case table != "" && (doc.Table != table || len(dims) != 1 || len(dims[0]) != 1 || dims[0][0] != MetricDimensionTable):
				t.Errorf("table %q: %s, want the Table dimension", table, line)
			case table == "" && (doc.Table != "" || len(dims) != 1 || len(dims[0]) != 0):
				t.Errorf("no table: %s, want no dimension", line)
			}
		}
	}
	cfg, err := DigestConfigFromEnv(func(k string) string {
		return map[string]string{"TABLE_NAME": "t1", "LEDGER_BUCKET": "b", "SIGNING_KEY_ID": "k", "STREAM_ARN": "s", "LEDGER_RETENTION_DAYS": "1",
			"STREAM_FUNCTION_NAME": "f", "AWS_LAMBDA_FUNCTION_NAME": "d"}[k]
	})
	if err != nil || cfg.Ledger.Table != "t1" {
		t.Fatalf("the digest function's metrics name table %q (%v), want TABLE_NAME's", cfg.Ledger.Table, err)
	}
}

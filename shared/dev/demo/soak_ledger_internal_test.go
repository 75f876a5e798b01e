package demo

import (
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dlqquarantine/dlqq/shared/dev/faults"
	dl "github.com/dlqquarantine/dlqq/shared/domain/ledger"
)

type recordingClient struct{ got []string }

func (c *recordingClient) Do(req *http.Request) (*http.Response, error) {
	c.got = append(c.got, opOf(req))
	return &http.Response{StatusCode: 200, Body: io.NopCloser(strings.NewReader("{}")), Request: req}, nil
}

func signed(t *testing.T, svc, target, url string) *http.Request {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential=AK/20261201/us-east-1/"+svc+"/aws4_request, SignedHeaders=host, Signature=x")
	if target != "" {
		req.Header.Set("X-Amz-Target", target)
	}
	return req
}

// An aimed crash dies at the first request its aim names, not before: the
// head's update after the segment PUT never reaches AWS, nor does anything
// after it; an applied aim's request does.
func TestAimedCrashDiesAtItsRequest(t *testing.T) {
	getItem := func() *http.Request { return signed(t, "dynamodb", "DynamoDB_20120810.GetItem", "http://ddb/") }
	update := func() *http.Request { return signed(t, "dynamodb", "DynamoDB_20120810.UpdateItem", "http://ddb/") }
	put := func() *http.Request { return signed(t, "s3", "", "http://s3/b/ledger/segments/x.json?x-id=PutObject") }
	for _, tc := range []struct {
		aim      aim
		reached  []string
		crashAt  int
		appliedN int
	}{
		{soakAims["ledger"][0], []string{"dynamodb GetItem", "dynamodb UpdateItem", "s3 PutObject"}, 4, 0},
		{soakAims["ledger"][1], []string{"dynamodb GetItem", "dynamodb UpdateItem", "s3 PutObject"}, 3, 1},
	} {
		base := &recordingClient{}
		cancelled := false
		c := &aimedCrash{base: base, aim: tc.aim, cancel: func() { cancelled = true }}
		var crashedAt int
		for i, req := range []*http.Request{getItem(), update(), put(), update(), getItem()} {
			_, err := c.Do(req)
			if errors.Is(err, faults.ErrCrashed) && crashedAt == 0 {
				crashedAt = i + 1
			}
		}
		want := tc.reached[:tc.crashAt-1+tc.appliedN]
		if !slices.Equal(base.got, want) || crashedAt != tc.crashAt || !cancelled {
			t.Errorf("%s: reached %v (want %v), crashed at request %d (want %d), cancelled %v", tc.aim.what, base.got, want, crashedAt, tc.crashAt, cancelled)
		}
		if ok, point := c.Crashed(); !ok || !strings.HasPrefix(point, tc.aim.what) {
			t.Errorf("crash point %q", point)
		}
	}
}

// Each of the ledger's findings fails the soak, on its own row.
func TestSoakLedgerRowsFail(t *testing.T) {
	ok := func() *SoakReport {
		return &SoakReport{DeadLettered: 2, Quarantined: 2, StreamChanges: 3, VersionChanges: 3, VersionsSum: 3, Ledgered: 3,
			Lags: []time.Duration{time.Second, 2 * time.Second, 3 * time.Second}}
	}
	if r := ok(); !r.OK() {
		t.Fatalf("a clean report fails: %+v", r.Checks())
	}
	for _, tc := range []struct {
		row    string
		mutate func(*SoakReport)
	}{
		{CheckVersionsWritten, func(r *SoakReport) { r.VersionDrift = []string{"the versions sum to 4"} }},
		{CheckVersionsLedgered, func(r *SoakReport) { r.LedgerMissing = []string{"s/1"} }},
		{CheckVersionsLedgered, func(r *SoakReport) { r.LedgerDuplicates = []string{"s/1: in 2 entries"} }},
		{CheckVersionsLedgered, func(r *SoakReport) { r.LedgerExtra = []string{"s/9"} }},
		{CheckVersionsLedgered, func(r *SoakReport) { r.Ledgered = 2 }},
		{CheckAnchoringLag, func(r *SoakReport) { r.Unanchored = []string{"s/3: no digest covers it"} }},
		{CheckCounted, func(r *SoakReport) { r.CountedDrift = []string{"#ctr#…: counter 2, the stream's changes 1"} }},
		{CheckLedgerVerify, func(r *SoakReport) { r.LedgerProblems = []string{"rewritten q#1: not the ledgered version"} }},
	} {
		r := ok()
		tc.mutate(r)
		if r.OK() {
			t.Errorf("%s: the soak passes", tc.row)
		}
		for _, c := range r.Checks() {
			if c.OK() == (c.What == tc.row) {
				t.Errorf("%s broken: row %q held %v", tc.row, c.What, c.OK())
			}
		}
	}
}

// A change is anchored by a digest whose head of its shard is at or past
// its sequence number, compared as numbers.
func TestCoversSeqAndLags(t *testing.T) {
	pad := func(s string) string {
		p, err := dl.PadSeq(s)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	d := dl.Digest{Shards: []dl.Head{{Shard: "a", LastSeq: pad("100000000000000000200")}}}
	for _, tc := range []struct {
		shard, seq string
		want       bool
	}{
		{"a", "100000000000000000200", true}, {"a", "100000000000000000199", true}, {"a", "100000000000000000201", false},
		{"a", "9000000000000000000000", false}, {"b", "100000000000000000001", false},
	} {
		if got := coversSeq(d, tc.shard, pad(tc.seq)); got != tc.want {
			t.Errorf("%s/%s: %v", tc.shard, tc.seq, got)
		}
	}
	var lags []time.Duration
	for i := 1; i <= 100; i++ {
		lags = append(lags, time.Duration(i)*time.Millisecond)
	}
	if lagAt(lags, 0.5) != 50*time.Millisecond || lagAt(lags, 0.99) != 99*time.Millisecond || lagAt(lags, 1) != 100*time.Millisecond || lagAt(nil, 0.5) != 0 {
		t.Errorf("quantiles %s %s %s", lagAt(lags, 0.5), lagAt(lags, 0.99), lagAt(lags, 1))
	}
}

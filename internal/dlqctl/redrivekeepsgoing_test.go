package dlqctl_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/dlqquarantine/dlqq/internal/dlqctl"
)

// scriptedRuns answers the real runs of the redrive function (every
// invocation after the dry run) from script: a report in place of the
// invocation (the function does not run), or nil to let it run.
type scriptedRuns struct {
	base   aws.HTTPClient
	script func(run int) map[string]any
	mu     sync.Mutex
	calls  int
	ran    int // real runs the function made
}

func (h *scriptedRuns) Do(req *http.Request) (*http.Response, error) {
	if !strings.HasSuffix(req.URL.Path, "/invocations") {
		return h.base.Do(req)
	}
	h.mu.Lock()
	h.calls++
	n := h.calls
	h.mu.Unlock()
	var rep map[string]any
	if n > 1 {
		rep = h.script(n - 1)
	}
	if rep == nil {
		if n > 1 {
			h.mu.Lock()
			h.ran++
			h.mu.Unlock()
		}
		return h.base.Do(req)
	}
	if req.Body != nil {
		_, _ = io.Copy(io.Discard, req.Body)
		req.Body.Close()
	}
	raw, _ := json.Marshal(rep)
	return &http.Response{StatusCode: 200, Status: "200 OK", Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1, Request: req,
		Header:        http.Header{"Content-Type": {"application/json"}, "Content-Length": {strconv.Itoa(len(raw))}},
		Body:          io.NopCloser(strings.NewReader(string(raw))),
		ContentLength: int64(len(raw))}, nil
}

// deferredRun is the report of an invocation that replayed nothing and
// gave back n claims when its deadline came near: they remain.
func deferredRun(run, n int) map[string]any {
	return map[string]any{"run_id": fmt.Sprintf("scripted-%d", run), "action": "redrive", "redriven": map[string]any{"count": 0},
		"deferred": map[string]any{"count": n}, "remaining": n, "stopped": "deadline"}
}

// dlqctl redrive keeps invoking while the function says records remain,
// also after an invocation that finished none (its claims given back at
// its deadline), and stops, failing, after MaxStalledInvocations in a row
// that finished none: records are never left behind with exit code 0.
func TestRedriveKeepsGoingWhileRecordsRemain(t *testing.T) {
	v := newInventory(t)
	v.startRedrive(t, v.sources)
	for i := range 3 {
		v.add(t, fmt.Sprintf("kg-m%d", i), fmt.Sprintf(`{"event_id":"kg-%d","ndc":"12345-678-90","lot":"L","quantity_delta":1,"schedule":"CII","facility":"F","occurred_at":"2026-11-29T09:00:00Z"}`, i))
	}
	// The first run gives everything back; the second runs for real.
	first := &scriptedRuns{script: func(run int) map[string]any {
		if run == 1 {
			return deferredRun(run, 3)
		}
		return nil
	}}
	out, errOut, code := runThrough(t, v, func(base aws.HTTPClient) aws.HTTPClient { first.base = base; return first },
		"redrive", "--source", v.source, "--class", "exhausted", "--max", "100", "--yes", "-o", "json")
	var doc struct {
		Redriven  struct{ Count int }
		Deferred  struct{ Count int }
		Remaining int
		RunIDs    []string `json:"run_ids"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &doc) != nil || first.ran != 1 {
		t.Fatalf("exit %d, %d real runs:\nstdout:\n%sstderr:\n%s", code, first.ran, out, errOut)
	}
	if doc.Redriven.Count != 3 || doc.Deferred.Count != 3 || doc.Remaining != 0 || len(doc.RunIDs) != 2 {
		t.Fatalf("after an invocation that gave everything back: %+v\nstderr:\n%s", doc, errOut)
	}

	// Invocations that finish nothing, again and again: it stops after
	// MaxStalledInvocations of them, and fails.
	for i := range 2 {
		v.add(t, fmt.Sprintf("kg-n%d", i), fmt.Sprintf(`{"event_id":"kg-n%d","ndc":"12345-678-90","lot":"L","quantity_delta":1,"schedule":"CII","facility":"F","occurred_at":"2026-11-29T09:00:00Z"}`, i))
	}
	stuck := &scriptedRuns{script: func(run int) map[string]any { return deferredRun(run, 2) }}
	out, errOut, code = runThrough(t, v, func(base aws.HTTPClient) aws.HTTPClient { stuck.base = base; return stuck },
		"redrive", "--source", v.source, "--class", "exhausted", "--max", "100", "--yes", "-o", "json")
	var stalled struct {
		Remaining int
		Stopped   string
		Error     string
		RunIDs    []string `json:"run_ids"`
	}
	if code != 1 || json.Unmarshal([]byte(out), &stalled) != nil {
		t.Fatalf("stalled: exit %d:\nstdout:\n%sstderr:\n%s", code, out, errOut)
	}
	if len(stalled.RunIDs) != dlqctl.MaxStalledInvocations || stalled.Stopped != dlqctl.StoppedStalled || stalled.Remaining != 2 ||
		!strings.Contains(stalled.Error, "finished no record") || !strings.Contains(errOut, "2 records still to replay") {
		t.Fatalf("stalled: %+v\nstderr:\n%s", stalled, errOut)
	}
	out, errOut, code = runThrough(t, v, func(base aws.HTTPClient) aws.HTTPClient { return &scriptedRuns{base: base, script: stuck.script} },
		"redrive", "--source", v.source, "--class", "exhausted", "--max", "100", "--yes")
	if code != 1 || !strings.Contains(out, "remaining 2") || !strings.Contains(errOut, "3 invocations in a row finished no record") {
		t.Fatalf("stalled, table: exit %d:\nstdout:\n%sstderr:\n%s", code, out, errOut)
	}
}

// dlqctl redrive stops, failing, after an invocation whose replays SQS did
// not answer (possibly sent): it never sends anything of the request again
// at once, which could double what may already be in the source queue.
// A held record (it fails the schema and stays) is no progress either.
func TestRedriveStopsOnPossiblySentAndHeldIsNoProgress(t *testing.T) {
	v := newInventory(t)
	v.startRedrive(t, v.sources)
	v.add(t, "ps-m0", `{"event_id":"ps-0","ndc":"12345-678-90","lot":"L","quantity_delta":1,"schedule":"CII","facility":"F","occurred_at":"2026-11-29T09:00:00Z"}`)
	unknown := &scriptedRuns{script: func(run int) map[string]any {
		return map[string]any{"run_id": fmt.Sprintf("scripted-%d", run), "action": "redrive", "unknown": map[string]any{"count": 2},
			"deferred": map[string]any{"count": 1}, "remaining": 1, "stopped": "done"}
	}}
	out, errOut, code := runThrough(t, v, func(base aws.HTTPClient) aws.HTTPClient { unknown.base = base; return unknown },
		"redrive", "--source", v.source, "--class", "exhausted", "--max", "100", "--yes", "-o", "json")
	var doc struct {
		Unknown struct{ Count int }
		Stopped string
		Error   string
		RunIDs  []string `json:"run_ids"`
	}
	if code != 1 || json.Unmarshal([]byte(out), &doc) != nil || unknown.calls != 2 {
		t.Fatalf("exit %d after %d invocations:\nstdout:\n%sstderr:\n%s", code, unknown.calls, out, errOut)
	}
	if doc.Unknown.Count != 2 || doc.Stopped != dlqctl.StoppedPossiblySent || len(doc.RunIDs) != 1 || !strings.Contains(doc.Error, "not sent again by this command") {
		t.Fatalf("possibly sent: %+v\nstderr:\n%s", doc, errOut)
	}
	held := &scriptedRuns{script: func(run int) map[string]any {
		return map[string]any{"run_id": fmt.Sprintf("scripted-%d", run), "action": "redrive", "held": map[string]any{"count": 1},
			"deferred": map[string]any{"count": 2}, "remaining": 2, "stopped": "done"}
	}}
	_, errOut, code = runThrough(t, v, func(base aws.HTTPClient) aws.HTTPClient { held.base = base; return held },
		"redrive", "--source", v.source, "--class", "exhausted", "--max", "100", "--yes")
	if code != 1 || held.calls != 1+dlqctl.MaxStalledInvocations || !strings.Contains(errOut, "finished no record") {
		t.Fatalf("held at a group's head: exit %d after %d invocations:\n%s", code, held.calls, errOut)
	}
}

package dlqctl_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudformation"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/sts"

	"github.com/dlqquarantine/dlqq/internal/dlqctl"
)

// secondRunFails passes the redrive function's invocations through, but
// says records remain after the first real run (the dry run is call 1),
// so that the CLI invokes again, and answers that second run with a
// function error.
type secondRunFails struct {
	base  aws.HTTPClient
	mu    sync.Mutex
	calls int
	// failAt is the invocation answered with a function error: 0 means
	// 3 (the second real run); 2 fails the first real run.
	failAt int
}

func (h *secondRunFails) Do(req *http.Request) (*http.Response, error) {
	if !strings.HasSuffix(req.URL.Path, "/invocations") {
		return h.base.Do(req)
	}
	h.mu.Lock()
	h.calls++
	n := h.calls
	failAt := h.failAt
	h.mu.Unlock()
	if failAt == 0 {
		failAt = 3
	}
	if n == failAt {
		body := `{"errorMessage":"the redrive function failed","errorType":"test"}`
		return &http.Response{StatusCode: 200, Status: "200 OK", Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1, Request: req,
			Header:        http.Header{"X-Amz-Function-Error": {"Unhandled"}, "Content-Type": {"application/json"}, "Content-Length": {strconv.Itoa(len(body))}},
			Body:          io.NopCloser(strings.NewReader(body)),
			ContentLength: int64(len(body))}, nil
	}
	resp, err := h.base.Do(req)
	if err != nil || n != 2 {
		return resp, err
	}
	raw, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	var rep map[string]any
	if err := json.Unmarshal(raw, &rep); err != nil {
		return nil, fmt.Errorf("the first run's report: %w", err)
	}
	rep["remaining"] = 1
	raw, _ = json.Marshal(rep)
	resp.Body, resp.ContentLength = io.NopCloser(bytes.NewReader(raw)), int64(len(raw))
	resp.Header.Set("Content-Length", strconv.Itoa(len(raw)))
	return resp, nil
}

// When an invocation of redrive --yes fails after another has run (and
// may have sent messages), the command still prints the totals so far
// (-o json: with the error, stopped StoppedInvocationError and the
// caveat that the failed one may have sent some too; table: the counts)
// and fails.
func TestRedriveStoppedByAFailedInvocationPrintsTheTotals(t *testing.T) {
	v := newInventory(t)
	v.startRedrive(t, v.sources)
	for i := range 3 {
		v.add(t, fmt.Sprintf("st-m%d", i), fmt.Sprintf(`{"event_id":"st-%d","ndc":"12345-678-90","lot":"L","quantity_delta":1,"schedule":"CII","facility":"F","occurred_at":"2026-11-29T09:00:00Z"}`, i))
	}
	run := func(args ...string) (string, string, int) {
		t.Helper()
		return runFailing(t, v, 0, args...)
	}

	out, errOut, code := run("redrive", "--source", v.source, "--class", "exhausted", "--max", "100", "--yes", "-o", "json")
	var doc struct {
		Redriven   struct{ Count int }
		RunIDs     []string `json:"run_ids"`
		RunID      string   `json:"run_id"`
		Stopped    string   `json:"stopped"`
		Error      string   `json:"error"`
		Unreported string   `json:"unreported"`
	}
	if code != 1 || json.Unmarshal([]byte(out), &doc) != nil {
		t.Fatalf("redrive --yes -o json, the second invocation failing (exit %d):\nstdout:\n%sstderr:\n%s", code, out, errOut)
	}
	if doc.Redriven.Count != 3 || len(doc.RunIDs) != 1 || doc.RunID != doc.RunIDs[0] || doc.Stopped != dlqctl.StoppedInvocationError || !strings.Contains(doc.Error, "the redrive function failed") ||
		!strings.Contains(errOut, "stopped: invocation 2 failed") || !strings.Contains(doc.Unreported, "invocation 2 may itself have sent messages") {
		t.Fatalf("redrive --yes -o json, the second invocation failing: %+v\nstdout:\n%sstderr:\n%s", doc, out, errOut)
	}

	for i := range 2 {
		v.add(t, fmt.Sprintf("st-n%d", i), fmt.Sprintf(`{"event_id":"st-n%d","ndc":"12345-678-90","lot":"L","quantity_delta":1,"schedule":"CII","facility":"F","occurred_at":"2026-11-29T09:00:00Z"}`, i))
	}
	out, errOut, code = run("redrive", "--source", v.source, "--class", "exhausted", "--yes")
	if code != 1 || !strings.Contains(out, "redriven 2, held 0, parked as poison 0, failed 0, skipped 0; remaining 1\n") || !strings.Contains(errOut, "the redrive function failed") {
		t.Fatalf("redrive --yes, the second invocation failing (exit %d):\nstdout:\n%sstderr:\n%s", code, out, errOut)
	}
}

// runFailing runs dlqctl against v with the redrive function's
// invocation failAt (see secondRunFails) answered with a function error.
func runFailing(t *testing.T, v *inventory, failAt int, args ...string) (string, string, int) {
	t.Helper()
	return runThrough(t, v, func(base aws.HTTPClient) aws.HTTPClient { return &secondRunFails{base: base, failAt: failAt} }, args...)
}

// runThrough runs dlqctl against v with its Lambda calls going through the
// client wrap makes of the stack's.
func runThrough(t *testing.T, v *inventory, wrap func(aws.HTTPClient) aws.HTTPClient, args ...string) (string, string, int) {
	t.Helper()
	cfg := v.st.AWS.Copy()
	base := cfg.HTTPClient
	if base == nil {
		base = http.DefaultClient
	}
	cfg.HTTPClient = wrap(base)
	a, out, errw := v.app("", time.Now)
	a.Connect = func(context.Context, string, string) (*dlqctl.Clients, error) {
		return &dlqctl.Clients{Clients: v.st.Clients, Lambda: lambda.NewFromConfig(cfg),
			CloudFormation: cloudformation.NewFromConfig(v.st.AWS), STS: sts.NewFromConfig(v.st.AWS), Local: true}, nil
	}
	base2 := []string{"--table", v.st.Names["QuarantineTable"], "--payload-bucket", v.st.Names["PayloadBucket"], "--actor", "alice", "--function", v.function}
	code := a.Main(context.Background(), append(base2, args...))
	return out.String(), errw.String(), code
}

// When the FIRST invocation of redrive --yes fails, the command still
// prints its document (no totals, no run ids) with the stop and the
// caveat that the failed invocation may itself have sent messages, on
// stdout and on stderr, and fails.
func TestRedriveFirstInvocationFailingStillPrintsTheDocument(t *testing.T) {
	v := newInventory(t)
	v.startRedrive(t, v.sources)
	for i := range 2 {
		v.add(t, fmt.Sprintf("sf-m%d", i), fmt.Sprintf(`{"event_id":"sf-%d","ndc":"12345-678-90","lot":"L","quantity_delta":1,"schedule":"CII","facility":"F","occurred_at":"2026-11-29T09:00:00Z"}`, i))
	}
	out, errOut, code := runFailing(t, v, 2, "redrive", "--source", v.source, "--class", "exhausted", "--yes", "-o", "json")
	var doc struct {
		Redriven   struct{ Count int }
		RunIDs     []string `json:"run_ids"`
		Stopped    string   `json:"stopped"`
		Error      string   `json:"error"`
		Unreported string   `json:"unreported"`
	}
	if code != 1 || json.Unmarshal([]byte(out), &doc) != nil {
		t.Fatalf("redrive --yes -o json, the first invocation failing (exit %d):\nstdout:\n%sstderr:\n%s", code, out, errOut)
	}
	if doc.Redriven.Count != 0 || doc.RunIDs == nil || len(doc.RunIDs) != 0 || doc.Stopped != dlqctl.StoppedInvocationError ||
		!strings.Contains(doc.Error, "the redrive function failed") || !strings.Contains(doc.Unreported, "invocation 1 may itself have sent messages") ||
		!strings.Contains(errOut, "stopped: invocation 1 failed") || !strings.Contains(errOut, "warning: invocation 1 may itself have sent messages") {
		t.Fatalf("redrive --yes -o json, the first invocation failing: %+v\nstdout:\n%sstderr:\n%s", doc, out, errOut)
	}
	out, errOut, code = runFailing(t, v, 2, "redrive", "--source", v.source, "--class", "exhausted", "--yes")
	if code != 1 || !strings.Contains(out, "redriven 0, held 0, parked as poison 0, failed 0, skipped 0; remaining 0\n") || !strings.Contains(errOut, "may itself have sent messages") {
		t.Fatalf("redrive --yes, the first invocation failing (exit %d):\nstdout:\n%sstderr:\n%s", code, out, errOut)
	}
}

package capacity

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/dlqquarantine/dlqq/shared/dev/embedded"
	"github.com/dlqquarantine/dlqq/shared/dev/latency"
	"github.com/dlqquarantine/dlqq/shared/dev/localrunner"
	"github.com/dlqquarantine/dlqq/shared/runtime/awsclients"
	"github.com/dlqquarantine/dlqq/shared/usecase/redrive"
	"github.com/dlqquarantine/dlqq/shared/wire"
)

// LifecycleParams are the template parameters a lifecycle run deploys
// with: the demo's short settle window (seconds, not half an hour),
// resolved records archived at once, and no approval below a run's
// 10,000 records (an approval is a few writes per run, not per message).
var LifecycleParams = map[string]any{
	"MaxReceiveCount":                3,
	"SourceVisibilityTimeoutSeconds": 2,
	"DLQVisibilityTimeoutSeconds":    2,
	"SettleWindowSeconds":            7,
	"SettleMarginSeconds":            1,
	"ResolvedAgeSeconds":             0,
	"ApprovalThreshold":              10000,
}

// Phase is what one function did in a lifecycle run: its invocations,
// their time in the handler (under the latency model, CPU included), its
// memory setting, its requests by operation, and the DynamoDB units it
// consumed (writes priced by Layout.Price, reads by Reads).
type Phase struct {
	Function    string
	MemoryMB    int
	Invocations int
	Duration    time.Duration
	Calls       Snapshot
	WriteUnits  int
	ReadUnits   float64
}

// GBSeconds is the phase's Lambda compute, billed by the millisecond.
func (p Phase) GBSeconds() float64 {
	return p.Duration.Seconds() * float64(p.MemoryMB) / 1024
}

// LifecycleResult is a lifecycle run.
type LifecycleResult struct {
	Messages  int
	BodyBytes int
	// Phases are ingest, redrive (replays), settle, sweeper and ledger
	// (the stream function on every record version of the others), in
	// that order; Digest and Metrics are one scheduled run each (a cost
	// per run, not per message).
	Phases          []Phase
	Digest, Metrics Phase
	// Unmodelled lists the calls the run made that latency.AWS, the model
	// every call waited, has no figure for (empty: none): they took no
	// modelled time, so the GB-s would be short.
	Unmodelled string
}

// Lifecycle takes n dead-lettered messages through their whole life on
// st (deployed with LifecycleParams): ingest in the mapping's batches,
// one replay of every record (redrive, as many invocations as it takes),
// settle after the window, the sweeper's archive, and the ledger on the
// stream after each step, every call through the latency model
// (latency.AWS) and metered. Every record must end ARCHIVED.
func Lifecycle(ctx context.Context, st *embedded.Stack, n int, progress io.Writer) (*LifecycleResult, error) {
	if progress == nil {
		progress = io.Discard
	}
	table := st.Names["QuarantineTable"]
	layout, err := LayoutFromTemplate(st.Template, "QuarantineTable")
	if err != nil {
		return nil, err
	}
	rec := NewRecorder(layout, table, st.Clients.DynamoDB)
	reads := &Reads{Full: st.Clients.DynamoDB, Keys: []string{layout.Hash}}
	if layout.Range != "" {
		reads.Keys = append(reads.Keys, layout.Range)
	}
	calls := NewCalls(latency.AWS.Client(st.AWS.HTTPClient, 1), latency.Model{})
	cfg := st.AWS.Copy()
	cfg.APIOptions = append(cfg.APIOptions, rec.APIOption, reads.APIOption)
	clients := awsclients.New(cfg, awsclients.Options{Local: true, HTTPClient: calls})
	log := slog.New(slog.NewJSONHandler(io.Discard, nil))
	fns, err := localrunner.NewFunctions(st, clients, log, io.Discard)
	if err != nil {
		return nil, err
	}
	res := &LifecycleResult{Messages: n}
	// measure runs f as one phase of function id, metered apart.
	measure := func(id string, f func(invoke func(func() error) error) error) (Phase, error) {
		mb, err := MemoryMB(st, id)
		if err != nil {
			return Phase{}, err
		}
		p := Phase{Function: id, MemoryMB: mb}
		w0, c0 := rec.Len(), calls.Snapshot()
		r0 := reads.Units()
		err = f(func(call func() error) error {
			t0 := time.Now()
			err := call()
			p.Invocations++
			p.Duration += time.Since(t0)
			return err
		})
		p.Calls = calls.Snapshot().Sub(c0)
		for _, w := range rec.Writes(w0) {
			p.WriteUnits += w.Units
		}
		r1 := reads.Units()
		p.ReadUnits = r1 - r0
		return p, err
	}

	ledgerSvc, err := fns.NewLedger(clients, io.Discard)
	if err != nil {
		return nil, err
	}
	poller := fns.LedgerPoller(st.Clients, ledgerSvc.HandleStream)
	if _, err := poller.Drain(ctx); err != nil { // what the stack's creation left
		return nil, err
	}
	ledger := Phase{Function: "LedgerFunction"}
	drain := func() error {
		p, err := measure("LedgerFunction", func(invoke func(func() error) error) error {
			poller.Handler = func(ctx context.Context, ev events.DynamoDBTimeWindowEvent) (resp events.DynamoDBTimeWindowEventResponse, err error) {
				err = invoke(func() error {
					resp, err = ledgerSvc.HandleStream(ctx, ev)
					return err
				})
				return resp, err
			}
			_, err := poller.Drain(ctx)
			return err
		})
		ledger = p.add(ledger)
		return err
	}

	// Ingest: the mapping's batches of the example source's messages.
	src := &source{name: fns.Source, arn: fns.IngestConfig.Sources[fns.Source].ARN,
		dlqARN: fmt.Sprintf("arn:aws:sqs:%s:%s:%s", st.AWS.Region, embedded.Account, st.Names["DeadLetterQueue"])}
	h, err := wire.Ingest(ctx, fns.IngestConfig, wire.From(clients), wire.Runtime{Log: log, Metrics: io.Discard})
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(progress, "lifecycle: %d messages, ingest …\n", n)
	p, err := measure("IngestFunction", func(invoke func(func() error) error) error {
		for from := 0; from < n; from += fns.Mapping.BatchSize {
			var ev events.SQSEvent
			for i := from; i < min(from+fns.Mapping.BatchSize, n); i++ {
				m := message(src, i, false, 1)
				res.BodyBytes += len(m.Body)
				ev.Records = append(ev.Records, m)
			}
			if err := invoke(func() error {
				resp, err := h.Handle(ctx, ev)
				if err == nil && len(resp.BatchItemFailures) > 0 {
					err = fmt.Errorf("ingest: %d batch item failures", len(resp.BatchItemFailures))
				}
				return err
			}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	res.BodyBytes /= max(n, 1)
	res.Phases = append(res.Phases, p)
	if err := drain(); err != nil {
		return nil, err
	}

	// Redrive: every record replayed once, in as many runs as it takes.
	fmt.Fprintln(progress, "lifecycle: redrive …")
	run := func(req redrive.Request, count func(*redrive.Report) int) func() (int, error) {
		return func() (int, error) {
			rep, err := fns.Redrive.Run(ctx, req)
			if err != nil {
				return 0, err
			}
			return count(rep), nil
		}
	}
	var sent int
	p, err = measure("RedriveFunction", until(n, &sent, run(redrive.Request{Source: fns.Source, MaxMessages: redrive.MaxMaxMessages, RequestedBy: "lifecycle"},
		func(rep *redrive.Report) int { return rep.Redriven.Count })))
	if err != nil {
		return nil, err
	}
	if sent != n {
		return nil, fmt.Errorf("redrive replayed %d of %d records", sent, n)
	}
	res.Phases = append(res.Phases, p)
	if err := drain(); err != nil {
		return nil, err
	}

	// Settle: past the window, every replay that stayed away resolves.
	fmt.Fprintf(progress, "lifecycle: settle after %s …\n", fns.Settle)
	time.Sleep(fns.Settle + time.Second)
	var settled int
	p, err = measure("RedriveFunction", until(n, &settled, run(redrive.Request{Action: redrive.ActionSettle, Source: fns.Source, RequestedBy: "schedule:settle"},
		func(rep *redrive.Report) int { return rep.Settled.Count })))
	if err != nil {
		return nil, err
	}
	if settled != n {
		return nil, fmt.Errorf("settle resolved %d of %d records", settled, n)
	}
	p.Function = "RedriveFunction (settle)"
	res.Phases = append(res.Phases, p)
	if err := drain(); err != nil {
		return nil, err
	}

	// Sweeper: every resolved record archived.
	fmt.Fprintln(progress, "lifecycle: sweeper …")
	var archived int
	p, err = measure("SweeperFunction", until(n, &archived, func() (int, error) {
		rep, err := fns.Sweeper.Run(ctx)
		if rep == nil {
			return 0, err
		}
		return len(rep.Archived), err
	}))
	if err != nil {
		return nil, err
	}
	if archived != n {
		return nil, fmt.Errorf("the sweeper archived %d of %d records", archived, n)
	}
	res.Phases = append(res.Phases, p)
	if err := drain(); err != nil {
		return nil, err
	}
	res.Phases = append(res.Phases, ledger)

	// One scheduled run each of the digest and the metrics functions.
	if res.Digest, err = measure("DigestFunction", func(invoke func(func() error) error) error {
		return invoke(func() error { _, err := ledgerSvc.Digest(ctx); return err })
	}); err != nil {
		return nil, err
	}
	if res.Metrics, err = measure("MetricsFunction", func(invoke func(func() error) error) error {
		return invoke(func() error { _, err := fns.Metrics.Run(ctx); return err })
	}); err != nil {
		return nil, err
	}
	res.Unmodelled = calls.Unmodelled(latency.AWS)
	return res, nil
}

// until invokes once, each call one invocation, until the records it
// counts (into *total) reach n or a call counts none (at most 100 calls).
func until(n int, total *int, once func() (int, error)) func(invoke func(func() error) error) error {
	return func(invoke func(func() error) error) error {
		for range 100 {
			var got int
			if err := invoke(func() error {
				var err error
				got, err = once()
				return err
			}); err != nil {
				return err
			}
			if *total += got; *total >= n || got == 0 {
				return nil
			}
		}
		return nil
	}
}

// add sums two phases of the same function.
func (p Phase) add(q Phase) Phase {
	ops := maps.Clone(q.Calls.Ops)
	if ops == nil {
		ops = map[string]int{}
	}
	for k, v := range p.Calls.Ops {
		ops[k] += v
	}
	mb := max(p.MemoryMB, q.MemoryMB)
	return Phase{Function: p.Function, MemoryMB: mb, Invocations: p.Invocations + q.Invocations, Duration: p.Duration + q.Duration,
		Calls: Snapshot{Ops: ops, S3PutBytes: p.Calls.S3PutBytes + q.Calls.S3PutBytes}, WriteUnits: p.WriteUnits + q.WriteUnits, ReadUnits: p.ReadUnits + q.ReadUnits}
}

// PerMillion is the lifecycle's cost per million dead-lettered messages:
// each figure of every phase times a million over the messages.
type PerMillion struct {
	GBSeconds, Invocations, WriteUnits, ReadUnits float64
	// S3 and KMS requests, by operation; S3Tier1 the PUT, COPY, POST and
	// LIST requests, S3Tier2 the GET and others (S3's two request prices).
	S3, KMS          map[string]float64
	S3Tier1, S3Tier2 float64
	SQS              map[string]float64
	// KMSRequests and SQSRequests are the sums of KMS and SQS.
	KMSRequests, SQSRequests float64
	Dollars                  float64
}

// PerMillion totals the phases (not the digest and metrics runs: those are
// per schedule, whatever the traffic).
func (r *LifecycleResult) PerMillion() PerMillion {
	scale := 1e6 / float64(max(r.Messages, 1))
	out := PerMillion{S3: map[string]float64{}, KMS: map[string]float64{}, SQS: map[string]float64{}}
	for _, p := range r.Phases {
		out.GBSeconds += p.GBSeconds() * scale
		out.Invocations += float64(p.Invocations) * scale
		out.WriteUnits += float64(p.WriteUnits) * scale
		out.ReadUnits += p.ReadUnits * scale
		for op, k := range p.Calls.Ops {
			svc, name, _ := strings.Cut(op, " ")
			switch svc {
			case "s3":
				out.S3[name] += float64(k) * scale
				switch {
				case s3Tier1[name]:
					out.S3Tier1 += float64(k) * scale
				case !s3Free[name]:
					out.S3Tier2 += float64(k) * scale
				}
			case "kms":
				out.KMS[name] += float64(k) * scale
			case "sqs":
				out.SQS[name] += float64(k) * scale
			}
		}
	}
	// The ingest mapping's own SQS requests, billed to the account: one
	// ReceiveMessage and one DeleteMessageBatch per batch it delivers
	// (Lambda's pollers; not seen by the function's clients).
	for _, p := range r.Phases {
		if p.Function == "IngestFunction" {
			out.SQS["ReceiveMessage+DeleteMessageBatch (the mapping's)"] += 2 * float64(p.Invocations) * scale
		}
	}
	for _, v := range out.KMS {
		out.KMSRequests += v
	}
	for _, v := range out.SQS {
		out.SQSRequests += v
	}
	out.Dollars = out.GBSeconds*pricePerGBs + out.Invocations/1e6*pricePerMRequests + out.WriteUnits/1e6*pricePerMWRU + out.ReadUnits/1e6*pricePerMRRU +
		out.S3Tier1/1000*pricePerKS3Put + out.S3Tier2/1000*pricePerKS3Get + out.KMSRequests/10000*pricePer10KKMS + out.SQSRequests/1e6*pricePerMSQS
	return out
}

// s3Tier1 are the S3 operations priced as PUT, COPY, POST and LIST
// requests, s3Free those not charged (DELETE); the rest are priced as
// GETs (S3 pricing: "PUT, COPY, POST, LIST requests", "GET, SELECT, and
// all other requests"; "DELETE and CANCEL requests are free").
var (
	s3Tier1 = map[string]bool{"PutObject": true, "CopyObject": true, "CreateMultipartUpload": true, "UploadPart": true,
		"CompleteMultipartUpload": true, "ListObjectsV2": true, "ListObjects": true, "ListObjectVersions": true,
		"PutObjectRetention": true, "PutObjectLegalHold": true, "PutObjectTagging": true}
	s3Free = map[string]bool{"DeleteObject": true, "DeleteObjects": true}
)

// Lines are the per-million figures, one per line, sorted within a map.
func (m PerMillion) Lines() []string {
	list := func(xs map[string]float64) string {
		s := ""
		for _, k := range slices.Sorted(maps.Keys(xs)) {
			if s != "" {
				s += ", "
			}
			s += fmt.Sprintf("%s %.0f", k, xs[k])
		}
		return s
	}
	return []string{
		fmt.Sprintf("Lambda: %.0f invocations, %.0f GB-s", m.Invocations, m.GBSeconds),
		fmt.Sprintf("DynamoDB: %.0f write units, %.0f read units", m.WriteUnits, m.ReadUnits),
		fmt.Sprintf("S3: %.0f PUT/LIST-priced, %.0f GET-priced (%s)", m.S3Tier1, m.S3Tier2, list(m.S3)),
		fmt.Sprintf("KMS: %s", list(m.KMS)),
		fmt.Sprintf("SQS: %s", list(m.SQS)),
		fmt.Sprintf("total: $%.2f per million messages (us-east-1 list prices)", m.Dollars),
	}
}

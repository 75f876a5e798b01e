package redrive_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
	"github.com/dlqquarantine/dlqq/shared/usecase/redrive"
)

// redrivenAt makes the source queue dead-letter after maxReceiveCount
// receives with the given visibility timeout, and replays one record.
func redrivenAt(t *testing.T, e *env, svc *redrive.Service, maxReceiveCount, visibility string) string {
	t.Helper()
	ctx := context.Background()
	_, err := stack.Clients.SQS.SetQueueAttributes(ctx, &sqs.SetQueueAttributesInput{QueueUrl: aws.String(e.srcURL), Attributes: map[string]string{
		"RedrivePolicy":     `{"deadLetterTargetArn":"arn:aws:sqs:us-east-1:000000000000:` + e.src.DLQName + `","maxReceiveCount":` + maxReceiveCount + `}`,
		"VisibilityTimeout": visibility,
	}})
	if err != nil {
		t.Fatal(err)
	}
	ids := e.seed(t, 1, none)
	rep, err := svc.Run(ctx, e.request(10))
	if err != nil || rep.Redriven.Count != 1 {
		t.Fatalf("redrive: %+v %v", rep, err)
	}
	e.drain(t, none)
	return ids[0]
}

func settleRun(t *testing.T, e *env, svc *redrive.Service) *redrive.Report {
	t.Helper()
	rep, err := svc.Run(context.Background(), redrive.Request{Action: redrive.ActionSettle, Source: e.src.Name, RequestedBy: "schedule:settle"})
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// A configured window shorter than the source queue can take to return a
// failing replay (maxReceiveCount × visibility timeout, plus the ingest
// margin) is not used: the record is settled only after the longer window.
func TestSettleWindowCoversTheSourceQueuesRedelivery(t *testing.T) {
	e := newEnv(t, false)
	svc := e.service(nil, nil, redrive.Config{SettleWindow: 900 * time.Second})
	id := redrivenAt(t, e, svc, "5", "180")
	effective := 5*180*time.Second + redrive.DefaultSettleMargin

	e.clock.Advance(901 * time.Second)
	rep := settleRun(t, e, svc)
	if rep.Settled.Count != 0 || e.get(t, id).Status != quarantine.StatusRedriven {
		t.Fatalf("settled after 901 s: %+v; a failing replay needs 5 × 180 s to come back", rep.Settled)
	}
	if got := time.Duration(rep.SettleWindowSeconds) * time.Second; got != effective {
		t.Fatalf("report says the window was %s, want %s", got, effective)
	}
	e.clock.Advance(effective + time.Second - 901*time.Second)
	rep = settleRun(t, e, svc)
	r := e.get(t, id)
	if rep.Settled.Count != 1 || r.Status != quarantine.StatusResolved {
		t.Fatalf("not settled after the effective window + 1 s: %+v, %s", rep.Settled, r.Status)
	}
	if why := r.Attempts[len(r.Attempts)-1].Reason; !strings.Contains(why, effective.String()) {
		t.Fatalf("settle reason %q does not name the window %s", why, effective)
	}
}

// A configured window longer than the derived minimum is kept.
func TestSettleWindowNeverShorterThanConfigured(t *testing.T) {
	e := newEnv(t, false)
	svc := e.service(nil, nil, redrive.Config{SettleWindow: time.Hour, SettleMargin: time.Minute})
	id := redrivenAt(t, e, svc, "2", "30")
	e.clock.Advance(time.Hour - time.Second)
	if rep := settleRun(t, e, svc); rep.Settled.Count != 0 || rep.SettleWindowSeconds != 3600 {
		t.Fatalf("settled before the configured hour: %+v", rep)
	}
	e.clock.Advance(2 * time.Second)
	if rep := settleRun(t, e, svc); rep.Settled.Count != 1 || e.get(t, id).Status != quarantine.StatusResolved {
		t.Fatalf("not settled after the configured hour: %+v", rep)
	}
}

// When the source queue's attributes cannot be read, nothing is settled
// (never earlier than a replay can come back): a settle run fails, and a
// redrive run replays but says it did not settle.
func TestSettleSkippedWhenTheQueueCannotBeRead(t *testing.T) {
	e := newEnv(t, false)
	id := redrivenAt(t, e, e.service(nil, nil, redrive.Config{}), "2", "30")
	e.clock.Advance(48 * time.Hour)
	svc := e.service(noAttributes{stack.Clients.SQS}, nil, redrive.Config{SettleWindow: time.Minute})
	if _, err := svc.Run(context.Background(), redrive.Request{Action: redrive.ActionSettle, Source: e.src.Name, RequestedBy: "schedule:settle"}); err == nil {
		t.Fatal("a settle run that could not check its window succeeded")
	}
	rep, err := svc.Run(context.Background(), e.request(10))
	if err != nil || rep.Settled.Count != 0 || rep.SettleSkipped == "" {
		t.Fatalf("redrive run: %+v %v; want nothing settled and the reason reported", rep, err)
	}
	if st := e.get(t, id).Status; st != quarantine.StatusRedriven {
		t.Fatalf("status %s, want REDRIVEN", st)
	}
}

func TestMinSettleWindow(t *testing.T) {
	for _, c := range []struct {
		attrs map[string]string
		want  time.Duration
		ok    bool
	}{
		{map[string]string{"VisibilityTimeout": "180", "RedrivePolicy": `{"deadLetterTargetArn":"arn:x","maxReceiveCount":5}`}, 900*time.Second + time.Minute, true},
		{map[string]string{"VisibilityTimeout": "180", "RedrivePolicy": `{"deadLetterTargetArn":"arn:x","maxReceiveCount":"5"}`}, 900*time.Second + time.Minute, true},
		{map[string]string{"VisibilityTimeout": "30"}, 30*time.Second + time.Minute, true},
		{map[string]string{"VisibilityTimeout": "30", "DelaySeconds": "15", "RedrivePolicy": `{"maxReceiveCount":2}`}, 75*time.Second + time.Minute, true},
		{map[string]string{"VisibilityTimeout": "30", "DelaySeconds": "-1"}, 0, false},
		{map[string]string{"RedrivePolicy": `{"maxReceiveCount":5}`}, 0, false},
		{map[string]string{"VisibilityTimeout": "x"}, 0, false},
		{map[string]string{"VisibilityTimeout": "30", "RedrivePolicy": `{"maxReceiveCount":0}`}, 0, false},
		{map[string]string{"VisibilityTimeout": "30", "RedrivePolicy": `not json`}, 0, false},
	} {
		got, err := redrive.MinSettleWindow(c.attrs, time.Minute)
		if (err == nil) != c.ok || got != c.want {
			t.Errorf("%v: %s, %v; want %s (ok %v)", c.attrs, got, err, c.want, c.ok)
		}
	}
}

// The settle margin is never less than the ingest lag the template's DLQ
// visibility timeout and ingest timeout imply, whatever
// SETTLE_MARGIN_SECONDS says: at the template's extremes (a 43,200 s
// visibility timeout) a margin of 600 s would resolve a replay hours
// before its comeback could reach its record.
func TestSettleMarginCoversTheIngestLag(t *testing.T) {
	src := `{"src":{"arn":"arn:aws:sqs:us-east-1:000000000000:src","dlq":"dlq","idempotency_pointer":"/id","schema":"inventory-movement.v1"}}`
	for _, c := range []struct {
		name                 string
		margin, timeout, vis string
		want                 time.Duration
	}{
		{"defaults: the margin is longer", "600", "30", "180", 600 * time.Second},
		{"long visibility: the lag is longer", "600", "120", "43200", time.Second + 120*time.Second + 2*43200*time.Second},
		{"neither timeout given: the margin alone", "600", "", "", 600 * time.Second},
		{"one timeout given: the margin alone", "5", "30", "", 5 * time.Second},
	} {
		t.Run(c.name, func(t *testing.T) {
			env := map[string]string{"TABLE_NAME": "t", "SOURCES": src, "SETTLE_MARGIN_SECONDS": c.margin,
				"INGEST_TIMEOUT_SECONDS": c.timeout, "DLQ_VISIBILITY_SECONDS": c.vis}
			cfg, err := redrive.ConfigFromEnv(func(k string) string { return env[k] })
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Service.SettleMargin != c.want {
				t.Fatalf("settle margin %s, want %s", cfg.Service.SettleMargin, c.want)
			}
		})
	}
	env := map[string]string{"TABLE_NAME": "t", "SOURCES": src, "DLQ_VISIBILITY_SECONDS": "soon"}
	if _, err := redrive.ConfigFromEnv(func(k string) string { return env[k] }); err == nil || !strings.Contains(err.Error(), "DLQ_VISIBILITY_SECONDS") {
		t.Fatalf("a bad DLQ_VISIBILITY_SECONDS was taken: %v", err)
	}
}

// A source's own settle window (settle_window_seconds: a consumer that
// takes hours to fail a message) outlasts the function's: a replay into
// that source's queue settles only after it.
func TestASourcesSettleWindowOutlastsTheFunctions(t *testing.T) {
	e := newEnv(t, false)
	e.src.SettleWindow = 3 * time.Hour
	svc := e.service(nil, nil, redrive.Config{SettleWindow: time.Hour, SettleMargin: time.Minute})
	id := redrivenAt(t, e, svc, "2", "30")
	e.clock.Advance(3*time.Hour - time.Second)
	if rep := settleRun(t, e, svc); rep.Settled.Count != 0 || rep.SettleWindowSeconds != 3*3600 {
		t.Fatalf("settled before the source's 3 hours: %+v", rep)
	}
	e.clock.Advance(2 * time.Second)
	if rep := settleRun(t, e, svc); rep.Settled.Count != 1 || e.get(t, id).Status != quarantine.StatusResolved {
		t.Fatalf("not settled after the source's 3 hours: %+v", rep)
	}
}

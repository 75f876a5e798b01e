package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"io"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/dlqquarantine/dlqq/shared/dev/embedded"
	"github.com/dlqquarantine/dlqq/shared/dev/localrunner"
	"github.com/dlqquarantine/dlqq/shared/dev/template"
	"github.com/dlqquarantine/dlqq/shared/runtime/awsclients"
	"github.com/dlqquarantine/dlqq/shared/usecase/redrive"
	"github.com/dlqquarantine/dlqq/shared/usecase/sweeper"
)

func parseExtras(t *testing.T, args ...string) (*localExtras, error) {
	t.Helper()
	fs := flag.NewFlagSet("local", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	x := addLocalExtras(fs)
	return x, fs.Parse(args)
}

// stackFor is a stack value with the resolved template and names, no emulator.
func stackFor(t *testing.T, params map[string]any) *embedded.Stack {
	t.Helper()
	tpl, err := template.Open(template.Path(), template.Env{StackName: "dlqq", Region: embedded.Region, Account: embedded.Account, Endpoint: "http://127.0.0.1:1", Params: params})
	if err != nil {
		t.Fatal(err)
	}
	embedded.TakeTheSettleMarginAsGiven(tpl, params) // as embedded.Start does
	q, err := tpl.GetSQSQueueWithName("SourceQueue")
	if err != nil {
		t.Fatal(err)
	}
	return &embedded.Stack{Template: tpl, Names: map[string]string{"SourceQueue": aws.ToString(q.QueueName)}, QueueURLs: map[string]string{"SourceQueue": "http://127.0.0.1:1/000000000000/" + aws.ToString(q.QueueName)}}
}

func TestAgeFlagsRefuseWhatIsNotAPositiveAge(t *testing.T) {
	for _, tc := range []struct{ args, want string }{
		{"-park-age -1m", "-1m is not positive"},
		{"-park-age 0s", "0s is not positive"},
		{"-resolved-age soon", `"soon" is not a duration (write it as 90s, 2m or 1h30m)`},
		{"-resolved-age 1500ms", "1500ms is not a whole number of seconds"},
		{"-sweep-every 90s", "90s is not a whole number of minutes"},
		// The redrive function takes whole positive seconds.
		{"-settle-window 0s", "0s is not positive"},
		{"-settle-window 20.5s", "20.5s is not a whole number of seconds"},
		{"-settle-margin -5s", "-5s is not positive"},
		{"-settle-margin 5", `"5" is not a duration`},
		{"-source-visibility 500ms", "500ms is not a whole number of seconds"},
		{"-source-visibility 12h1s", "12h1s is longer than 12h0m0s"},
	} {
		_, err := parseExtras(t, strings.Fields(tc.args)...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want %q", tc.args, err, tc.want)
		}
	}
}

func TestPrepareRefusesABadConsumer(t *testing.T) {
	for _, tc := range []struct{ args, want string }{
		{"-consumer sometimes", `-consumer: consumer mode "sometimes": want one of off, fail, flaky, validate`},
		{"-consumer flaky -flaky-rate 1.5", "-flaky-rate 1.5 is outside 0..1"},
	} {
		x, err := parseExtras(t, strings.Fields(tc.args)...)
		if err != nil {
			t.Fatal(err)
		}
		if err := x.prepare(); err == nil || err.Error() != tc.want {
			t.Errorf("%s: got %v, want %q", tc.args, err, tc.want)
		}
	}
	x, err := parseExtras(t, "-consumer", "fail")
	if err != nil || x.prepare() != nil { // no -data: no re-exec
		t.Fatalf("parse %v, prepare %v", err, x.prepare())
	}
}

// The ages become the sweeper function's environment, and the sweeper's
// configuration read from that environment has them.
func TestSweeperAgesOverrideTheSweepersEnvironment(t *testing.T) {
	x, err := parseExtras(t, "-park-age", "2m", "-resolved-age", "1m")
	if err != nil {
		t.Fatal(err)
	}
	env := x.functionEnv()
	want := map[string]map[string]string{"SweeperFunction": {"PARK_AGE_SECONDS": "120", "RESOLVED_AGE_SECONDS": "60"}}
	if !reflect.DeepEqual(env, want) {
		t.Fatalf("functionEnv = %v, want %v", env, want)
	}
	st := stackFor(t, nil)
	if err := applyFunctionEnv(st.Template, env); err != nil {
		t.Fatal(err)
	}
	fn, err := st.Template.GetServerlessFunctionWithName("SweeperFunction")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := sweeper.ConfigFromEnv(func(k string) string { return fn.Environment.Variables[k] })
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Sweeper.ParkAge != 2*time.Minute || cfg.Sweeper.ResolvedAge != time.Minute {
		t.Fatalf("sweeper ages %s, %s", cfg.Sweeper.ParkAge, cfg.Sweeper.ResolvedAge)
	}

	none, _ := parseExtras(t)
	if env := none.functionEnv(); len(env) != 0 {
		t.Fatalf("no flags: functionEnv = %v", env)
	}
	if err := applyFunctionEnv(st.Template, map[string]map[string]string{"NoSuchFunction": {"A": "b"}}); err == nil {
		t.Fatal("an unknown function was accepted")
	}
}

// -sweep-every becomes the template's SweepSchedule, so the schedules read
// from the template run the sweeper that often; -data becomes DataDir.
func TestSweepEveryAndDataSetTheStackOptions(t *testing.T) {
	x, err := parseExtras(t, "-sweep-every", "2m", "-data", "/tmp/somewhere")
	if err != nil {
		t.Fatal(err)
	}
	o := x.stackOptions(embedded.Options{StackName: "dlqq", Params: map[string]any{"MaxReceiveCount": 3}})
	if o.DataDir != "/tmp/somewhere" || o.Params["SweepSchedule"] != "rate(2 minutes)" || o.Params["MaxReceiveCount"] != 3 {
		t.Fatalf("options %+v", o)
	}
	schedules, err := localrunner.SchedulesFromTemplate(stackFor(t, o.Params).Template)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, s := range schedules {
		if s.Rule == "SweeperSchedule" {
			found = s.Every == 2*time.Minute
		}
	}
	if !found {
		t.Fatalf("schedules %+v: no sweeper every 2m", schedules)
	}
	if got := rate(time.Minute); got != "rate(1 minute)" {
		t.Fatalf("rate(1m) = %q", got)
	}
}

// -settle-window, -settle-margin and -source-visibility become the
// template's parameters, so the redrive function's configuration read from
// its environment has them, and the window it settles with is the longer
// of the settle window and the source queue's bound.
func TestSettleFlagsSetTheRedriveFunctionsConfig(t *testing.T) {
	for _, tc := range []struct {
		args                     []string
		window, margin, settleAt time.Duration
	}{
		{[]string{"-settle-window", "20s", "-settle-margin", "5s", "-source-visibility", "2s"}, 20 * time.Second, 5 * time.Second, 20 * time.Second},
		// Shorter than 5 receives x 2 s + 5 s: the function waits 15 s.
		{[]string{"-settle-window", "5s", "-settle-margin", "5s", "-source-visibility", "2s"}, 5 * time.Second, 5 * time.Second, 15 * time.Second},
		// The template's visibility (180 s) and margin (10 minutes).
		{[]string{"-settle-window", "1m"}, time.Minute, 10 * time.Minute, 5*180*time.Second + 10*time.Minute},
	} {
		x, err := parseExtras(t, tc.args...)
		if err != nil {
			t.Fatal(err)
		}
		if err := x.prepare(); err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		st := stackFor(t, x.stackOptions(embedded.Options{}).Params)
		env, err := functionEnvironment(st.Template, "RedriveFunction")
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := redrive.ConfigFromEnv(func(k string) string { return env[k] })
		if err != nil {
			t.Fatal(err)
		}
		if cfg.Service.SettleWindow != tc.window || cfg.Service.SettleMargin != tc.margin {
			t.Errorf("%v: window %s, margin %s; want %s, %s", tc.args, cfg.Service.SettleWindow, cfg.Service.SettleMargin, tc.window, tc.margin)
		}
		q, err := sourceQueueOf(st)
		if err != nil {
			t.Fatal(err)
		}
		if got, _, _, err := settleWindow(st, q); err != nil || got != tc.settleAt {
			t.Errorf("%v: settles after %s (%v), want %s", tc.args, got, err, tc.settleAt)
		}
	}
	none, _ := parseExtras(t)
	if p := none.stackOptions(embedded.Options{}).Params; len(p) != 0 {
		t.Fatalf("no flags: params %v", p)
	}
}

// The check before the start is the redrive function's own: what its
// configuration refuses, dlqlocal refuses, naming the variable.
func TestCheckRedriveConfigIsTheFunctionsCheck(t *testing.T) {
	if err := checkRedriveConfig(map[string]any{"SettleWindowSeconds": 20, "SettleMarginSeconds": 5}); err != nil {
		t.Fatal(err)
	}
	err := checkRedriveConfig(map[string]any{"SettleWindowSeconds": -1, "SettleMarginSeconds": "soon"})
	for _, want := range []string{"the redrive function would refuse its configuration", `SETTLE_WINDOW_SECONDS="-1" is not a positive number of seconds`, `SETTLE_MARGIN_SECONDS="soon"`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("got %v, want %q", err, want)
		}
	}
}

// -consumer validate accepts what passes the source's schema and rejects
// the rest, with a reason that does not quote the body.
func TestValidateConsumerUsesTheSourcesGate(t *testing.T) {
	st := stackFor(t, nil)
	check, schema, err := sourceCheck(st)
	if err != nil {
		t.Fatal(err)
	}
	if schema != "inventory-movement.v1" {
		t.Fatalf("schema %q", schema)
	}
	raw, err := os.ReadFile("../../events/ingest-dlq-batch.json")
	if err != nil {
		t.Fatal(err)
	}
	var batch struct{ Records []struct{ Body string } }
	if err := json.Unmarshal(raw, &batch); err != nil {
		t.Fatal(err)
	}
	if ok, reason := check([]byte(batch.Records[0].Body)); !ok {
		t.Fatalf("the sample's valid body was rejected: %s", reason)
	}
	for _, body := range []string{`{"event_id":"secret-x"}`, "not json", batch.Records[1].Body} {
		ok, reason := check([]byte(body))
		if ok || reason == "" || strings.Contains(reason, "secret-x") || strings.Contains(reason, "409-4888") {
			t.Errorf("%s: ok %v, reason %q", body, ok, reason)
		}
	}
	x, _ := parseExtras(t, "-consumer", "validate")
	st.Clients = &awsclients.Clients{SQS: sqs.New(sqs.Options{Region: embedded.Region})}
	c, err := x.newConsumer(st, nil)
	if err != nil || c.Mode != localrunner.ConsumerValidate || c.Accept == nil || c.QueueURL != st.QueueURLs["SourceQueue"] {
		t.Fatalf("validate consumer %+v, %v", c, err)
	}
	if ok, _ := c.Accept([]byte("not json")); ok {
		t.Fatal("the consumer's Accept is not the source's gate")
	}
	// Any mode follows the queue's tag, and can switch to validate.
	x, _ = parseExtras(t, "-consumer", "fail")
	if c, err = x.newConsumer(st, nil); err != nil || c.ModeTag != consumerTag || c.Accept == nil {
		t.Fatalf("fail consumer %+v, %v", c, err)
	}
}

// The banner says what each mode does, with the template's numbers, and
// whether state survives.
func TestBannerSaysWhatTheExtrasDo(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{nil, []string{"state: in a temporary directory, lost on stop (-data DIR keeps it)", "consumer: off. Nothing consumes dlqq-source", "after 4 receives (each hides it for 180 s"}},
		{[]string{"-consumer", "fail", "-data", "/d"}, []string{"state: kept in /d", "written every 1s and on Ctrl-C", "Messages in flight (received and not deleted, released ones too until received again) are not kept: kumo snapshots only queued messages; a clean stop counts them on stderr", "released at once (visibility 0)", "after 4 receives, within seconds (not 4 x 180 s)"}},
		{[]string{"-consumer", "flaky", "-flaky-rate", "0.25"}, []string{"consumer: flaky. 25% of deliveries", "rejected 4 times in a row"}},
		{[]string{"-consumer", "validate"}, []string{"pass the source's gate (inventory-movement.v1)"}},
		{[]string{"-park-age", "2m", "-sweep-every", "1m"}, []string{"sweeper (local ages): archives PARKED records after 2m0s and RESOLVED records after 7 days (template), runs every 1m0s"}},
		{[]string{"-consumer", "fail"}, []string{`to change the consumer's mode while it runs: aws sqs tag-queue --endpoint-url "$AWS_ENDPOINT_URL" --queue-url "$DLQQ_SOURCE_QUEUE_URL" --tags dlqlocal-consumer=MODE (off, fail, flaky or validate)`}},
		{[]string{"-settle-window", "20s", "-settle-margin", "5s", "-source-visibility", "2s"}, []string{"settling (local): a replay that stays out of the DLQ for 20s is RESOLVED, the longer of the settle window 20s and 4 receives x 2 s visibility + margin 5s = 13s"}},
	} {
		x, err := parseExtras(t, tc.args...)
		if err != nil {
			t.Fatal(err)
		}
		st := stackFor(t, x.stackOptions(embedded.Options{Params: map[string]any{"MaxReceiveCount": 4}}).Params)
		var b bytes.Buffer
		if err := x.banner(&b, st); err != nil {
			t.Fatal(err)
		}
		for _, w := range tc.want {
			if !strings.Contains(b.String(), w) {
				t.Errorf("%v: banner lacks %q:\n%s", tc.args, w, b.String())
			}
		}
	}
}

// With -data, the stop names how many messages of each queue are in flight
// (a released one included), which kumo does not snapshot; without -data
// it says nothing (nothing is kept anyway). (That a restart indeed lacks
// them: embedded's TestInFlightMessagesAreCountedAndNotKept.)
func TestStopWarnsOfInFlightMessagesWithData(t *testing.T) {
	t.Parallel()
	st := embedded.ForTest(t, embedded.Options{NoS3: true})
	ctx := context.Background()
	if err := st.ReleaseOneOfTwo(ctx, st.QueueURLs["SourceQueue"]); err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	(&localExtras{data: "/d"}).warnInFlight(ctx, &b, st)
	want := "warning: 1 messages in flight in " + st.Names["SourceQueue"] + " are not kept by -data (kumo snapshots only queued messages); AWS would deliver them again after their visibility timeout\n"
	if b.String() != want {
		t.Fatalf("got %q, want %q", b.String(), want)
	}
	b.Reset()
	(&localExtras{}).warnInFlight(ctx, &b, st)
	if b.Len() != 0 {
		t.Fatalf("without -data: %q", b.String())
	}
}

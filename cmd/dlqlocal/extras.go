package main

// The extras of `dlqlocal local`: a consumer of the source queue
// (-consumer, -flaky-rate, and the queue's mode tag), state kept across
// restarts (-data), short sweeper ages (-park-age, -resolved-age,
// -sweep-every) and a short settle window (-settle-window, -settle-margin,
// -source-visibility).

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/awslabs/goformation/v7/cloudformation"

	"github.com/dlqquarantine/dlqq/shared/dev/embedded"
	"github.com/dlqquarantine/dlqq/shared/dev/localrunner"
	"github.com/dlqquarantine/dlqq/shared/dev/template"
	"github.com/dlqquarantine/dlqq/shared/domain/sources"
	"github.com/dlqquarantine/dlqq/shared/usecase/redrive"
)

// localExtras holds the extras' flag values.
type localExtras struct {
	consumer    string
	flakyRate   float64
	data        string
	parkAge     ageFlag
	resolvedAge ageFlag
	sweepEvery  ageFlag
	// The redrive function's settle window and margin, and the source
	// queue's visibility timeout, which bounds the window from below.
	settleWindow, settleMargin, sourceVisibility ageFlag
}

// consumerTag is the source queue's tag that changes the consumer's mode
// while it runs.
const consumerTag = "dlqlocal-consumer"

// maxVisibility is the longest visibility timeout SQS takes (12 hours).
const maxVisibility = 12 * time.Hour

// ageFlag is a positive duration flag that remembers whether it was given.
type ageFlag struct {
	d     time.Duration
	set   bool
	unit  time.Duration // the duration must be a whole number of these
	uname string
	max   time.Duration // the longest accepted; 0 for no bound
}

func (a *ageFlag) String() string {
	if a == nil || !a.set {
		return ""
	}
	return a.d.String()
}

func (a *ageFlag) Set(s string) error {
	d, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("%q is not a duration (write it as 90s, 2m or 1h30m)", s)
	}
	if d <= 0 {
		return fmt.Errorf("%s is not positive", s)
	}
	if d%a.unit != 0 {
		return fmt.Errorf("%s is not a whole number of %s", s, a.uname)
	}
	if a.max > 0 && d > a.max {
		return fmt.Errorf("%s is longer than %s", s, a.max)
	}
	a.d, a.set = d, true
	return nil
}

// addLocalExtras defines the extras' flags on fs.
func addLocalExtras(fs *flag.FlagSet) *localExtras {
	x := &localExtras{
		parkAge:     ageFlag{unit: time.Second, uname: "seconds"},
		resolvedAge: ageFlag{unit: time.Second, uname: "seconds"},
		sweepEvery:  ageFlag{unit: time.Minute, uname: "minutes"},
		// Whole positive seconds, as the redrive function's configuration
		// takes them (SETTLE_WINDOW_SECONDS, SETTLE_MARGIN_SECONDS).
		settleWindow:     ageFlag{unit: time.Second, uname: "seconds"},
		settleMargin:     ageFlag{unit: time.Second, uname: "seconds"},
		sourceVisibility: ageFlag{unit: time.Second, uname: "seconds", max: maxVisibility},
	}
	fs.StringVar(&x.consumer, "consumer", "off", "consumer of the source queue: off, fail (reject every delivery), flaky (reject -flaky-rate of them) or validate (reject what fails the source's schema) (local)")
	fs.Float64Var(&x.flakyRate, "flaky-rate", 0.5, "share of deliveries -consumer flaky rejects, 0..1 (local)")
	fs.StringVar(&x.data, "data", "", "keep the stack's state (queues, tables, objects, keys) in this directory across restarts (not messages in flight at the stop); it must not overlap -dir; default: a temporary directory, lost on stop (local)")
	fs.Var(&x.parkAge, "park-age", "archive PARKED records after this long, e.g. 2m (default the template's 30 days) (local)")
	fs.Var(&x.resolvedAge, "resolved-age", "archive RESOLVED records after this long, e.g. 1m (default the template's 7 days) (local)")
	fs.Var(&x.sweepEvery, "sweep-every", "run the sweeper this often, whole minutes, e.g. 1m (default the template's 1h) (local)")
	fs.Var(&x.settleWindow, "settle-window", "the redrive function's settle window: a replay that stays out of the DLQ this long is RESOLVED, whole seconds, e.g. 20s (default the template's 30m); the function uses the longer of it and -source-visibility x the source's max receives + -settle-margin (local)")
	fs.Var(&x.settleMargin, "settle-margin", "the ingest lag the settle window allows beyond the source queue's redeliveries, whole seconds, e.g. 5s (default the template's 10m) (local)")
	fs.Var(&x.sourceVisibility, "source-visibility", "the source queue's visibility timeout, whole seconds up to 12h, e.g. 2s (default the template's 180s); with the source's max receives it bounds the settle window from below (local)")
	return x
}

// prepare checks the values and, with -data, re-executes the process so
// that kumo starts with its data dir (it reads it at init); on success of
// the re-exec it does not return.
func (x *localExtras) prepare() error {
	var errs []error
	if _, err := localrunner.ParseConsumerMode(x.consumer); err != nil {
		errs = append(errs, fmt.Errorf("-consumer: %w", err))
	}
	if !(x.flakyRate >= 0 && x.flakyRate <= 1) {
		errs = append(errs, fmt.Errorf("-flaky-rate %v is outside 0..1", x.flakyRate))
	}
	if x.settleWindow.set || x.settleMargin.set || x.sourceVisibility.set {
		// The redrive function's own check of its configuration, on the
		// environment the template gives it with these values.
		if err := checkRedriveConfig(x.stackOptions(embedded.Options{}).Params); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if x.data != "" {
		return embedded.Reexec(x.data)
	}
	return nil
}

// stackOptions adds the data dir, the sweep schedule and the settle
// parameters to o.
func (x *localExtras) stackOptions(o embedded.Options) embedded.Options {
	o.DataDir = x.data
	params := map[string]any{}
	for k, v := range o.Params {
		params[k] = v
	}
	if x.sweepEvery.set {
		params["SweepSchedule"] = rate(x.sweepEvery.d)
	}
	for name, a := range map[string]ageFlag{"SettleWindowSeconds": x.settleWindow, "SettleMarginSeconds": x.settleMargin,
		"SourceVisibilityTimeoutSeconds": x.sourceVisibility} {
		if a.set {
			params[name] = int(a.d / time.Second)
		}
	}
	if len(params) > 0 {
		o.Params = params
	}
	return o
}

// checkRedriveConfig resolves the template with params and checks the
// redrive function's environment as the function does at init
// (redrive.ConfigFromEnv), so that a value it would refuse stops dlqlocal
// before anything starts.
func checkRedriveConfig(params map[string]any) error {
	t, err := template.Open(template.Path(), template.Env{StackName: "dlqq", Region: embedded.Region, Account: embedded.Account, Endpoint: "http://127.0.0.1:1", Params: params})
	if err != nil {
		return err
	}
	env, err := functionEnvironment(t, "RedriveFunction")
	if err != nil {
		return err
	}
	if _, err := redrive.ConfigFromEnv(func(k string) string { return env[k] }); err != nil {
		return fmt.Errorf("the redrive function would refuse its configuration: %w", err)
	}
	return nil
}

// functionEnvironment is a function's environment in the resolved template.
func functionEnvironment(t *cloudformation.Template, id string) (map[string]string, error) {
	fn, err := t.GetServerlessFunctionWithName(id)
	if err != nil {
		return nil, fmt.Errorf("function %s: %w", id, err)
	}
	if fn.Environment == nil || fn.Environment.Variables == nil {
		return nil, fmt.Errorf("function %s has no environment", id)
	}
	return fn.Environment.Variables, nil
}

// settleWindow is the window the redrive function settles with on st: the
// longer of its SETTLE_WINDOW_SECONDS and the source queue's bound
// (redrive.MinSettleWindow with its SETTLE_MARGIN_SECONDS), as the
// function computes it at each settle; configured and bound are the two.
func settleWindow(st *embedded.Stack, q sourceQueue) (window, configured, bound time.Duration, err error) {
	cfg, err := functionEnvironment(st.Template, "RedriveFunction")
	if err != nil {
		return 0, 0, 0, err
	}
	fc, err := redrive.ConfigFromEnv(func(k string) string { return cfg[k] })
	if err != nil {
		return 0, 0, 0, err
	}
	attrs := map[string]string{"VisibilityTimeout": strconv.Itoa(q.visibility), "RedrivePolicy": fmt.Sprintf(`{"maxReceiveCount":%d}`, q.maxReceiveCount)}
	if bound, err = redrive.MinSettleWindow(attrs, fc.Service.SettleMargin); err != nil {
		return 0, 0, 0, err
	}
	return max(fc.Service.SettleWindow, bound), fc.Service.SettleWindow, bound, nil
}

func rate(d time.Duration) string {
	if n := int(d / time.Minute); n != 1 {
		return fmt.Sprintf("rate(%d minutes)", n)
	}
	return "rate(1 minute)"
}

// functionEnv is the environment to set over the template's, by function
// logical id: the sweeper's ages.
func (x *localExtras) functionEnv() map[string]map[string]string {
	env := map[string]string{}
	if x.parkAge.set {
		env["PARK_AGE_SECONDS"] = strconv.FormatInt(int64(x.parkAge.d/time.Second), 10)
	}
	if x.resolvedAge.set {
		env["RESOLVED_AGE_SECONDS"] = strconv.FormatInt(int64(x.resolvedAge.d/time.Second), 10)
	}
	if len(env) == 0 {
		return map[string]map[string]string{}
	}
	return map[string]map[string]string{"SweeperFunction": env}
}

// applyFunctionEnv sets env over the resolved template's function
// environments, for code that reads them from the template.
func applyFunctionEnv(t *cloudformation.Template, env map[string]map[string]string) error {
	for id, vars := range env {
		fn, err := t.GetServerlessFunctionWithName(id)
		if err != nil {
			return fmt.Errorf("function %s: %w", id, err)
		}
		if fn.Environment == nil || fn.Environment.Variables == nil {
			return fmt.Errorf("function %s has no environment to override", id)
		}
		for k, v := range vars {
			fn.Environment.Variables[k] = v
		}
	}
	return nil
}

// sourceQueue is what the banner and the consumer need of the template's
// source queue.
type sourceQueue struct {
	url, name       string
	maxReceiveCount int
	visibility      int
}

func sourceQueueOf(st *embedded.Stack) (sourceQueue, error) {
	q, err := st.Template.GetSQSQueueWithName("SourceQueue")
	if err != nil {
		return sourceQueue{}, err
	}
	out := sourceQueue{url: st.QueueURLs["SourceQueue"], name: st.Names["SourceQueue"], visibility: aws.ToInt(q.VisibilityTimeout)}
	raw, err := json.Marshal(q.RedrivePolicy)
	if err != nil {
		return out, err
	}
	var rp struct {
		MaxReceiveCount json.Number `json:"maxReceiveCount"`
	}
	if err := json.Unmarshal(raw, &rp); err != nil {
		return out, fmt.Errorf("source queue redrive policy %s: %w", raw, err)
	}
	n, err := strconv.Atoi(rp.MaxReceiveCount.String())
	if err != nil {
		return out, fmt.Errorf("source queue redrive policy %s: maxReceiveCount: %w", raw, err)
	}
	out.maxReceiveCount = n
	return out, nil
}

// localSource is one of the local stack's source queues.
type localSource struct{ name, url, dlq, what string }

// localSources are the local stack's source queues: the template's
// example one and the existing ones embedded.WithLocalSources adds.
func localSources(st *embedded.Stack) []localSource {
	name := func(s string) string { return st.Env.StackName + "-" + s }
	out := []localSource{{st.Names["SourceQueue"], st.QueueURLs["SourceQueue"], st.Names["DeadLetterQueue"], "the template's example queue (standard)"}}
	for _, q := range []localSource{
		{name(embedded.SharedSource), "", st.Names["DeadLetterQueue"], "an existing standard queue sharing the stack's DLQ"},
		{name(embedded.FIFOSource), "", name(embedded.FIFODLQ), "an existing FIFO queue with its own FIFO DLQ (ExtraDLQArn)"},
	} {
		if url, ok := st.QueueURLs[q.name]; ok {
			q.url = url
			out = append(out, q)
		}
	}
	return out
}

// sourceCheck is the source queue's validation gate (ingest's SOURCES
// entry for it), for -consumer validate.
func sourceCheck(st *embedded.Stack) (func([]byte) (bool, string), string, error) {
	return sourceCheckFor(st, st.Names["SourceQueue"])
}

// sourceCheckFor is sourceCheck for the source called name.
func sourceCheckFor(st *embedded.Stack, name string) (func([]byte) (bool, string), string, error) {
	fn, err := st.Template.GetServerlessFunctionWithName("IngestFunction")
	if err != nil {
		return nil, "", err
	}
	if fn.Environment == nil {
		return nil, "", errors.New("IngestFunction has no environment")
	}
	cfg, err := sources.FromVariables(fn.Environment.Variables)
	if err != nil {
		return nil, "", err
	}
	c, ok := cfg[name]
	if !ok {
		return nil, "", fmt.Errorf("ingest's SOURCES has no source %q", name)
	}
	built, err := sources.Build(map[string]sources.Config{name: c})
	if err != nil {
		return nil, "", err
	}
	src := built[name]
	return func(body []byte) (bool, string) {
		v := src.Check(body)
		return v.Valid, v.Reason // Reason is low-cardinality; Detail may quote the body
	}, c.Schema, nil
}

// newConsumer builds the source queue's consumer for -consumer.
func (x *localExtras) newConsumer(st *embedded.Stack, log *slog.Logger) (*localrunner.Consumer, error) {
	return x.newConsumerOf(st, localSources(st)[0], log)
}

// newConsumerOf builds the consumer of one of the local stack's sources.
func (x *localExtras) newConsumerOf(st *embedded.Stack, q localSource, log *slog.Logger) (*localrunner.Consumer, error) {
	mode, err := localrunner.ParseConsumerMode(x.consumer)
	if err != nil {
		return nil, err
	}
	c := &localrunner.Consumer{SQS: st.Clients.SQS, QueueURL: q.url, Mode: mode, FlakyRate: x.flakyRate, Log: log, ModeTag: consumerTag}
	// The source's gate, for -consumer validate or a tag that switches to it.
	if c.Accept, _, err = sourceCheckFor(st, q.name); err != nil && mode == localrunner.ConsumerValidate {
		return nil, fmt.Errorf("-consumer validate: %s: %w", q.name, err)
	}
	return c, c.Validate()
}

// startConsumer runs a consumer of each of the local stack's source
// queues (localSources), each in -consumer's mode and switched by its own
// queue's tag, until ctx ends; done is closed when all have stopped.
func (x *localExtras) startConsumer(ctx context.Context, st *embedded.Stack, log *slog.Logger) (done <-chan struct{}, err error) {
	var cs []*localrunner.Consumer
	for _, q := range localSources(st) {
		c, err := x.newConsumerOf(st, q, log)
		if err != nil {
			return nil, err
		}
		cs = append(cs, c)
	}
	ch := make(chan struct{})
	var wg sync.WaitGroup
	for _, c := range cs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := c.Run(ctx); err != nil {
				log.Error("consumer stopped", "queue", c.QueueURL, "error", err.Error())
			}
		}()
	}
	go func() { wg.Wait(); close(ch) }()
	return ch, nil
}

// banner says what the extras do in this run.
func (x *localExtras) banner(w io.Writer, st *embedded.Stack) error {
	q, err := sourceQueueOf(st)
	if err != nil {
		return err
	}
	if x.data != "" {
		fmt.Fprintf(w, "state: kept in %s (kumo's queues, tables, keys and functions in %s/kumo, written every %s and on Ctrl-C; S3 objects in %s/s3); a kill -9 loses about the last %s of kumo writes. Messages in flight (received and not deleted, released ones too until received again) are not kept: kumo snapshots only queued messages; a clean stop counts them on stderr\n",
			x.data, x.data, embedded.FlushInterval, x.data, embedded.FlushInterval)
	} else {
		fmt.Fprintf(w, "state: in a temporary directory, lost on stop (-data DIR keeps it)\n")
	}
	switch localrunner.ConsumerMode(x.consumer) {
	case localrunner.ConsumerOff:
		fmt.Fprintf(w, "consumer: off. Nothing consumes %s (in production your service does), so nothing dead-letters by itself: a message reaches the DLQ after %d receives (each hides it for %d s unless its visibility is set to 0); -consumer fail|flaky|validate plays the consumer\n",
			q.name, q.maxReceiveCount, q.visibility)
	case localrunner.ConsumerFail:
		fmt.Fprintf(w, "consumer: fail. Every delivery from %s is rejected and released at once (visibility 0), so each message reaches the DLQ after %d receives, within seconds (not %d x %d s)\n",
			q.name, q.maxReceiveCount, q.maxReceiveCount, q.visibility)
	case localrunner.ConsumerFlaky:
		fmt.Fprintf(w, "consumer: flaky. %.0f%% of deliveries from %s are rejected at random and released at once, the others deleted; a message rejected %d times in a row reaches the DLQ\n",
			100*x.flakyRate, q.name, q.maxReceiveCount)
	case localrunner.ConsumerValidate:
		_, schema, err := sourceCheck(st)
		if err != nil {
			return err
		}
		if schema == "" {
			schema = "well-formed JSON"
		}
		fmt.Fprintf(w, "consumer: validate. Messages from %s that pass the source's gate (%s) are deleted; the others are rejected, released at once, and reach the DLQ after %d receives\n",
			q.name, schema, q.maxReceiveCount)
	}
	if srcs := localSources(st); len(srcs) > 1 && localrunner.ConsumerMode(x.consumer) != localrunner.ConsumerOff {
		var names []string
		for _, q := range srcs[1:] {
			names = append(names, q.name)
		}
		fmt.Fprintf(w, "the other source queues (%s) have a consumer each, in the same mode, switched by its own queue's tag\n", strings.Join(names, ", "))
	}
	fmt.Fprintf(w, "to change the consumer's mode while it runs: aws sqs tag-queue --endpoint-url \"$AWS_ENDPOINT_URL\" --queue-url \"$DLQQ_SOURCE_QUEUE_URL\" --tags %s=MODE (off, fail, flaky or validate)\n", consumerTag)
	if x.settleWindow.set || x.settleMargin.set || x.sourceVisibility.set {
		window, configured, bound, err := settleWindow(st, q)
		if err != nil {
			return err
		}
		margin := bound - time.Duration(q.maxReceiveCount*q.visibility)*time.Second
		fmt.Fprintf(w, "settling (local): a replay that stays out of the DLQ for %s is RESOLVED, the longer of the settle window %s and %d receives x %d s visibility + margin %s = %s, as the redrive function computes it at each redrive run and settle schedule\n",
			window, configured, q.maxReceiveCount, q.visibility, margin, bound)
	}
	if x.parkAge.set || x.resolvedAge.set || x.sweepEvery.set {
		fmt.Fprintf(w, "sweeper (local ages): archives PARKED records after %s and RESOLVED records after %s, runs every %s\n",
			orDefault(x.parkAge, "30 days"), orDefault(x.resolvedAge, "7 days"), orDefault(x.sweepEvery, "hour"))
	}
	return nil
}

// warnInFlight says on w, with -data, how many messages of each queue are
// in flight: kumo does not snapshot them, so the next start will not have
// them. Call it once nothing receives any more, before the stack closes.
func (x *localExtras) warnInFlight(ctx context.Context, w io.Writer, st *embedded.Stack) {
	if x.data == "" {
		return
	}
	qs, err := st.InFlight(ctx)
	for _, q := range qs {
		fmt.Fprintf(w, "warning: %d messages in flight in %s are not kept by -data (kumo snapshots only queued messages); AWS would deliver them again after their visibility timeout\n", q.N, q.Name)
	}
	if err != nil {
		fmt.Fprintf(w, "warning: could not count the messages in flight, which -data does not keep: %v\n", err)
	}
}

func orDefault(a ageFlag, def string) string {
	if a.set {
		return a.d.String()
	}
	return def + " (template)"
}

package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dlqquarantine/dlqq/shared/dev/syncio"
)

// TestLocalDocsWalk walks docs/local.md as a user does: it runs the page's
// `make local` line (with its own -dir), waits for build/local.env, then
// runs every other command the page shows, in order, in one bash session
// in the repository root, and checks what each prints. A command the page
// shows without a check here, or a check for a command the page no longer
// shows, fails the test. At the end it sends the interrupt a Ctrl-C sends.
//
// The aws commands run through the AWS CLI on PATH. Without one they run
// through awsStandIn (this test binary, on the SDK), which covers the
// stack but not the CLI: the test says so in its log.
func TestLocalDocsWalk(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	cmds := shownCommands(t, filepath.Join(root, "docs", "local.md"))
	checks := walkChecks()
	for _, c := range cmds[1:] {
		if _, ok := checks[c]; !ok {
			t.Errorf("docs/local.md shows a command this test does not check: %s", c)
		}
	}
	shown := map[string]bool{}
	for _, c := range cmds {
		shown[c] = true
	}
	for c := range checks {
		if !shown[c] {
			t.Errorf("a check for a command docs/local.md no longer shows: %s", c)
		}
	}
	if t.Failed() {
		t.FailNow()
	}

	tmp := t.TempDir()
	env := walkEnv(t, tmp)
	envFile := filepath.Join(root, "build", "local.env")
	if _, err := os.Stat(envFile); err == nil {
		// A make local of this checkout is running (or one was killed):
		// the walk would take its env file. Say so rather than break it.
		t.Fatalf("%s exists: a make local runs in this checkout (stop it), or a killed one left it (remove it)", envFile)
	}
	// The page's first command, with a -dir of the test's own so that it
	// runs beside another `make local`.
	start := cmds[0]
	if !strings.HasPrefix(start, `make local LOCAL_FLAGS="`) {
		t.Fatalf("docs/local.md starts with %q, not make local LOCAL_FLAGS=\"…\"", start)
	}
	start = strings.Replace(start, `LOCAL_FLAGS="`, `LOCAL_FLAGS="-dir `+filepath.Join(tmp, "local")+` `, 1)
	out := syncio.NewBuffer()
	mk := exec.Command("bash", "-c", "exec "+start)
	mk.Dir, mk.Env, mk.Stdout, mk.Stderr = root, env, out, out
	mk.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // a terminal's process group, for the Ctrl-C
	if err := mk.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = mk.Wait(); close(exited) }()
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			_ = syscall.Kill(-mk.Process.Pid, syscall.SIGKILL)
			<-exited
			// Killed, it could not remove its env file: the next walk
			// would take it for a make local still running.
			_ = os.Remove(envFile)
		}
	})
	deadline := time.After(12 * time.Minute)
	for ready := false; !ready; {
		select {
		case <-exited:
			t.Fatalf("%s exited before it was ready: %v\n%s", start, mk.ProcessState, out)
		case <-deadline:
			t.Fatalf("no %s after 12 minutes:\n%s", envFile, out)
		case <-time.After(250 * time.Millisecond):
			_, err := os.Stat(envFile)
			ready = err == nil
		}
	}

	sh := newShell(t, root, env, filepath.Join(tmp, "shell"))
	for _, c := range cmds[1:] {
		chk := checks[c]
		give := time.Now().Add(90 * time.Second)
		for {
			got, code := sh.run(t, c)
			err := chk.check(got, code)
			if err == nil {
				t.Logf("$ %s\n%s", c, got)
				break
			}
			if !chk.eventually || time.Now().After(give) {
				t.Fatalf("$ %s\nexit %d: %v\n%s\n--- make local:\n%s", c, code, err, got, out)
			}
			time.Sleep(time.Second)
		}
	}

	// Ctrl-C: the interrupt goes to the terminal's process group.
	if err := syscall.Kill(-mk.Process.Pid, syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case <-exited:
		stopped = true
	case <-time.After(time.Minute):
		t.Fatalf("make local still running a minute after the interrupt:\n%s", out)
	}
	if got := out.String(); !strings.HasSuffix(strings.TrimSpace(got), "stopped") || strings.Contains(got, "Error 1") {
		t.Fatalf("make local after the interrupt (%v): want dlqlocal's \"stopped\" last and no make error:\n%s", mk.ProcessState, got)
	}
	if _, err := os.Stat(envFile); !os.IsNotExist(err) {
		t.Fatalf("%s is left after the stop (%v)", envFile, err)
	}
}

// shownCommands returns the commands of a page's sh blocks, in order: one
// per line, a line ending in a backslash joined to the next, comments and
// blank lines left out.
func shownCommands(t *testing.T, path string) []string {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var cmds []string
	in, cont := false, ""
	for _, l := range strings.Split(string(raw), "\n") {
		switch {
		case !in && l == "```sh":
			in = true
		case in && l == "```":
			in = false
		case in && strings.HasSuffix(l, `\`):
			cont += strings.TrimSuffix(l, `\`)
		case in && (strings.TrimSpace(l) == "" || strings.HasPrefix(strings.TrimSpace(l), "#")):
		case in:
			cmds = append(cmds, strings.TrimSpace(cont+l))
			cont = ""
		}
	}
	if len(cmds) < 2 {
		t.Fatalf("%s shows %d commands", path, len(cmds))
	}
	return cmds
}

// walkEnv is the environment of the walk: this one, without an AWS
// profile (the page's exports point everything at the stack), and with the
// SDK stand-in as `aws` when no AWS CLI is installed.
func walkEnv(t *testing.T, tmp string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); k != "AWS_PROFILE" && k != "AWS_DEFAULT_PROFILE" && k != reexec {
			env = append(env, kv)
		}
	}
	if p, err := exec.LookPath("aws"); err == nil {
		v, _ := exec.Command(p, "--version").CombinedOutput()
		version := strings.TrimSpace(string(v))
		if cliWorksLocally(version) {
			t.Logf("AWS CLI: %s (%s)", version, p)
			return env
		}
		t.Logf("AWS CLI %q (%s) is older than docs/local.md's minimum", version, p)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(tmp, "bin")
	if err := os.MkdirAll(bin, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(self, filepath.Join(bin, "aws")); err != nil {
		t.Fatal(err)
	}
	t.Logf("no usable AWS CLI on PATH: the page's aws commands run through the test's SDK stand-in, which checks the stack, not the CLI")
	return append(env, asAWS+"=1", "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"))
}

var cliVersion = regexp.MustCompile(`^aws-cli/(\d+)\.(\d+)\.(\d+) `)

// cliWorksLocally says whether the AWS CLI that printed version (`aws
// --version`) is one docs/local.md says works: v1 from 1.32.90, v2 from
// 2.13.34 (SQS's JSON protocol; AWS_ENDPOINT_URL came earlier).
func cliWorksLocally(version string) bool {
	m := cliVersion.FindStringSubmatch(version)
	if m == nil {
		return false
	}
	var v [3]int
	for i := range v {
		v[i], _ = strconv.Atoi(m[i+1])
	}
	switch v[0] {
	case 1:
		return v[1] > 32 || v[1] == 32 && v[2] >= 90
	case 2:
		return v[1] > 13 || v[1] == 13 && v[2] >= 34
	}
	return v[0] > 2
}

// shell is one bash session: a command's exports and PATH changes hold
// for the commands after it, as in a terminal.
type shell struct {
	cmd *exec.Cmd
	in  *os.File
	dir string
	n   int
}

func newShell(t *testing.T, root string, env []string, dir string) *shell {
	t.Helper()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	s := &shell{cmd: exec.Command("bash", "--noprofile", "--norc"), in: w, dir: dir}
	s.cmd.Dir, s.cmd.Env, s.cmd.Stdin = root, env, r
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	r.Close()
	t.Cleanup(func() { w.Close(); _ = s.cmd.Wait() })
	return s
}

// run runs c in the session and returns what it printed and its status.
func (s *shell) run(t *testing.T, c string) (string, int) {
	t.Helper()
	s.n++
	script, out, rc := filepath.Join(s.dir, fmt.Sprint(s.n, ".sh")), filepath.Join(s.dir, fmt.Sprint(s.n, ".out")), filepath.Join(s.dir, fmt.Sprint(s.n, ".rc"))
	if err := os.WriteFile(script, []byte(c+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := fmt.Fprintf(s.in, "{ . %q; } </dev/null >%q 2>&1; echo $? >%q.tmp && mv %q.tmp %q\n", script, out, rc, rc, rc); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(3 * time.Minute)
	for {
		if b, err := os.ReadFile(rc); err == nil {
			code, _ := strconv.Atoi(strings.TrimSpace(string(b)))
			got, _ := os.ReadFile(out)
			return string(got), code
		}
		if time.Now().After(deadline) {
			got, _ := os.ReadFile(out)
			t.Fatalf("$ %s: still running after 3 minutes:\n%s", c, got)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// walkCheck judges one command's output and exit status; eventually
// means the page says "within seconds": it is run again until it passes or
// 90 s have gone by.
type walkCheck struct {
	eventually bool
	check      func(out string, code int) error
}

// ok wants exit 0 and each of subs in the output.
func ok(subs ...string) walkCheck {
	return walkCheck{check: func(out string, code int) error {
		if code != 0 {
			return fmt.Errorf("exit %d", code)
		}
		for _, s := range subs {
			if !strings.Contains(out, s) {
				return fmt.Errorf("no %q in the output", s)
			}
		}
		return nil
	}}
}

// and adds a check of its own to c.
func (c walkCheck) and(f func(out string) error) walkCheck {
	prev := c.check
	c.check = func(out string, code int) error {
		if err := prev(out, code); err != nil {
			return err
		}
		return f(out)
	}
	return c
}

func (c walkCheck) soon() walkCheck { c.eventually = true; return c }

// exits wants exit code and each of subs in the output.
func exits(code int, subs ...string) walkCheck {
	return walkCheck{check: func(out string, got int) error {
		if got != code {
			return fmt.Errorf("exit %d, want %d", got, code)
		}
		for _, s := range subs {
			if !strings.Contains(out, s) {
				return fmt.Errorf("no %q in the output", s)
			}
		}
		return nil
	}}
}

// invoked checks an `aws lambda invoke … && cat build/out.json`: a 200, no
// function error, and each of subs in the function's response.
func invoked(subs ...string) walkCheck {
	return ok(append([]string{`"StatusCode": 200`}, subs...)...).and(func(out string) error {
		if strings.Contains(out, "FunctionError") {
			return fmt.Errorf("a function error")
		}
		return nil
	})
}

// lines wants n output lines matching re.
func lines(re string, n int) func(string) error {
	rx := regexp.MustCompile(re)
	return func(out string) error {
		got := 0
		for _, l := range strings.Split(out, "\n") {
			if rx.MatchString(l) {
				got++
			}
		}
		if got != n {
			return fmt.Errorf("%d lines match %s, want %d", got, re, n)
		}
		return nil
	}
}

// atLeast wants n or more output lines matching re.
func atLeast(re string, n int) func(string) error {
	rx := regexp.MustCompile(re)
	return func(out string) error {
		got := 0
		for _, l := range strings.Split(out, "\n") {
			if rx.MatchString(l) {
				got++
			}
		}
		if got < n {
			return fmt.Errorf("%d lines match %s, want %d or more", got, re, n)
		}
		return nil
	}
}

// matches wants the output to match re.
func matches(re string) func(string) error {
	rx := regexp.MustCompile(re)
	return func(out string) error {
		if !rx.MatchString(out) {
			return fmt.Errorf("the output does not match %s", re)
		}
		return nil
	}
}

// sdkDiscardWarning is the SDK's own warning after the loopback race
// docs/emulators.md describes (an answer read while its request body is
// still being written): stderr noise of the emulator, not the command's
// output, so lineAt counts lines without it.
var sdkDiscardWarning = regexp.MustCompile(`^SDK \d{4}/\d\d/\d\d \d\d:\d\d:\d\d WARN failed to discard remaining HTTP response body`)

// lineAt wants output line i (from 0) to match rx whole; the SDK's
// discard warnings are not counted as lines.
func lineAt(i int, rx *regexp.Regexp) func(string) error {
	return func(out string) error {
		var ls []string
		for _, l := range strings.Split(out, "\n") {
			if !sdkDiscardWarning.MatchString(l) {
				ls = append(ls, l)
			}
		}
		if i >= len(ls) || !rx.MatchString(ls[i]) {
			return fmt.Errorf("line %d is not %s", i+1, rx)
		}
		return nil
	}
}

// The first two lines of dlqctl verify's output contract, after the walk
// above: 1 archived stub, nothing wrong with the records or the ledger,
// a signed digest (a duration as Go prints one).
var (
	verifyRecordsLine = regexp.MustCompile(`^verified [0-9]+ records \(1 archived stubs?\): 0 problems$`)
	verifyLedgerLine  = regexp.MustCompile(`^ledger: [1-9][0-9]* versions? in [1-9][0-9]* segments? of 1 shards?, [1-9][0-9]* digests? \(newest #[1-9][0-9]*, signed [0-9][0-9.a-zµ]* ago\): 0 problems$`)
)

func lacks(s string) func(string) error {
	return func(out string) error {
		if strings.Contains(out, s) {
			return fmt.Errorf("the output holds %q", s)
		}
		return nil
	}
}

const invoke = "aws lambda invoke --cli-read-timeout 0 --function-name "

// walkChecks are the checks of docs/local.md's commands, by the command
// exactly as the page shows it.
func walkChecks() map[string]walkCheck {
	at := func(fn, sample string) string {
		return invoke + fn + " --payload fileb://events/" + sample + " build/out.json && cat build/out.json"
	}
	return map[string]walkCheck{
		"source build/local.env": ok(),
		`go build -o build/dlqctl ./cmd/dlqctl && export PATH="$PWD/build:$PATH"`:    ok(),
		"aws lambda list-functions --query 'Functions[].FunctionName' --output text": ok("dlqq-ingest", "dlqq-redrive", "dlqq-operate", "dlqq-sweeper", "dlqq-metrics", "dlqq-ledger", "dlqq-digest"),
		`for n in 101 102 103 104 105; do aws sqs send-message --endpoint-url "$AWS_ENDPOINT_URL" --queue-url "$DLQQ_SOURCE_QUEUE_URL" --message-body file://events/messages/inv-000$n.json --query MessageId --output text; done`: ok().and(lines(`^[0-9a-f-]{36}$`, 5)),
		"dlqctl ls --status all":                   ok().and(lines(`^dlqq-source#inv-00010[1-3] +QUARANTINED +exhausted `, 3)).and(lines(`^dlqq-source#inv-00010[45] +QUARANTINED +validation `, 2)).soon(),
		"dlqctl buckets":                           ok("5 open records in 3 failure signatures", "consumer|retries exhausted"),
		"dlqctl show dlqq-source#inv-000104":       ok("/ndc: pattern: does not match", "(verifies)").and(lacks("0O409")),
		at("dlqq-redrive", "redrive-dry-run.json"): invoked(`"dry_run":true`, `"redriven":{"count":3`, `"held":{"count":2`),
		at("dlqq-redrive", "redrive-ids.json"):     invoked(`"redriven":{"count":2`, `"dlqq-source#inv-000101"`, `"dlqq-source#inv-000103"`),
		// Four eyes (docs/identity.md): operator-a's fix waits (exit 4),
		// its own approval is refused, operator-b's runs it.
		`dlqctl fix dlqq-source#inv-000104 --payload-file events/messages/inv-000104-fixed.json --reason "NDC keyed with a letter O for a zero" --approval-id fix-inv-000104`: exits(4, "needs a second person's approval (correction)", "approval fix-inv-000104 waits"),
		"dlqctl approvals approve --source dlqq-source fix-inv-000104": exits(1, "second, different principal"),
		"dlqq_as operator-b":                       ok(),
		"dlqq_as operator-a":                       ok(),
		"dlqq_as auditor":                          ok(),
		"dlqctl approvals ls --source dlqq-source": ok().and(lines(`^fix-inv-000104 +pending +correct +correction +arn:aws:iam::000000000000:user/operator-a `, 1)),
		`dlqctl approvals approve --source dlqq-source fix-inv-000104 --reason "checked against the invoice"`:                                                                               ok("approval fix-inv-000104 approved; its plan ran as arn:aws:iam::000000000000:user/operator-a"),
		`dlqctl fix dlqq-source#inv-000105 --payload-file events/messages/inv-000105-fixed.json --reason "quantity keyed as 0; 5 per the dispensing log" --approval-id fix-inv-000105`:      exits(4, "approval fix-inv-000105 waits"),
		`dlqctl approvals approve --source dlqq-source fix-inv-000105 --reason "matches the dispensing log"`:                                                                                ok("approval fix-inv-000105 approved"),
		"dlqctl approvals approve --source dlqq-source fix-inv-000105":                                                                                                                      exits(1, "refused the request: 403"),
		"dlqctl approvals show --source dlqq-source fix-inv-000105":                                                                                                                         ok("approval fix-inv-000105 of dlqq-source: executed", "by arn:aws:iam::000000000000:user/operator-b", "corrected 1"),
		"dlqctl redrive --source dlqq-source --id dlqq-source#inv-000104 --id dlqq-source#inv-000105 --yes":                                                                                 ok("redriven 2, held 0"),
		at("dlqq-redrive", "redrive-park.json"):                                                                                                                                             invoked(`"action":"park"`, `"status":"PARKED"`, `"actor":"unverified:pharmacist@example.com"`),
		at("dlqq-redrive", "redrive-read.json"):                                                                                                                                             invoked(`"action":"read"`, `"payload":{"body":"eyJldmVudF9pZCI6Imludi0wMDAxMDIi`, `"read_count":1`, `"actor":"unverified:auditor@example.com"`),
		`dlqctl redrive --source dlqq-source --id dlqq-source#inv-000102 --include-parked --reason "recall review: lot not affected" --approval-id replay-inv-000102 --yes`:                 exits(4, "needs a second person's approval (parked)", "approval replay-inv-000102 waits"),
		`dlqctl approvals approve --source dlqq-source replay-inv-000102 --reason "QA cleared the lot"`:                                                                                     ok("approval replay-inv-000102 approved", "redriven 1,"),
		at("dlqq-redrive", "redrive-cleared-exhausted.json"):                                                                                                                                invoked(`"action":"redrive"`, `"dry_run":false`, `"redriven":{"count":0`, `"failed":{"count":0`),
		at("dlqq-redrive", "redrive-settle.json"):                                                                                                                                           invoked(`"action":"settle"`, `"failed":{"count":0`),
		at("dlqq-redrive", "redrive-policies.json"):                                                                                                                                         invoked(`"action":"policies"`, `"failed":{"count":0`),
		`dlqctl policy add --source dlqq-source --signature "consumer|billing timeout|v#" --max-per-run 25 --expires 72h --note "INC-4711: billing timeouts" --approval-id policy-inc-4711`: exits(4, "needs a second person's approval (policy)", "approval policy-inc-4711 waits"),
		`dlqctl approvals approve --source dlqq-source policy-inc-4711 --reason "narrow and short-lived"`:                                                                                   ok("approval policy-inc-4711 approved"),
		"dlqctl policy ls --source dlqq-source":                                                                                                                                             ok("active", "arn:aws:iam::000000000000:user/operator-a"),
		// 101 was replayed above and the failing consumer sends it back:
		// it can be parked once it is in quarantine again.
		`dlqctl park dlqq-source#inv-000101 --reason "duplicate of a corrected movement"`: ok("dlqq-source#inv-000101 is PARKED").soon(),
		"sleep 6": ok(),
		at("dlqq-sweeper", "sweeper-scheduled.json"):              invoked(`"archived":[{"id":"dlqq-source#inv-000101"`),
		`aws s3 ls "s3://$DLQQ_LOCAL_ARCHIVE_BUCKET" --recursive`: ok("archive/dlqq-source/").and(lines(`archive/dlqq-source/.*\.json$`, 1)),
		at("dlqq-metrics", "metrics-scheduled.json"):              invoked(`"source":"dlqq-source"`, `"ARCHIVED/exhausted":1`),
		"dlqctl health": ok("sources: dlqq-ledger.fifo, dlqq-returns, dlqq-source (the SOURCES of function dlqq-redrive)", "Source=dlqq-returns", "Source=dlqq-ledger.fifo", "ArchivedRecords", "DLQDepth", "Source=dlqq-source",
			"alarms are stored but never evaluated").and(lines(`^Records +Source=dlqq-source Status=ARCHIVED Class=exhausted +1 `, 1)).and(lines(`^dlqq\.dlq-depth +INSUFFICIENT_DATA `, 1)),
		// The sample batch comes from other accounts' DLQs, not from a
		// queue of the stack's DLQ_ARNS: refused whole, nothing stored.
		at("dlqq-ingest", "ingest-dlq-batch.json"): ok(`"StatusCode": 200`, `"FunctionError": "Unhandled"`, "a batch from a queue that is not a configured DLQ"),
		// The ledger: a digest signed now by the digest function; the
		// stream sample, from another table's stream, refused by the
		// stream function, and by the digest function as a stream batch;
		// segments and digests in the bucket.
		at("dlqq-digest", "ledger-digest.json"): invoked().and(matches(`"n":[1-9][0-9]*,"written":(true|false),("adopted":true,)?"shards":1,"lag_seconds":`)),
		at("dlqq-ledger", "ledger-stream.json"): ok(`"FunctionError"`, "not the ledger's stream"),
		at("dlqq-digest", "ledger-stream.json"): ok(`"FunctionError"`, "event refused", "never takes a stream batch"),
		`aws s3 ls "s3://$DLQQ_LOCAL_ARCHIVE_BUCKET/ledger/" --recursive`: ok().and(atLeast(`ledger/segments/shardId-[^/ ]+/[0-9]{40}\.json$`, 1)).and(atLeast(`ledger/digests/[0-9]{12}\.json$`, 1)).
			and(lines(`archive/`, 0)),
		// The verify output contract (docs/local.md, phase 2): its first
		// two lines, exactly; records and ledger clean.
		"dlqctl verify": ok().and(lineAt(0, verifyRecordsLine)).and(lineAt(1, verifyLedgerLine)),
		// The outage ends: the consumer takes 103's replay, which settles
		// as RESOLVED and is archived by the sweeper. A schedule may settle
		// or sweep it before the page's invokes do: their checks do not
		// count, the record's state and history do.
		`aws sqs tag-queue --endpoint-url "$AWS_ENDPOINT_URL" --queue-url "$DLQQ_SOURCE_QUEUE_URL" --tags dlqlocal-consumer=validate`: ok(),
		`aws sqs list-queue-tags --endpoint-url "$AWS_ENDPOINT_URL" --queue-url "$DLQQ_SOURCE_QUEUE_URL"`:                             ok(`"dlqlocal-consumer-mode": "validate"`).soon(),
		"dlqctl redrive --source dlqq-source --id dlqq-source#inv-000103 --yes":                                                       ok("redriven 1, held 0"),
		"sleep 21": ok(),
		invoke + "dlqq-redrive --payload fileb://events/redrive-settle.json build/settle.json && cat build/settle.json": invoked(`"action":"settle"`, `"failed":{"count":0`, `"settle_window_seconds":20`),
		"dlqctl ls --status RESOLVED": ok().and(lines(`^dlqq-source#inv-000103 +RESOLVED `, 1)).soon(),
		invoke + "dlqq-sweeper --payload fileb://events/sweeper-scheduled.json build/sweep.json && cat build/sweep.json": invoked(`"failed":0`),
		"dlqctl ls --status ARCHIVED": ok().and(lines(`^dlqq-source#inv-00010[13] +ARCHIVED `, 2)).soon(),
		"dlqctl show dlqq-source#inv-000103": ok().and(matches(`(?m)^status +ARCHIVED since `)).
			and(matches(`(?s)\n  \S+ +redrive +\S+ +sent \(round [0-9]+\)\n  \S+ +settle +settler +no failure within 20s of the replay\n  \S+ +archive +sweeper +archived to s3://`)),
		`aws sqs get-queue-attributes --endpoint-url "$AWS_ENDPOINT_URL" --queue-url "$DLQQ_DLQ_URL" --attribute-names ApproximateNumberOfMessages ApproximateNumberOfMessagesNotVisible`: ok(`"ApproximateNumberOfMessages": "0"`, `"ApproximateNumberOfMessagesNotVisible": "0"`).soon(),
		// Several sources: one sharing the stack's DLQ, a FIFO pair; each
		// record under its own source.
		`aws sqs send-message --endpoint-url "$AWS_ENDPOINT_URL" --queue-url "$DLQQ_SHARED_SOURCE_URL" --message-body file://events/messages/inv-000101.json --query MessageId --output text`:                                                                   ok().and(lines(`^[0-9a-f-]{36}$`, 1)),
		`aws sqs send-message --endpoint-url "$AWS_ENDPOINT_URL" --queue-url "$DLQQ_FIFO_SOURCE_URL" --message-group-id FAC-WEST-1 --message-deduplication-id inv-000102 --message-body file://events/messages/inv-000102.json --query MessageId --output text`: ok().and(lines(`^[0-9a-f-]{36}$`, 1)),
		"dlqctl ls --source dlqq-returns --status all":     ok().and(lines(`^dlqq-returns#inv-000101 +QUARANTINED +exhausted `, 1)).soon(),
		"dlqctl ls --source dlqq-ledger.fifo --status all": ok().and(lines(`^dlqq-ledger\.fifo#inv-000102 +QUARANTINED +exhausted `, 1)).soon(),
	}
}

func TestCLIWorksLocally(t *testing.T) {
	for v, want := range map[string]bool{
		"aws-cli/1.45.11 Python/3.11.7 Linux/6.18 botocore/1.43.11":  true,
		"aws-cli/1.32.90 Python/3.11.7 Linux/6.18 botocore/1.34.90":  true,
		"aws-cli/1.32.89 Python/3.11.7 Linux/6.18 botocore/1.34.89":  false,
		"aws-cli/1.29.0 Python/3.11.7 Linux/6.18 botocore/1.31.0":    false,
		"aws-cli/2.9.19 Python/3.11.2 Linux/6.18 source/x86_64":      false,
		"aws-cli/2.13.0 Python/3.11.4 Linux/6.18 exe/x86_64":         false,
		"aws-cli/2.13.34 Python/3.11.6 Linux/6.18 exe/x86_64":        true,
		"aws-cli/2.27.20 Python/3.13.3 Linux/6.8.0-58-generic exe/x": true,
		"not the aws cli": false,
	} {
		if got := cliWorksLocally(v); got != want {
			t.Errorf("cliWorksLocally(%q) = %v, want %v", v, got, want)
		}
	}
}

// Every sample event in events/ is invoked by docs/local.md's walk (as
// `fileb://events/NAME`), so none can stop working unnoticed;
// ingest-env.json is sam local invoke's --env-vars, not an event, and
// messages/ holds message bodies the page sends.
func TestLocalDocsInvokeEverySample(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	cmds := strings.Join(shownCommands(t, filepath.Join(root, "docs", "local.md")), "\n")
	samples, err := filepath.Glob(filepath.Join(root, "events", "*.json"))
	if err != nil || len(samples) < 10 {
		t.Fatalf("samples %v: %v", samples, err)
	}
	// The operator endpoint's bodies (no requested_by: the endpoint names
	// the caller) are what dlqctl sends there; the walk sends them through
	// dlqctl (fix, redrive --include-parked, policy add), and
	// functions/redrive's TestBootstrapServesEveryRedriveSample sends each
	// through a local endpoint as operator-a, approved by operator-b. The
	// revoke sample names the policy the policy-add sample creates, which
	// the walk's dlqctl policy add does not (dlqctl draws the id).
	throughTheEndpoint := map[string]bool{"redrive-correct.json": true, "redrive-unpark.json": true, "redrive-parked-approved.json": true,
		"redrive-policy-add.json": true, "redrive-policy-resume.json": true, "redrive-policy-revoke.json": true}
	for _, f := range samples {
		name := filepath.Base(f)
		if name == "ingest-env.json" || throughTheEndpoint[name] {
			continue
		}
		if !strings.Contains(cmds, invoke) || !regexp.MustCompile(regexp.QuoteMeta(" --payload fileb://events/"+name+" ")).MatchString(cmds) {
			t.Errorf("docs/local.md invokes no function with events/%s", name)
		}
	}
}

package lambdatest

import (
	"bytes"
	"context"
	"fmt"
	"io"
	stdlog "log"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/lambda"

	"github.com/dlqquarantine/dlqq/shared/dev/embedded"
)

// Supervised is a function in kumo served by its bootstrap, restarted
// whenever it exits, as Lambda starts a new execution environment after a
// crash. kumo holds an invocation up to 30 s for a poller once the function
// has been served, so an invocation made while the bootstrap restarts waits
// for the new process instead of failing.
//
// Between the bootstrap and kumo sits a proxy that polls kumo on the
// function's behalf, one poll at a time and not tied to a process: an
// invocation that arrives for a process that has just died goes to the next
// one instead of being lost, and an invocation a process took and did not
// answer before it exited fails at once with Runtime.ExitError, as on
// Lambda, instead of waiting out the function's timeout.
type Supervised struct {
	Spec Spec

	st     *embedded.Stack
	proxy  *http.Server
	addr   string
	out    io.Writer
	log    *slog.Logger
	stop   chan struct{}
	exited chan struct{}

	mu       sync.Mutex
	cmd      *exec.Cmd
	restarts int
	polled   bool // the current process has polled
	pollCh   chan struct{}
	fetching bool                 // a poll of kumo is outstanding
	inflight map[string]time.Time // invocations handed to the current process, when
	// gen counts the processes whose invocations were collected as lost:
	// a poll made under an older gen came from a process that is gone.
	gen      int
	arrived  chan invocation // invocations from kumo, for the next poll
	fetchCtx context.Context
	cancel   context.CancelFunc
}

// invocation is one answer of kumo's next: its headers and event.
type invocation struct {
	header http.Header
	body   []byte
}

// Supervise creates the function in kumo from s, starts its bootstrap and
// returns once it has polled for its first invocation. out receives the
// bootstrap's output, each line prefixed with the function's name; log
// receives the supervisor's own lines (starts, exits, restarts).
func Supervise(ctx context.Context, st *embedded.Stack, s Spec, out io.Writer, log *slog.Logger) (*Supervised, error) {
	if err := create(ctx, lambda.NewFromConfig(st.AWS), s); err != nil {
		return nil, err
	}
	f := &Supervised{Spec: s, st: st, out: NewPrefixWriter(out, "["+s.Name+"] "), log: log,
		stop: make(chan struct{}), exited: make(chan struct{}), pollCh: make(chan struct{}),
		inflight: map[string]time.Time{}, arrived: make(chan invocation)}
	f.fetchCtx, f.cancel = context.WithCancel(context.Background())
	if err := f.listen(); err != nil {
		return nil, err
	}
	// Poll kumo before the bootstrap starts: kumo serves invocations of a
	// function only once something has polled for it.
	f.fetching = true
	go f.fetch("/_runtime/" + s.Name + "/2018-06-01/runtime/invocation/next")
	polled := f.pollCh // closed by the first poll; no poll can come before start
	first, err := f.start()
	if err != nil {
		f.cancel()
		f.proxy.Close()
		return nil, err
	}
	select {
	case <-polled:
	case <-first.done:
		f.cancel()
		f.proxy.Close()
		return nil, fmt.Errorf("%s: bootstrap exited before its first poll: %s", s.Name, first.status())
	case <-time.After(30 * time.Second):
		f.kill(first)
		f.cancel()
		f.proxy.Close()
		return nil, fmt.Errorf("%s: bootstrap did not poll within 30s", s.Name)
	case <-ctx.Done():
		f.kill(first)
		f.cancel()
		f.proxy.Close()
		return nil, ctx.Err()
	}
	go f.watch(first)
	return f, nil
}

type process struct {
	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

func (p *process) status() string {
	if p.err == nil {
		return "exit status 0"
	}
	return p.err.Error()
}

func (f *Supervised) start() (*process, error) {
	cmd := command(f.st, f.Spec, f.addr, f.out)
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("%s: start bootstrap: %w", f.Spec.Name, err)
	}
	p := &process{cmd: cmd, done: make(chan struct{})}
	go func() { p.err = cmd.Wait(); close(p.done) }()
	f.mu.Lock()
	// inflight is not reset here: watch collected the last process's, and
	// a poll of this one may already have registered an invocation.
	f.cmd, f.polled = cmd, false
	f.mu.Unlock()
	f.log.Info("bootstrap started", "function", f.Spec.Name, "pid", cmd.Process.Pid)
	return p, nil
}

// onPoll notes a poll of the current process and returns its gen.
func (f *Supervised) onPoll() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.polled {
		f.polled = true
		close(f.pollCh)
		f.pollCh = make(chan struct{})
	}
	return f.gen
}

// watch restarts the bootstrap each time it exits, until Close; a process
// that exits before it polls waits longer before the next start (up to 5 s).
// A process whose invocation runs past the function's timeout plus
// TimeoutGrace is killed (and so restarted), as Lambda resets an execution
// environment after a timeout. On Close it stops the process (shutdown).
func (f *Supervised) watch(p *process) {
	defer close(f.exited)
	backoff := 100 * time.Millisecond
	tick := time.NewTicker(timeoutCheck)
	defer tick.Stop()
	for {
		select {
		case <-f.stop:
			f.shutdown(p)
			return
		case <-tick.C:
			f.killTimedOut(p)
			continue
		case <-p.done:
		}
		f.mu.Lock()
		f.restarts++
		n, polled, lost := f.restarts, f.polled, f.inflight
		f.inflight = map[string]time.Time{}
		f.gen++ // polls still open are the dead process's
		f.mu.Unlock()
		for id := range lost {
			f.exitError(id, p.status())
		}
		if polled {
			backoff = 100 * time.Millisecond
		} else {
			backoff = min(2*backoff, 5*time.Second)
		}
		f.log.Warn("bootstrap exited; restarting it", "function", f.Spec.Name, "pid", p.cmd.Process.Pid, "status", p.status(), "restart", n, "after", backoff.String())
		select {
		case <-f.stop:
			return
		case <-time.After(backoff):
		}
		next, err := f.start()
		for err != nil {
			f.log.Error("bootstrap did not start", "function", f.Spec.Name, "error", err.Error())
			select {
			case <-f.stop:
				return
			case <-time.After(5 * time.Second):
			}
			next, err = f.start()
		}
		p = next
	}
}

func (f *Supervised) kill(p *process) {
	_ = p.cmd.Process.Kill()
	<-p.done
}

// listen starts the proxy the bootstraps use as their Runtime API.
func (f *Supervised) listen() error {
	target, err := url.Parse(f.st.Endpoint)
	if err != nil {
		return err
	}
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.FlushInterval = -1
	rp.ErrorLog = stdlog.New(io.Discard, "", 0)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	f.addr = l.Addr().String()
	f.proxy = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/runtime/invocation/next") {
			f.next(w, r)
			return
		}
		if parts := strings.Split(r.URL.Path, "/"); len(parts) > 2 && parts[len(parts)-3] == "invocation" {
			f.mu.Lock()
			delete(f.inflight, parts[len(parts)-2]) // its response or error
			f.mu.Unlock()
		}
		rp.ServeHTTP(w, r)
	})}
	go func() { _ = f.proxy.Serve(l) }()
	return nil
}

// next answers a bootstrap's poll with the next invocation from kumo.
func (f *Supervised) next(w http.ResponseWriter, r *http.Request) {
	gen := f.onPoll() // the polling process is alive now
	f.mu.Lock()
	if !f.fetching {
		f.fetching = true
		go f.fetch(r.URL.Path)
	}
	f.mu.Unlock()
	select {
	case inv := <-f.arrived:
		f.mu.Lock()
		if r.Context().Err() != nil || f.gen != gen {
			// The process that polled is gone (its lost invocations already
			// collected): the invocation was not handed over, and the next
			// process gets it.
			f.mu.Unlock()
			go f.requeue(inv)
			return
		}
		// Registered under the lock that collects a dead process's
		// invocations: if this process dies now, this one fails with
		// Runtime.ExitError.
		f.inflight[inv.header.Get("Lambda-Runtime-Aws-Request-Id")] = time.Now()
		f.mu.Unlock()
		for k, v := range inv.header {
			w.Header()[k] = v
		}
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(inv.body)
	case <-r.Context().Done():
	}
}

// fetch polls kumo once and hands what it gets to a bootstrap's poll.
func (f *Supervised) fetch(path string) {
	defer func() {
		f.mu.Lock()
		f.fetching = false
		f.mu.Unlock()
	}()
	for f.fetchCtx.Err() == nil {
		req, _ := http.NewRequestWithContext(f.fetchCtx, http.MethodGet, f.st.Endpoint+path, nil)
		resp, err := http.DefaultClient.Do(req)
		var body []byte
		if err == nil {
			body, err = io.ReadAll(resp.Body)
			resp.Body.Close()
			if err == nil && resp.StatusCode != http.StatusOK {
				err = fmt.Errorf("next invocation: %s", resp.Status)
			}
		}
		if err != nil { // wait a little before asking again: no busy loop
			select {
			case <-f.fetchCtx.Done():
			case <-time.After(100 * time.Millisecond):
			}
			continue
		}
		f.mu.Lock()
		f.fetching = false
		f.mu.Unlock()
		f.requeue(invocation{header: resp.Header.Clone(), body: body})
		return
	}
}

func (f *Supervised) requeue(inv invocation) {
	select {
	case f.arrived <- inv:
	case <-f.fetchCtx.Done():
	}
}

// exitError fails an invocation whose process exited before it answered,
// as Lambda does.
func (f *Supervised) exitError(id, status string) {
	f.log.Warn("the bootstrap exited during an invocation; it fails with Runtime.ExitError", "function", f.Spec.Name, "request_id", id)
	f.failInvocation(id, fmt.Sprintf(`{"errorType":"Runtime.ExitError","errorMessage":"RequestId: %s Error: Runtime exited with error: %s"}`, id, status))
}

// failInvocation posts body as the error of invocation id.
func (f *Supervised) failInvocation(id, body string) {
	u := f.st.Endpoint + "/_runtime/" + f.Spec.Name + "/2018-06-01/runtime/invocation/" + id + "/error"
	resp, err := http.Post(u, "application/json", strings.NewReader(body))
	if err != nil {
		f.log.Error("could not fail the invocation", "function", f.Spec.Name, "request_id", id, "error", err.Error())
		return
	}
	resp.Body.Close()
}

// PID is the process id of the current bootstrap.
func (f *Supervised) PID() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.cmd.Process.Pid
}

// Restarts is how many times the bootstrap has exited and been restarted.
func (f *Supervised) Restarts() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.restarts
}

// WaitPolled waits until the current bootstrap has polled for an invocation.
func (f *Supervised) WaitPolled(ctx context.Context) error {
	for {
		f.mu.Lock()
		polled, ch := f.polled, f.pollCh
		f.mu.Unlock()
		if polled {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Close stops the bootstrap (no restart) and its proxy: it lets the
// invocations in flight finish (up to StopGrace), then sends the process
// group SIGTERM and, after TermGrace, SIGKILL (see shutdown).
func (f *Supervised) Close() {
	select {
	case <-f.stop:
		return
	default:
	}
	close(f.stop)
	<-f.exited
	f.cancel()
	_ = f.proxy.Close()
	f.log.Info("bootstrap stopped", "function", f.Spec.Name)
}

// PrefixWriter writes whole lines to w, each prefixed, so that lines of
// several processes sharing w stay apart and say whose they are. A last
// line without a newline is held until the next write completes it.
type PrefixWriter struct {
	mu     sync.Mutex
	w      io.Writer
	prefix []byte
	buf    []byte
}

// NewPrefixWriter returns a PrefixWriter on w.
func NewPrefixWriter(w io.Writer, prefix string) *PrefixWriter {
	return &PrefixWriter{w: w, prefix: []byte(prefix)}
}

func (p *PrefixWriter) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.buf = append(p.buf, b...)
	var out []byte
	for {
		i := bytes.IndexByte(p.buf, '\n')
		if i < 0 {
			break
		}
		out = append(append(out, p.prefix...), p.buf[:i+1]...)
		p.buf = p.buf[i+1:]
	}
	if len(out) > 0 {
		if _, err := p.w.Write(out); err != nil {
			return len(b), err
		}
	}
	return len(b), nil
}

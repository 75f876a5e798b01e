package lambdatest

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os/exec"
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
		stop: make(chan struct{}), exited: make(chan struct{}), pollCh: make(chan struct{})}
	var err error
	f.proxy, f.addr, err = runtimeProxy(st.Endpoint, f.onPoll)
	if err != nil {
		return nil, err
	}
	first, err := f.start()
	if err != nil {
		f.proxy.Close()
		return nil, err
	}
	select {
	case <-f.pollCh:
	case <-first.done:
		f.proxy.Close()
		return nil, fmt.Errorf("%s: bootstrap exited before its first poll: %s", s.Name, first.status())
	case <-time.After(30 * time.Second):
		f.kill(first)
		f.proxy.Close()
		return nil, fmt.Errorf("%s: bootstrap did not poll within 30s", s.Name)
	case <-ctx.Done():
		f.kill(first)
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
	f.cmd, f.polled = cmd, false
	f.mu.Unlock()
	f.log.Info("bootstrap started", "function", f.Spec.Name, "pid", cmd.Process.Pid)
	return p, nil
}

func (f *Supervised) onPoll() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.polled {
		f.polled = true
		close(f.pollCh)
		f.pollCh = make(chan struct{})
	}
}

// watch restarts the bootstrap each time it exits, until Close; a process
// that exits before it polls waits longer before the next start (up to 5 s).
func (f *Supervised) watch(p *process) {
	defer close(f.exited)
	backoff := 100 * time.Millisecond
	for {
		select {
		case <-f.stop:
			f.kill(p)
			return
		case <-p.done:
		}
		f.mu.Lock()
		f.restarts++
		n, polled := f.restarts, f.polled
		f.mu.Unlock()
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

// Close stops the bootstrap (no restart) and its proxy.
func (f *Supervised) Close() {
	select {
	case <-f.stop:
		return
	default:
	}
	close(f.stop)
	<-f.exited
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

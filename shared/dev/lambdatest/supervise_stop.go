package lambdatest

import (
	"fmt"
	"syscall"
	"time"
)

// How a supervised bootstrap is stopped, and when a hung one is killed.
const (
	// StopGrace is how long Close lets the invocations in flight finish
	// before it stops the bootstrap.
	StopGrace = 30 * time.Second
	// TermGrace is how long a bootstrap has to exit after SIGTERM before
	// it is sent SIGKILL.
	TermGrace = 2 * time.Second
	// TimeoutGrace is how long past the function's timeout an invocation
	// may run before its bootstrap is killed and restarted (kumo has
	// already answered the caller with the timeout error by then).
	TimeoutGrace = 5 * time.Second
)

// timeoutCheck is how often watch looks for invocations past their timeout.
const timeoutCheck = time.Second

// InFlight is how many invocations the current bootstrap has taken and not
// answered.
func (f *Supervised) InFlight() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.inflight)
}

// signal sends sig to p's process group (each bootstrap leads its own: see
// command), so a terminal's Ctrl-C reaches dlqlocal alone and its children
// are stopped in order.
func signal(p *process, sig syscall.Signal) {
	select {
	case <-p.done:
		return // reaped: its pid (and group id) may be another's by now
	default:
	}
	if err := syscall.Kill(-p.cmd.Process.Pid, sig); err != nil {
		_ = p.cmd.Process.Signal(sig)
	}
}

// shutdown stops p for Close: it waits until no invocation is in flight
// (at most StopGrace), then sends SIGTERM, and SIGKILL after TermGrace. An
// invocation still in flight when p has exited fails with
// Runtime.ExitError, so its caller is answered at once.
func (f *Supervised) shutdown(p *process) {
	if n := f.InFlight(); n > 0 {
		f.log.Info("stopping the bootstrap once its invocations in flight finish", "function", f.Spec.Name, "in_flight", n, "grace", StopGrace.String())
	}
	grace := time.NewTimer(StopGrace)
	defer grace.Stop()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for waiting := true; waiting && f.InFlight() > 0; {
		select {
		case <-p.done:
			waiting = false
		case <-grace.C:
			f.log.Warn("invocations still in flight after the stop grace; stopping the bootstrap", "function", f.Spec.Name, "in_flight", f.InFlight(), "grace", StopGrace.String())
			waiting = false
		case <-tick.C:
		}
	}
	signal(p, syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(TermGrace):
		signal(p, syscall.SIGKILL)
		<-p.done
	}
	f.log.Info("bootstrap exited on stop", "function", f.Spec.Name, "pid", p.cmd.Process.Pid, "status", p.status())
	f.mu.Lock()
	lost := f.inflight
	f.inflight = map[string]time.Time{}
	f.gen++
	f.mu.Unlock()
	for id := range lost {
		f.exitError(id, p.status())
	}
}

// killTimedOut kills p when an invocation it holds has run past the
// function's timeout plus TimeoutGrace, failing that invocation with
// Lambda's timeout error; watch then restarts the bootstrap, and the
// process's other invocations fail with Runtime.ExitError.
func (f *Supervised) killTimedOut(p *process) {
	timeout := f.Spec.Timeout
	if timeout <= 0 {
		timeout = 3 * time.Second // Lambda's default, as kumo's
	}
	var late []string
	f.mu.Lock()
	for id, at := range f.inflight {
		if time.Since(at) > timeout+TimeoutGrace {
			late = append(late, id)
			delete(f.inflight, id)
		}
	}
	f.mu.Unlock()
	if len(late) == 0 {
		return
	}
	signal(p, syscall.SIGKILL)
	for _, id := range late {
		f.log.Warn("the invocation ran past the function's timeout; the bootstrap is killed and restarted", "function", f.Spec.Name, "request_id", id, "timeout", timeout.String())
		f.failInvocation(id, fmt.Sprintf(`{"errorType":"Sandbox.Timedout","errorMessage":"RequestId: %s Error: Task timed out after %.2f seconds"}`, id, timeout.Seconds()))
	}
}

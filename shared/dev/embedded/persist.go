package embedded

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
	_ "unsafe" // go:linkname, for kumo's snapshot flush
)

// Persistence across restarts. kumo keeps each service's state in a JSON
// snapshot under KUMO_DATA_DIR, which every kumo service reads once, in its
// package init: the variable has to be in the process's environment when it
// starts (see Reexec). kumo writes snapshots from a debounced background
// loop (every KUMO_PERSIST_FLUSH_INTERVAL_MS, 1 s by default) and
// synchronously only from its own server's Shutdown, which the in-process
// kumo.Server does not expose: its Close stops the HTTP server and saves
// nothing. So a persistent stack turns kumo's loop off (PersistEnviron sets
// an interval of decades) and flushes the snapshots itself: every
// FlushInterval while it runs, and once more in Close, after the callers
// have stopped, so a write answered before Close survives. A hard crash
// (kill -9) loses at most the last FlushInterval of kumo writes; besides,
// kumo's SQS snapshot holds only queued messages, never the ones in flight
// (received and not deleted, or released with visibility 0 and not
// received again), which every restart loses (see InFlight).
// versitygw writes every object to DataDir/s3 before it answers.

// The variables kumo reads; PersistEnviron sets both.
const (
	kumoDataDirEnv  = "KUMO_DATA_DIR"
	kumoIntervalEnv = "KUMO_PERSIST_FLUSH_INTERVAL_MS"
	// kumoNoLoop is an interval (ms) at which kumo's own loop never fires.
	kumoNoLoop = "1000000000000"
)

// FlushInterval is how often a persistent stack writes kumo's snapshots.
const FlushInterval = time.Second

// flushEvery is FlushInterval; tests lengthen it to see Close's flush alone.
var flushEvery = FlushInterval

// kumoDataDirAtStart is what kumo's services read at init (package
// variables are initialised after the imported packages' init).
var kumoDataDirAtStart, kumoIntervalAtStart = os.Getenv(kumoDataDirEnv), os.Getenv(kumoIntervalEnv)

//go:linkname kumoFlushSnapshots github.com/sivchari/kumo/internal/storage.FlushSnapshots
func kumoFlushSnapshots()

// flushMu serialises the flushes: with kumo's loop off they are the only
// writers of the snapshot files.
var flushMu sync.Mutex

func flushKumo() {
	flushMu.Lock()
	defer flushMu.Unlock()
	kumoFlushSnapshots()
	if f := dlqSources.Load(); f != nil {
		_ = f.save() // best effort, as kumo's own snapshots: retried at the next flush
	}
}

// KumoDataDir is where kumo keeps its snapshots for a stack whose DataDir is dir.
func KumoDataDir(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("data dir %s: %w", dir, err)
	}
	return filepath.Join(abs, "kumo"), nil
}

// PersistEnviron is what a process must start with for Start to keep its
// state in dir (Options.DataDir).
func PersistEnviron(dir string) ([]string, error) {
	kd, err := KumoDataDir(dir)
	if err != nil {
		return nil, err
	}
	return []string{kumoDataDirEnv + "=" + kd, kumoIntervalEnv + "=" + kumoNoLoop}, nil
}

// persistReady says why this process cannot persist into dir, or nil.
func persistReady(dir string) error {
	kd, err := KumoDataDir(dir)
	if err != nil {
		return err
	}
	if kumoDataDirAtStart != kd || kumoIntervalAtStart != kumoNoLoop {
		return fmt.Errorf("data dir %s: this process started with %s=%q and %s=%q; it needs %q and %q (kumo reads them at start: see embedded.Reexec)",
			dir, kumoDataDirEnv, kumoDataDirAtStart, kumoIntervalEnv, kumoIntervalAtStart, kd, kumoNoLoop)
	}
	return nil
}

// Reexec makes the process able to persist into dir: when it did not start
// with PersistEnviron(dir), it replaces itself (same executable, same
// arguments, same pid) with one that does, and does not return on success.
// Call it first thing in main, before any goroutine or open file matters.
func Reexec(dir string) error {
	if persistReady(dir) == nil {
		return nil
	}
	add, err := PersistEnviron(dir)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("data dir: %w", err)
	}
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("re-exec with %s: %w", kumoDataDirEnv, err)
	}
	env := make([]string, 0, len(os.Environ())+len(add))
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, kumoDataDirEnv+"=") && !strings.HasPrefix(e, kumoIntervalEnv+"=") {
			env = append(env, e)
		}
	}
	if err := syscall.Exec(exe, os.Args, append(env, add...)); err != nil {
		return fmt.Errorf("re-exec %s with %s: %w", exe, kumoDataDirEnv, err)
	}
	return nil
}

// startFlusher writes kumo's snapshots every flushEvery; the returned stop
// ends the loop and writes them once more.
func startFlusher() (stop func()) {
	done, exited := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(exited)
		t := time.NewTicker(flushEvery)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				flushKumo()
			}
		}
	}()
	return func() {
		close(done)
		<-exited
		flushKumo()
	}
}

package embedded

import (
	"context"
	"fmt"
	"io"
	"time"
)

// versityGWNotice says what the first start of a stack waits for.
const versityGWNotice = "building versitygw (the S3 emulator, with Object Lock) through `go tool` from tools/go.mod: " +
	"the first run compiles it (minutes on a busy machine), later runs take it from the Go build cache …"

// buildVersityGW is VersityGWBinary, saying on progress (when not nil)
// what it builds if the build lasts more than a second, and that it is
// still at it every 30 seconds.
func buildVersityGW(ctx context.Context, progress io.Writer) (string, error) {
	var bin string
	err := slowly(progress, time.Second, 30*time.Second, versityGWNotice, "versitygw", func() (err error) {
		bin, err = VersityGWBinary(ctx)
		return err
	})
	return bin, err
}

// slowly runs f. When f is still running after after, it writes notice to
// w, then a "still building" line every every, and when f returns how long
// it took. w nil runs f silently.
func slowly(w io.Writer, after, every time.Duration, notice, what string, f func() error) error {
	if w == nil {
		return f()
	}
	start := time.Now()
	done := make(chan error, 1)
	go func() { done <- f() }()
	wait := time.NewTimer(after)
	defer wait.Stop()
	select {
	case err := <-done:
		return err
	case <-wait.C:
	}
	fmt.Fprintln(w, notice)
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case err := <-done:
			if err == nil {
				fmt.Fprintf(w, "%s built in %s\n", what, time.Since(start).Round(time.Second))
			}
			return err
		case <-tick.C:
			fmt.Fprintf(w, "  … still building %s (%s)\n", what, time.Since(start).Round(time.Second))
		}
	}
}

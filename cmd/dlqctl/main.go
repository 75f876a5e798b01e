// Command dlqctl is the operator CLI for DLQ Quarantine: ls, show, fix,
// buckets, verify, redrive, park, unpark, health and policy (add, ls, rm,
// resume); the commands are in internal/dlqctl and described in
// docs/dlqctl.md.
// Exit codes: 0 ok, 1 operation failed, 2 usage, 3 verification mismatch.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/dlqquarantine/dlqq/internal/dlqctl"
)

func main() {
	// The first interrupt or SIGTERM cancels the command, which then
	// removes what it wrote (verify's files under TMPDIR); a second one
	// ends the process at once.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		<-ctx.Done()
		stop()
	}()
	code := dlqctl.NewApp(os.Stdin, os.Stdout, os.Stderr).Main(ctx, os.Args[1:])
	stop()
	os.Exit(code)
}

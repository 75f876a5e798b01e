// Command dlqlocal runs DLQ Quarantine on the embedded AWS stack, with no AWS
// account and no Docker.
//
//	dlqlocal demo [-events N] [-seed S] [-log FILE]
//
// demo starts the stack from infra/template.yaml, plays the scenario, prints
// the report and exits 1 if any invariant was violated.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"

	"github.com/dlqquarantine/dlqq/shared/demo"
	"github.com/dlqquarantine/dlqq/shared/embedded"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] != "demo" {
		fmt.Fprintln(stderr, "usage: dlqlocal demo [-events N] [-seed S] [-log FILE]")
		return 2
	}
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	events := fs.Int("events", 3000, "inventory events to produce")
	seed := fs.Uint64("seed", 20261129, "generator seed")
	logPath := fs.String("log", "", "write the functions' JSON logs to this file")
	if err := fs.Parse(args[1:]); err != nil {
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()

	var logw io.Writer = io.Discard
	if *logPath != "" {
		f, err := os.Create(*logPath)
		if err != nil {
			fmt.Fprintln(stderr, err)
			return 1
		}
		defer f.Close()
		logw = f
	}
	fmt.Fprintln(stdout, "starting the embedded AWS stack (kumo + versitygw) from infra/template.yaml …")
	st, err := embedded.Start(ctx, embedded.Options{StackName: embedded.RandomName("demo"), Params: demo.StackParams, Log: logw})
	if err != nil {
		fmt.Fprintln(stderr, "embedded stack:", err)
		return 1
	}
	defer st.Close()
	fmt.Fprintf(stdout, "stack %s up: AWS endpoint %s, S3 endpoint %s\n", st.Env.StackName, st.Endpoint, st.S3Endpoint)
	fmt.Fprintf(stdout, "producing %d inventory events (seed %d) …\n", *events, *seed)
	rep, err := demo.Run(ctx, st, demo.Options{Seed: *seed, Events: *events, Log: logw})
	if err != nil {
		fmt.Fprintln(stderr, "demo:", err)
		return 1
	}
	rep.Print(stdout, 8)
	if !rep.OK() {
		fmt.Fprintln(stderr, "an invariant was violated")
		return 1
	}
	return 0
}

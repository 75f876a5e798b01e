package main

import (
	"context"
	"fmt"
	"io"

	"github.com/dlqquarantine/dlqq/shared/dev/capacity"
	"github.com/dlqquarantine/dlqq/shared/dev/embedded"
)

// runCapacity plays a storm of messages dead-lettered messages through
// the real ingest and ledger on the embedded stack and prints the
// projection of one table's sustained ingest (make capacity; its last
// line is "projected sustained ingest: N msgs/s per table (limited by …)").
func runCapacity(ctx context.Context, stdout, stderr, logw io.Writer, o capacity.Options) int {
	fmt.Fprintln(stderr, "starting the embedded AWS stack (kumo + versitygw) from infra/template.yaml …")
	st := startStack(ctx, stderr, embedded.Options{StackName: embedded.RandomName("capacity"), Log: logw, Progress: stderr})
	if st == nil {
		return 1
	}
	defer st.Close()
	o.Progress = stderr
	res, err := capacity.Run(ctx, st, o)
	if err != nil {
		fmt.Fprintln(stderr, "capacity:", err)
		return 1
	}
	capacity.Project(res).Print(stdout, res)
	return 0
}

package wire

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"runtime/debug"
	"strconv"

	"github.com/dlqquarantine/dlqq/shared/runtime/lambdalog"
)

// Init is a function's start in Lambda: it reads the configuration from
// the environment with load, wires the function with build on clients
// loaded from the environment, and returns it for lambda.Start. When
// either step fails it logs "<name> init failed" with the error and exits
// 1, so the runtime reports an init error and the function never serves.
func Init[C, F any](name string, load func(getenv func(string) string) (C, error), build func(context.Context, C, *Clients, Runtime) (F, error)) F {
	log := lambdalog.New(os.Stdout, slog.LevelInfo)
	if limit, ok := memoryLimit(os.Getenv); ok {
		debug.SetMemoryLimit(limit)
	}
	fn, err := initFunction(load, build, Runtime{Log: log, Metrics: os.Stdout}, os.Getenv)
	if err != nil {
		log.Error(name+" init failed", "error", err.Error())
		os.Exit(1)
	}
	return fn
}

// memoryShare is the share of the function's memory setting the Go
// runtime keeps its heap under (the rest: the runtime's own memory,
// goroutine stacks, and Lambda's share of the sandbox).
const memoryShare = 0.7

// memoryLimit is the Go runtime's soft memory limit for a function of
// AWS_LAMBDA_FUNCTION_MEMORY_SIZE MB (Lambda's MB are MiB): memoryShare of
// it, so that the garbage collector runs harder as the heap nears the
// setting instead of letting garbage take the sandbox past it (an
// out-of-memory kill retries the whole batch). No limit when GOMEMLIMIT is
// set (the runtime reads it) or the size is missing.
func memoryLimit(getenv func(string) string) (int64, bool) {
	if getenv("GOMEMLIMIT") != "" {
		return 0, false
	}
	mb, err := strconv.Atoi(getenv("AWS_LAMBDA_FUNCTION_MEMORY_SIZE"))
	if err != nil || mb <= 0 {
		return 0, false
	}
	return int64(float64(int64(mb)<<20) * memoryShare), true
}

func initFunction[C, F any](load func(func(string) string) (C, error), build func(context.Context, C, *Clients, Runtime) (F, error), rt Runtime, getenv func(string) string) (F, error) {
	cfg, err := load(getenv)
	if err != nil {
		var zero F
		return zero, fmt.Errorf("invalid configuration: %w", err)
	}
	return build(context.Background(), cfg, nil, rt)
}

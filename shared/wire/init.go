package wire

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	"github.com/dlqquarantine/dlqq/shared/runtime/lambdalog"
)

// Init is a function's start in Lambda: it reads the configuration from
// the environment with load, wires the function with build on clients
// loaded from the environment, and returns it for lambda.Start. When
// either step fails it logs "<name> init failed" with the error and exits
// 1, so the runtime reports an init error and the function never serves.
func Init[C, F any](name string, load func(getenv func(string) string) (C, error), build func(context.Context, C, *Clients, Runtime) (F, error)) F {
	log := lambdalog.New(os.Stdout, slog.LevelInfo)
	fn, err := initFunction(load, build, Runtime{Log: log, Metrics: os.Stdout}, os.Getenv)
	if err != nil {
		log.Error(name+" init failed", "error", err.Error())
		os.Exit(1)
	}
	return fn
}

func initFunction[C, F any](load func(func(string) string) (C, error), build func(context.Context, C, *Clients, Runtime) (F, error), rt Runtime, getenv func(string) string) (F, error) {
	cfg, err := load(getenv)
	if err != nil {
		var zero F
		return zero, fmt.Errorf("invalid configuration: %w", err)
	}
	return build(context.Background(), cfg, nil, rt)
}

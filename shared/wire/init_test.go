package wire

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/dlqquarantine/dlqq/shared/usecase/sweeper"
)

func TestInitRefusesAnInvalidConfiguration(t *testing.T) {
	env := map[string]string{"TABLE_NAME": "t", "PARK_AGE_SECONDS": "-3"}
	built := false
	_, err := initFunction(sweeper.ConfigFromEnv, func(context.Context, sweeper.FunctionConfig, *Clients, Runtime) (*sweeper.Service, error) {
		built = true
		return nil, nil
	}, Runtime{}, func(k string) string { return env[k] })
	if err == nil || !strings.HasPrefix(err.Error(), "invalid configuration: ") || !strings.Contains(err.Error(), "PARK_AGE_SECONDS") {
		t.Fatalf("err = %v, want an invalid configuration naming PARK_AGE_SECONDS", err)
	}
	if built {
		t.Fatal("a function was wired on an invalid configuration")
	}
}

func TestInitHandsTheConfigurationToTheWiring(t *testing.T) {
	env := map[string]string{"TABLE_NAME": "quarantine", "ARCHIVE_BUCKET": "archive", "ARCHIVE_KMS_KEY_ID": "alias/archive"}
	boom := errors.New("no clients")
	var got sweeper.FunctionConfig
	_, err := initFunction(sweeper.ConfigFromEnv, func(_ context.Context, cfg sweeper.FunctionConfig, c *Clients, _ Runtime) (*sweeper.Service, error) {
		if c != nil {
			t.Error("Init passed clients; a function in Lambda loads its own")
		}
		got = cfg
		return nil, boom
	}, Runtime{}, func(k string) string { return env[k] })
	if !errors.Is(err, boom) {
		t.Fatalf("err = %v, want the wiring's error", err)
	}
	if got.TableName != "quarantine" {
		t.Fatalf("wired with table %q, want the environment's", got.TableName)
	}
}

// The Go heap is kept under 70 % of the function's memory setting, unless
// GOMEMLIMIT says otherwise or the setting is missing or nonsense.
func TestMemoryLimitFollowsTheFunctionsMemory(t *testing.T) {
	env := func(kv ...string) func(string) string {
		return func(k string) string {
			for i := 0; i+1 < len(kv); i += 2 {
				if kv[i] == k {
					return kv[i+1]
				}
			}
			return ""
		}
	}
	if limit, ok := memoryLimit(env("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "256")); !ok || limit != 256<<20*7/10 {
		t.Fatalf("256 MB: %d %v", limit, ok)
	}
	for _, e := range []func(string) string{
		env("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "256", "GOMEMLIMIT", "100MiB"),
		env(),
		env("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "lots"),
		env("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "-5"),
	} {
		if limit, ok := memoryLimit(e); ok {
			t.Errorf("limit %d set", limit)
		}
	}
}

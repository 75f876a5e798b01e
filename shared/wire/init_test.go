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

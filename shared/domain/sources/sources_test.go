package sources_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dlqquarantine/dlqq/shared/domain/sources"
)

const arn = "arn:aws:sqs:us-east-1:123456789012:"

func TestValidateAcceptsSourcesSharingOneDLQ(t *testing.T) {
	t.Parallel()
	cfg := map[string]sources.Config{
		"orders":         {ARN: arn + "orders", DLQ: "shared-dlq"},
		"refunds":        {ARN: arn + "refunds", DLQ: "shared-dlq"},
		"movements.fifo": {ARN: arn + "movements.fifo", DLQ: "shared-dlq.fifo"},
		"lots.fifo":      {ARN: arn + "lots.fifo", DLQ: "shared-dlq.fifo"},
	}
	if err := sources.Validate(cfg); err != nil {
		t.Fatalf("sources sharing a DLQ refused: %v", err)
	}
}

func TestValidateRefusesWhatSQSRefuses(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		cfg  sources.Config
		want string
	}{
		{"fifo", sources.Config{ARN: arn + "fifo", DLQ: "d"}, ""},
		{"a.fifo", sources.Config{ARN: arn + "a.fifo", DLQ: "standard-dlq"}, "not of its type"},
		{"std", sources.Config{ARN: arn + "std", DLQ: "d.fifo"}, "not of its type"},
		{"dots.in.name", sources.Config{ARN: arn + "dots.in.name", DLQ: "d"}, "not a queue name"},
		{strings.Repeat("x", 81), sources.Config{ARN: arn + strings.Repeat("x", 81), DLQ: "d"}, "not a queue name"},
		{strings.Repeat("x", 76) + ".fifo", sources.Config{ARN: arn + strings.Repeat("x", 76) + ".fifo", DLQ: "d.fifo"}, "not a queue name"},
		{strings.Repeat("x", 80), sources.Config{ARN: arn + strings.Repeat("x", 80), DLQ: "d"}, ""},
		{"noarn", sources.Config{DLQ: "d"}, "arn is required"},
		{"other", sources.Config{ARN: arn + "another", DLQ: "d"}, "is not the ARN of queue"},
		{"shortacct", sources.Config{ARN: "arn:aws:sqs:us-east-1:12345:shortacct", DLQ: "d"}, "is not the ARN of queue"},
		{"baddlq", sources.Config{ARN: arn + "baddlq", DLQ: "d#x"}, "is not a queue name"},
		{"slow", sources.Config{ARN: arn + "slow", DLQ: "d", SettleWindowSeconds: sources.MaxSettleWindowSeconds}, ""},
		{"slower", sources.Config{ARN: arn + "slower", DLQ: "d", SettleWindowSeconds: sources.MaxSettleWindowSeconds + 1}, "settle_window_seconds must be 0 to"},
		{"negative", sources.Config{ARN: arn + "negative", DLQ: "d", SettleWindowSeconds: -1}, "settle_window_seconds must be 0 to"},
	} {
		err := sources.Validate(map[string]sources.Config{tc.name: tc.cfg})
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%q refused: %v", tc.name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%q: error %v, want one saying %q", tc.name, err, tc.want)
		}
	}
}

// A source whose schema is a file shipped with the deployment: a relative
// path is read from SCHEMA_DIR (else the Lambda task root), so that a new
// source's schema needs no code change.
func TestSchemaFileFromTheSchemaDir(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "schemas"), 0o755); err != nil {
		t.Fatal(err)
	}
	schema := `{"type":"object","required":["order_id"],"properties":{"order_id":{"type":"string"}}}`
	if err := os.WriteFile(filepath.Join(dir, "schemas", "orders.v2.json"), []byte(schema), 0o600); err != nil {
		t.Fatal(err)
	}
	raw := `{"orders":{"arn":"` + arn + `orders","dlq":"orders-dlq","schema":"schemas/orders.v2.json"},` +
		`"lots":{"arn":"` + arn + `lots","dlq":"orders-dlq","schema":"inventory-movement.v1"}}`
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

	if _, err := sources.ParseRequiredIn(raw, ""); err == nil {
		t.Fatal("a schema file outside the working directory was found without a schema dir")
	}
	for _, getenv := range []func(string) string{
		env(map[string]string{"SCHEMA_DIR": dir, "LAMBDA_TASK_ROOT": "/nonexistent"}),
		env(map[string]string{"LAMBDA_TASK_ROOT": dir}),
	} {
		cfg, err := sources.ParseRequiredIn(raw, sources.SchemaDir(getenv))
		if err != nil {
			t.Fatalf("schema file refused: %v", err)
		}
		built, err := sources.Build(cfg)
		if err != nil {
			t.Fatal(err)
		}
		o := built["orders"]
		if o.Schema == nil || o.SchemaVersion != "v2" {
			t.Fatalf("orders schema %v version %q", o.Schema, o.SchemaVersion)
		}
		if v := o.Check([]byte(`{"order_id":"o-1"}`)); !v.Valid {
			t.Errorf("valid order refused: %s", v.Reason)
		}
		if v := o.Check([]byte(`{"order_id":7}`)); v.Valid {
			t.Error("invalid order passed the file's schema")
		}
		if built["lots"].SchemaVersion != "v1" {
			t.Errorf("the embedded schema was not kept: %q", built["lots"].SchemaVersion)
		}
	}
}

// A DLQ is no source: registered as one, the redrive role could send into
// it, and every replay would come back as a dead letter.
func TestValidateRefusesADLQAsASource(t *testing.T) {
	t.Parallel()
	err := sources.Validate(map[string]sources.Config{
		"orders":     {ARN: arn + "orders", DLQ: "orders-dlq"},
		"orders-dlq": {ARN: arn + "orders-dlq", DLQ: "other-dlq"},
	})
	if err == nil || !strings.Contains(err.Error(), `source "orders-dlq" is the dlq of source "orders"`) {
		t.Fatalf("Validate = %v", err)
	}
}

// A queue of another account named like a source's DLQ is a source like
// any other: a DLQ is in its source's account and Region.
func TestValidateTakesASourceNamedLikeADLQElsewhere(t *testing.T) {
	t.Parallel()
	if err := sources.Validate(map[string]sources.Config{
		"billing": {ARN: arn + "billing", DLQ: "events"},
		"events":  {ARN: "arn:aws:sqs:us-east-1:222222222222:events", DLQ: "events-dlq"},
	}); err != nil {
		t.Fatalf("Validate = %v", err)
	}
}

// A source's settle window reaches the source the functions build.
func TestBuildTakesTheSettleWindow(t *testing.T) {
	t.Parallel()
	got, err := sources.Build(map[string]sources.Config{"slow": {ARN: arn + "slow", DLQ: "d", SettleWindowSeconds: 7200}, "plain": {ARN: arn + "plain", DLQ: "d"}})
	if err != nil || got["slow"].SettleWindow != 2*time.Hour || got["plain"].SettleWindow != 0 {
		t.Fatalf("Build = %+v, %+v, %v", got["slow"], got["plain"], err)
	}
}

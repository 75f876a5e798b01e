package ledger

import (
	"maps"
	"strings"
	"testing"

	dl "github.com/dlqquarantine/dlqq/shared/domain/ledger"
)

const (
	ingestKey  = "arn:aws:kms:us-east-1:000000000000:key/11111111-1111-1111-1111-111111111111"
	redriveKey = "arn:aws:kms:us-east-1:000000000000:key/22222222-2222-2222-2222-222222222222"
	sweeperKey = "arn:aws:kms:us-east-1:000000000000:key/33333333-3333-3333-3333-333333333333"
)

// The digest function reads the three writer keys (all or none, each a
// key ARN, no two alike) and every digest it signs records them.
func TestWriterKeysFromEnvAreRecordedInTheDigest(t *testing.T) {
	t.Parallel()
	base := map[string]string{"TABLE_NAME": "q", "LEDGER_BUCKET": "b", "SIGNING_KEY_ID": "alias/k", "STREAM_ARN": streamARN, "LEDGER_RETENTION_DAYS": "30",
		"STREAM_FUNCTION_NAME": "prod-ledger", "AWS_LAMBDA_FUNCTION_NAME": "prod-digest"}
	with := func(extra map[string]string) (FunctionConfig, error) {
		env := maps.Clone(base)
		maps.Copy(env, extra)
		return DigestConfigFromEnv(func(k string) string { return env[k] })
	}
	all := map[string]string{"INGEST_WRITER_KEY_ARN": ingestKey, "REDRIVE_WRITER_KEY_ARN": redriveKey, "SWEEPER_WRITER_KEY_ARN": sweeperKey}
	cfg, err := with(all)
	want := map[string]string{"ingest": ingestKey, "redrive": redriveKey, "sweeper": sweeperKey}
	if err != nil || !maps.Equal(cfg.Ledger.WriterKeys, want) {
		t.Fatalf("writer keys %v, %v; want %v", cfg.Ledger.WriterKeys, err, want)
	}
	if cfg, err := with(nil); err != nil || cfg.Ledger.WriterKeys != nil {
		t.Fatalf("no writer keys: %v, %v", cfg.Ledger.WriterKeys, err)
	}
	for name, bad := range map[string]map[string]string{
		"SWEEPER_WRITER_KEY_ARN": {"INGEST_WRITER_KEY_ARN": ingestKey, "REDRIVE_WRITER_KEY_ARN": redriveKey},
		"REDRIVE_WRITER_KEY_ARN": {"INGEST_WRITER_KEY_ARN": ingestKey, "REDRIVE_WRITER_KEY_ARN": "alias/x", "SWEEPER_WRITER_KEY_ARN": sweeperKey},
		"INGEST_WRITER_KEY_ARN":  {"INGEST_WRITER_KEY_ARN": ingestKey, "REDRIVE_WRITER_KEY_ARN": redriveKey, "SWEEPER_WRITER_KEY_ARN": ingestKey},
	} {
		if _, err := with(bad); err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%v: error %v does not name %s", bad, err, name)
		}
	}

	s := newStream()
	s.many("shard-1", 2)
	r := newRig(t, "shard-1")
	r.svc.Config.WriterKeys = want
	r.handle(batch("shard-1", s.recs["shard-1"]))
	if rep := r.digest(); !rep.Written {
		t.Fatalf("report %+v", rep)
	}
	d, err := dl.ParseDigest(r.objects.under(dl.DigestPrefix)[dl.DigestKey(1)])
	if err != nil || !maps.Equal(d.WriterKeys, want) {
		t.Fatalf("digest 1 records writer keys %v (%v), want %v", d.WriterKeys, err, want)
	}
	if err := dl.VerifyDigest(d, r.signer.der); err != nil {
		t.Fatalf("digest with writer keys does not verify: %v", err)
	}
}

package dlqctl_test

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	lambdatypes "github.com/aws/aws-sdk-go-v2/service/lambda/types"

	"github.com/dlqquarantine/dlqq/internal/dlqctl"
	"github.com/dlqquarantine/dlqq/shared/adapter/dynamostore"
	"github.com/dlqquarantine/dlqq/shared/adapter/s3store"
	"github.com/dlqquarantine/dlqq/shared/dev/embedded"
	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
	"github.com/dlqquarantine/dlqq/shared/domain/sources"
	"github.com/dlqquarantine/dlqq/shared/runtime/clock"
	"github.com/dlqquarantine/dlqq/shared/usecase/ingest"
)

// lotsSchema puts a pattern on lot and a minimum on qty: the validator's
// messages for both quote the payload's value.
const lotsSchema = `{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "type": "object",
  "required": ["event_id", "lot", "qty"],
  "properties": {
    "event_id": {"type": "string"},
    "lot": {"type": "string", "pattern": "^L[0-9]+$"},
    "qty": {"type": "integer", "minimum": 1},
    "note": {"type": "string"}
  }
}`

// createConfiguredFunction creates a function in kumo (it runs nothing)
// whose configuration holds env, as a deployed redrive function's does.
func createConfiguredFunction(t *testing.T, st *embedded.Stack, env map[string]string) string {
	t.Helper()
	var zbuf bytes.Buffer
	zw := zip.NewWriter(&zbuf)
	w, _ := zw.Create("bootstrap")
	_, _ = w.Write([]byte("#!/bin/sh\n"))
	_ = zw.Close()
	name := embedded.RandomName("redrive")
	if _, err := lambda.NewFromConfig(st.AWS).CreateFunction(context.Background(), &lambda.CreateFunctionInput{
		FunctionName: aws.String(name), Runtime: lambdatypes.RuntimeProvidedal2023, Handler: aws.String("bootstrap"),
		Role: aws.String("arn:aws:iam::000000000000:role/" + name), Code: &lambdatypes.FunctionCode{ZipFile: zbuf.Bytes()},
		Environment: &lambdatypes.Environment{Variables: env},
	}); err != nil {
		t.Fatal(err)
	}
	return name
}

// show prints a failure detail without payload values: a pattern's and a
// minimum's failing values (which the validator's message quotes) appear
// neither in the text nor in -o json, which name the property, the pattern
// and the bound. With --payload (the read recorded) the validator's words
// are shown. A body in S3, or a schema not found, withholds the detail.
func TestShowTheFailureDetailWithoutPayloadValues(t *testing.T) {
	ctx := context.Background()
	st := embedded.ForTest(t, embedded.Options{})
	dir := t.TempDir()
	schemaV2 := filepath.Join(dir, "lots.v2.json")
	schemaV3 := filepath.Join(dir, "lots.v3.json")
	for _, p := range []string{schemaV2, schemaV3} {
		if err := os.WriteFile(p, []byte(lotsSchema), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	srcJSON := func(schema string) string {
		b, _ := json.Marshal(map[string]sources.Config{"lots": {ARN: "arn:aws:sqs:us-east-1:000000000000:lots", DLQ: "lots-dlq", IdempotencyPointer: "/event_id", Schema: schema}})
		return string(b)
	}
	cfg, err := sources.Parse(srcJSON(schemaV2))
	if err != nil {
		t.Fatal(err)
	}
	srcs, err := sources.Build(cfg)
	if err != nil {
		t.Fatal(err)
	}
	store := dynamostore.New(st.Clients.DynamoDB, st.Names["QuarantineTable"])
	payloads := s3store.New(st.Clients.S3, st.Names["PayloadBucket"], "")
	f := &fixture{st: st, store: store, clock: clock.NewFake(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)), ids: map[string]string{}}
	add := func(inlineMax int, msgID, body string) *quarantine.Record {
		q := ingest.NewQuarantiner(store, payloads, f.clock.Now, ingest.QuarantinerConfig{Sources: srcs, BodyInlineMax: inlineMax})
		out, err := q.Quarantine(ctx, ingest.Message{MessageID: msgID, SourceARN: srcs["lots"].ARN, Body: []byte(body)})
		if err != nil {
			t.Fatal(err)
		}
		return out.Record
	}
	r := add(0, "m1", `{"event_id":"e1","lot":"SECRET-LOT-42","qty":-987654}`)
	if !strings.Contains(r.FailureDetail, "SECRET-LOT-42") || !strings.Contains(r.FailureDetail, "-987,654") {
		t.Fatalf("the test needs a detail that quotes the values: %q", r.FailureDetail)
	}
	big := add(100, "m2", `{"event_id":"e2","lot":"SECRET-LOT-42","qty":3,"note":"`+strings.Repeat("n", 200)+`"}`)
	if big.BodyRef == nil || big.FailureDetail == "" {
		t.Fatalf("want a claim-checked body with a detail: %+v", big.BodyRef)
	}
	fn := createConfiguredFunction(t, st, map[string]string{"SOURCES": srcJSON(schemaV2)})
	secrets := func(what, out string) {
		t.Helper()
		if strings.Contains(out, "SECRET-LOT-42") || strings.Contains(out, "987654") || strings.Contains(out, "987,654") {
			t.Fatalf("%s prints a payload value:\n%s", what, out)
		}
	}
	wantLines := []string{"/lot: pattern: does not match ^L[0-9]+$", "/qty: minimum: below the minimum 1"}

	// Text, the schema found through the redrive function's SOURCES.
	out, errOut, code := f.run(t, "--function", fn, "show", r.DLQID)
	secrets("show", out)
	if code != 0 || !strings.Contains(out, "\nfailure detail:\n  "+wantLines[0]+"\n  "+wantLines[1]+"\n") {
		t.Fatalf("show (exit %d) lacks the value-free detail:\n%s%s", code, out, errOut)
	}
	// JSON, the schema found through --sources: the record's failure_detail
	// is left out, the summary given.
	out, _, code = f.run(t, "show", r.DLQID, "--sources", srcJSON(schemaV2), "-o", "json")
	secrets("show -o json", out)
	var doc struct {
		Record        map[string]any `json:"record"`
		FailureDetail struct {
			Summary  []dlqctl.DetailLine `json:"summary"`
			Withheld string              `json:"withheld"`
		} `json:"failure_detail"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil || code != 0 {
		t.Fatalf("show -o json (exit %d): %v\n%s", code, err, out)
	}
	if _, ok := doc.Record["failure_detail"]; ok || len(doc.FailureDetail.Summary) != 2 ||
		doc.FailureDetail.Summary[0] != (dlqctl.DetailLine{Location: "/lot", Keyword: "pattern", Problem: "does not match ^L[0-9]+$"}) ||
		doc.FailureDetail.Summary[1].String() != wantLines[1] {
		t.Fatalf("show -o json: record.failure_detail present or the summary wrong:\n%s", out)
	}
	if rec, _ := store.Get(ctx, r.DLQID); rec.ReadCount != 0 {
		t.Fatalf("show without --payload recorded a read: %+v", rec.Reads)
	}

	// With --payload the validator's words, the read recorded first.
	out, _, code = f.run(t, "show", r.DLQID, "--payload")
	if code != 0 || !strings.Contains(out, "\nfailure detail (the validator's words; the read is recorded):\n") || !strings.Contains(out, "'SECRET-LOT-42' does not match pattern") {
		t.Fatalf("show --payload (exit %d) lacks the raw detail:\n%s", code, out)
	}
	out, _, _ = f.run(t, "show", r.DLQID, "--payload", "--sources", srcJSON(schemaV2), "-o", "json")
	doc.Record = nil
	if err := json.Unmarshal([]byte(out), &doc); err != nil || !strings.Contains(doc.Record["failure_detail"].(string), "SECRET-LOT-42") || len(doc.FailureDetail.Summary) != 2 {
		t.Fatalf("show --payload -o json lacks the raw detail or the summary: %v\n%s", err, out)
	}
	if rec, _ := store.Get(ctx, r.DLQID); rec.ReadCount != 2 || rec.Reads[0].Actor != "alice" || quarantine.Verify(rec) != nil {
		t.Fatalf("the payload reads were not recorded: %d %+v", rec.ReadCount, rec.Reads)
	}

	// Withheld: the body in S3; no sources (no such function); another
	// schema version now; each says why, none quotes the payload.
	for _, c := range []struct {
		args []string
		why  string
	}{
		{[]string{"show", big.DLQID, "--sources", srcJSON(schemaV2)}, "(the body is claim-checked in S3)"},
		{[]string{"--function", "no-such-function", "show", r.DLQID}, "give --sources or DLQQ_SOURCES"},
		{[]string{"show", r.DLQID, "--sources", srcJSON(schemaV3)}, "is now v3"},
		{[]string{"show", r.DLQID, "--sources", `{"other":{"dlq":"x"}}`}, "name no source lots"},
	} {
		out, errOut, code := f.run(t, c.args...)
		secrets(strings.Join(c.args, " "), out)
		if code != 0 || !strings.Contains(out, "\nfailure "+dlqctl.Withheld+" (") || !strings.Contains(out, c.why) {
			t.Fatalf("%v (exit %d): want the detail withheld, %q:\n%s%s", c.args, code, c.why, out, errOut)
		}
		out, _, _ = f.run(t, append(c.args, "-o", "json")...)
		secrets(strings.Join(c.args, " ")+" -o json", out)
		if !strings.Contains(out, `"withheld": "`+dlqctl.Withheld+`"`) || strings.Contains(out, `"summary"`) {
			t.Fatalf("%v -o json: want the detail withheld:\n%s", c.args, out)
		}
	}
}

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

// inventorySchema is the embedded schema the test's source "lots" uses:
// its ndc pattern's message quotes the payload's value.
const inventorySchema = "inventory-movement.v1"

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

// show prints a failure detail without payload values: a pattern's failing
// value (which the validator's message quotes) appears neither in the text
// nor in -o json, which name the property, the pattern and the enum. With
// --payload (the read recorded) the validator's words are shown. The schema
// is named only by the redrive function's SOURCES and compiled only from
// those embedded in dlqctl: a schema file (one that could probe the values)
// withholds the detail, as do a body in S3, no sources, another version.
func TestShowTheFailureDetailWithoutPayloadValues(t *testing.T) {
	ctx := context.Background()
	st := embedded.ForTest(t, embedded.Options{})
	dir := t.TempDir()
	// A copy of the embedded schema at another version, as a file: records
	// it fails record v0.
	raw, err := os.ReadFile("../../shared/domain/schemas/" + inventorySchema + ".json")
	if err != nil {
		t.Fatal(err)
	}
	schemaV0 := filepath.Join(dir, "inventory-movement.v0.json")
	// A probe at the record's version: it fails as the record did (at
	// /ndc, pattern) unless ndc starts with the guess. Compiled, a detail
	// shown or withheld would say whether the guess is right, with no
	// audited read.
	probe := filepath.Join(dir, "probe.v1.json")
	for p, body := range map[string]string{schemaV0: string(raw), probe: `{"type":"object","properties":{"ndc":{"pattern":"^GUESS"}}}`} {
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	srcJSON := func(schema string) string {
		b, _ := json.Marshal(map[string]sources.Config{"lots": {ARN: "arn:aws:sqs:us-east-1:000000000000:lots", DLQ: "lots-dlq", IdempotencyPointer: "/event_id", Schema: schema}})
		return string(b)
	}
	build := func(schema string) map[string]*quarantine.Source {
		cfg, err := sources.Parse(srcJSON(schema))
		if err != nil {
			t.Fatal(err)
		}
		srcs, err := sources.Build(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return srcs
	}
	store := dynamostore.New(st.Clients.DynamoDB, st.Names["QuarantineTable"])
	payloads := s3store.New(st.Clients.S3, st.Names["PayloadBucket"], "")
	f := &fixture{st: st, store: store, clock: clock.NewFake(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)), ids: map[string]string{}}
	add := func(schema string, inlineMax int, msgID, body string) *quarantine.Record {
		srcs := build(schema)
		q := ingest.NewQuarantiner(store, payloads, f.clock.Now, ingest.QuarantinerConfig{Sources: srcs, BodyInlineMax: inlineMax})
		out, err := q.Quarantine(ctx, ingest.Message{MessageID: msgID, SourceARN: srcs["lots"].ARN, Body: []byte(body)})
		if err != nil {
			t.Fatal(err)
		}
		return out.Record
	}
	body := func(id, note string) string {
		return `{"event_id":"` + id + `","ndc":"SECRET-NDC-42","lot":"L1","quantity_delta":1,"schedule":"SECRETSCHED","facility":"F","occurred_at":"2026-11-29T09:00:00Z"` + note + `}`
	}
	r := add(inventorySchema, 0, "m1", body("e1", ""))
	if !strings.Contains(r.FailureDetail, "SECRET-NDC-42") || r.SchemaVersion != "v1" {
		t.Fatalf("the test needs a v1 detail that quotes the value: %s %q", r.SchemaVersion, r.FailureDetail)
	}
	big := add(inventorySchema, 100, "m2", body("e2", `,"note":"`+strings.Repeat("n", 200)+`"`))
	if big.BodyRef == nil || big.FailureDetail == "" {
		t.Fatalf("want a claim-checked body with a detail: %+v", big.BodyRef)
	}
	old := add(schemaV0, 0, "m3", body("e3", ""))
	if old.SchemaVersion != "v0" || old.FailureDetail == "" {
		t.Fatalf("want a v0 record with a detail: %s", old.SchemaVersion)
	}
	fn := createConfiguredFunction(t, st, map[string]string{"SOURCES": srcJSON(inventorySchema)})
	probeFn := createConfiguredFunction(t, st, map[string]string{"SOURCES": srcJSON(probe)})
	otherFn := createConfiguredFunction(t, st, map[string]string{"SOURCES": `{"other":{"dlq":"x"}}`})
	secrets := func(what, out string) {
		t.Helper()
		if strings.Contains(out, "SECRET-NDC-42") || strings.Contains(out, "SECRETSCHED") {
			t.Fatalf("%s prints a payload value:\n%s", what, out)
		}
	}
	wantLines := []string{`/ndc: pattern: does not match ^[0-9]{4,5}-[0-9]{3,4}-[0-9]{1,2}$`, `/schedule: enum: not one of "CII", "CIII", "CIV", "CV"`}

	// Text, the schema named by the redrive function's SOURCES. The
	// DLQQ_SOURCES of old is not read, and --sources is gone.
	t.Setenv("DLQQ_SOURCES", srcJSON(probe))
	out, errOut, code := f.run(t, "--function", fn, "show", r.DLQID)
	secrets("show", out)
	if code != 0 || !strings.Contains(out, "\nfailure detail:\n  "+wantLines[0]+"\n  "+wantLines[1]+"\n") {
		t.Fatalf("show (exit %d) lacks the value-free detail:\n%s%s", code, out, errOut)
	}
	if _, errOut, code := f.run(t, "--function", fn, "show", r.DLQID, "--sources", srcJSON(probe)); code != dlqctl.ExitUsage || !strings.Contains(errOut, "unknown flag --sources") {
		t.Fatalf("show --sources (exit %d): %s", code, errOut)
	}
	// JSON: the record's failure_detail is left out, the summary given.
	out, _, code = f.run(t, "--function", fn, "show", r.DLQID, "-o", "json")
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
		doc.FailureDetail.Summary[0] != (dlqctl.DetailLine{Location: "/ndc", Keyword: "pattern", Problem: "does not match ^[0-9]{4,5}-[0-9]{3,4}-[0-9]{1,2}$"}) ||
		doc.FailureDetail.Summary[1].String() != wantLines[1] {
		t.Fatalf("show -o json: record.failure_detail present or the summary wrong:\n%s", out)
	}
	if rec, _ := store.Get(ctx, r.DLQID); rec.ReadCount != 0 {
		t.Fatalf("show without --payload recorded a read: %+v", rec.Reads)
	}

	// With --payload the validator's words, the read recorded first (by
	// the real redrive function, which reads the record for the operator).
	fn = f.startRedrive(t, srcJSON(inventorySchema))
	f.readOnly(t)
	out, _, code = f.run(t, "--function", fn, "show", r.DLQID, "--payload")
	if code != 0 || !strings.Contains(out, "\nfailure detail (the validator's words; the read is recorded):\n") || !strings.Contains(out, "'SECRET-NDC-42' does not match pattern") {
		t.Fatalf("show --payload (exit %d) lacks the raw detail:\n%s", code, out)
	}
	out, _, _ = f.run(t, "--function", fn, "show", r.DLQID, "--payload", "-o", "json")
	doc.Record = nil
	if err := json.Unmarshal([]byte(out), &doc); err != nil || !strings.Contains(doc.Record["failure_detail"].(string), "SECRET-NDC-42") || len(doc.FailureDetail.Summary) != 2 {
		t.Fatalf("show --payload -o json lacks the raw detail or the summary: %v\n%s", err, out)
	}
	if rec, _ := store.Get(ctx, r.DLQID); rec.ReadCount != 2 || rec.Reads[0].Actor != "unverified:alice" || quarantine.Verify(rec) != nil {
		t.Fatalf("the payload reads were not recorded: %d %+v", rec.ReadCount, rec.Reads)
	}

	// Withheld: a schema file (the probe, at the record's version); the
	// body in S3; no sources (no such function); another schema version
	// now; a source not configured. Each says why, none quotes the payload.
	for _, c := range []struct {
		args []string
		why  string
	}{
		{[]string{"--function", probeFn, "show", r.DLQID}, `the schema "` + probe + `" of source lots is not one embedded in dlqctl (it reads no schema file)`},
		{[]string{"--function", fn, "show", big.DLQID}, "(the body is claim-checked in S3)"},
		{[]string{"--function", "no-such-function", "show", r.DLQID}, "the sources could not be read from function no-such-function (ResourceNotFoundException"},
		{[]string{"--function", fn, "show", old.DLQID}, "the schema of lots is now v1 (inventory-movement.v1); the record failed v0"},
		{[]string{"--function", otherFn, "show", r.DLQID}, "the SOURCES of function " + otherFn + " name no source lots"},
	} {
		out, errOut, code := f.run(t, c.args...)
		secrets(strings.Join(c.args, " "), out)
		if code != 0 || !strings.Contains(out, "\nfailure "+dlqctl.Withheld+" (") || !strings.Contains(out, c.why) || strings.Contains(out, "\nfailure detail:") || strings.Contains(out, "GUESS") {
			t.Fatalf("%v (exit %d): want the detail withheld, %q:\n%s%s", c.args, code, c.why, out, errOut)
		}
		out, _, _ = f.run(t, append(c.args, "-o", "json")...)
		secrets(strings.Join(c.args, " ")+" -o json", out)
		if !strings.Contains(out, `"withheld": "`+dlqctl.Withheld+`"`) || strings.Contains(out, `"summary"`) {
			t.Fatalf("%v -o json: want the detail withheld:\n%s", c.args, out)
		}
	}
}

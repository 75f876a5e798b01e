package storetest

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
	"github.com/dlqquarantine/dlqq/shared/usecase/ingest"
)

// maxItemBytes is DynamoDB's item size limit. A record's JSON is never
// smaller than its DynamoDB size (for the texts used here), so a record
// whose JSON fits also fits an item.
const maxItemBytes = 400 << 10

// RunBoundedTexts checks that a message whose texts are huge (a 300 KB map
// key under a map-typed schema, a 300 KB dlq-failure-reason, a 300 KB
// requested_by or message id) is still stored in s, with payloads as the
// payload store, and that no stored text, signature included, carries any
// part of them.
func RunBoundedTexts(t *testing.T, s quarantine.Store, payloads quarantine.PayloadStore) {
	ctx := context.Background()
	huge := strings.Repeat("zq", 150<<10) // 300 KB
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	newSource := func(t *testing.T, schema string) *quarantine.Source {
		t.Helper()
		name := UniqueID("bounded")
		src := &quarantine.Source{Name: name, ARN: "arn:aws:sqs:us-east-1:000000000000:" + name, DLQName: name + "-dlq", SchemaVersion: "tags.v1", RedriveCap: 3}
		if schema != "" {
			var doc any
			if err := json.Unmarshal([]byte(schema), &doc); err != nil {
				t.Fatal(err)
			}
			c := jsonschema.NewCompiler()
			if err := c.AddResource("tags.json", doc); err != nil {
				t.Fatal(err)
			}
			sch, err := c.Compile("tags.json")
			if err != nil {
				t.Fatal(err)
			}
			src.Schema = sch
		}
		return src
	}
	quarantineMsg := func(t *testing.T, src *quarantine.Source, id string, body string, attrs map[string]quarantine.Attribute) *quarantine.Record {
		t.Helper()
		q := ingest.NewQuarantiner(s, payloads, func() time.Time { return now }, ingest.QuarantinerConfig{Sources: map[string]*quarantine.Source{src.Name: src}})
		out, err := q.Quarantine(ctx, ingest.Message{
			MessageID: id, Body: []byte(body), Attributes: attrs, SourceARN: src.ARN,
			DLQARN: "arn:aws:sqs:us-east-1:000000000000:" + src.DLQName, ReceiveCount: 1,
		})
		if err != nil {
			t.Fatalf("quarantine %s: %v, want it stored", id, err)
		}
		return out.Record
	}
	// stored reads r back and checks it verifies and fits an item, and,
	// when input is a payload's (not a text meant to be kept, clipped), that
	// no part of it is outside the payloads and the detail (which may quote
	// the payload and is never logged).
	stored := func(t *testing.T, id string, payloadInput bool) *quarantine.Record {
		t.Helper()
		r, err := s.Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if err := quarantine.Verify(r); err != nil {
			t.Fatal(err)
		}
		view := r.Clone()
		view.Body, view.Attributes, view.FailureDetail = "", nil, ""
		raw, err := json.Marshal(view)
		if err != nil {
			t.Fatal(err)
		}
		if len(raw) > maxItemBytes/4 {
			t.Fatalf("record %s is %d bytes in JSON without its payloads", id, len(raw))
		}
		if payloadInput && strings.Contains(string(raw), "zqzqzq") {
			t.Fatalf("a stored text carries the oversized input: %.300s", raw)
		}
		if full, _ := json.Marshal(r); len(full) > maxItemBytes {
			t.Fatalf("record %s is %d bytes", id, len(full))
		}
		return r
	}

	t.Run("a 300 KB map key failing a map-typed schema", func(t *testing.T) {
		src := newSource(t, `{"type":"object","properties":{"sku":{"type":"string"},"tags":{"type":"object","additionalProperties":{"type":"string"}}}}`)
		body := `{"sku":"a","tags":{"` + huge + `":5}}`
		rec := quarantineMsg(t, src, "m-1", body, nil)
		r := stored(t, rec.DLQID, true)
		if r.FailureReason != "schema /tags/* type" || r.FailureSignature != "gate|schema /tags/* type|tags.v#" {
			t.Fatalf("reason %q, signature %q", r.FailureReason, r.FailureSignature)
		}
		if r.BodyRef == nil {
			t.Fatal("the 300 KB body is inline")
		}
		// It comes back: the arrival is appended, still within bounds.
		quarantineMsg(t, src, "m-2", body, nil)
		if r = stored(t, rec.DLQID, true); r.AttemptCount != 2 || r.Attempts[0].MessageID != "m-1" || r.Attempts[1].Reason != "schema /tags/* type" {
			t.Fatalf("history %+v", r.Attempts)
		}
	})

	t.Run("a 300 KB dlq-failure-reason", func(t *testing.T) {
		src := newSource(t, "")
		rec := quarantineMsg(t, src, "m-1", `{"sku":"a"}`, map[string]quarantine.Attribute{
			quarantine.AttrFailureReason: {DataType: "String", StringValue: huge},
			quarantine.AttrFailureStage:  {DataType: "String", StringValue: huge},
		})
		r := stored(t, rec.DLQID, false)
		if len(r.FailureReason) > quarantine.MaxReasonBytes || r.AttributesRef == nil {
			t.Fatalf("reason of %d bytes, attributes ref %v", len(r.FailureReason), r.AttributesRef)
		}
		attrs, err := quarantine.LoadAttributes(ctx, payloads, r)
		if err != nil || attrs[quarantine.AttrFailureReason].StringValue != huge {
			t.Fatalf("the original attributes are not kept verbatim: %v", err)
		}
	})

	t.Run("a 300 KB requested_by and message id", func(t *testing.T) {
		src := newSource(t, "")
		rec := quarantineMsg(t, src, huge, `{"sku":"a"}`, nil)
		cur := stored(t, rec.DLQID, false)
		type record = quarantine.Record
		step := func(fn func(cur *record) (*record, error)) {
			t.Helper()
			next, err := s.Update(ctx, cur.DLQID, fn)
			if err != nil {
				t.Fatalf("update: %v, want it stored", err)
			}
			cur = stored(t, next.DLQID, false)
		}
		step(func(c *record) (*record, error) { return c.Claim(huge, now, time.Minute) })
		step(func(c *record) (*record, error) { return c.Release(huge, huge, now, nil) })
		step(func(c *record) (*record, error) { return c.Claim(huge, now, time.Minute) })
		step(func(c *record) (*record, error) { return c.MarkRedriven(huge, huge, now) })
		step(func(c *record) (*record, error) { return c.NotePayloadRead(huge, now) })
		if len(cur.RedrivenBy) > quarantine.MaxActorBytes || len(cur.LastSentMessageID) > quarantine.MaxMessageIDBytes {
			t.Fatalf("redriven_by of %d bytes, last_sent_message_id of %d", len(cur.RedrivenBy), len(cur.LastSentMessageID))
		}
	})
}

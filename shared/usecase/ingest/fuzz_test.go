package ingest_test

import (
	"bytes"
	"context"
	"testing"

	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
)

// FuzzQuarantine feeds arbitrary bodies and attributes through the whole
// quarantine path: it must never panic, every record it produces must
// verify, and the body must come back byte for byte.
func FuzzQuarantine(f *testing.F) {
	f.Add([]byte(validBody), "idempotency-key", "k1", []byte(nil))
	f.Add([]byte{0xff, 0x00, 0xc3}, "dlq-record-id", "x", []byte{1})
	f.Add([]byte(`{"a":1,"a":2}`), "dlq-failure-reason", "boom 42", []byte(nil))
	f.Add([]byte("[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]"), "", "", []byte(nil))
	f.Add([]byte(""), "dlq-redrive-count", "-1", []byte{0xff})
	f.Fuzz(func(t *testing.T, body []byte, attrName, attrValue string, bin []byte) {
		q, store, payloads, _ := newQ(t)
		m := msg("m1", "")
		m.Body = body
		if attrName != "" {
			m.Attributes = map[string]quarantine.Attribute{attrName: {DataType: "String", StringValue: attrValue}}
			if len(bin) > 0 {
				m.Attributes[attrName+".bin"] = quarantine.Attribute{DataType: "Binary", BinaryValue: bin}
			}
		}
		ctx := context.Background()
		if _, err := q.Quarantine(ctx, m); err != nil {
			t.Fatalf("quarantine: %v", err)
		}
		all := store.All()
		if len(all) != 1 {
			t.Fatalf("%d records", len(all))
		}
		r := all[0]
		if err := quarantine.Verify(r); err != nil {
			t.Fatal(err)
		}
		got, err := quarantine.LoadBody(ctx, payloads, r)
		if err != nil || !bytes.Equal(got, body) {
			t.Fatalf("body not verbatim: %v", err)
		}
		if r.FailureReason == "" || r.FailureClass == "" {
			t.Fatalf("no reason or class: %+v", r)
		}
	})
}

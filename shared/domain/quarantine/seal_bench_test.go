package quarantine_test

import (
	"crypto/sha256"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
)

// benchRecord is a realistic record around a 2 KB payload.
func benchRecord(b *testing.B) *quarantine.Record {
	b.Helper()
	body := strings.Replace(validBody, `"facility":"F1"`, `"facility":"F1","note":"`+strings.Repeat("n", 2048-len(validBody)-10)+`"`, 1)
	r := sealedRecord(b, "evt-1", body, fixtureTime)
	r.Attributes = map[string]quarantine.Attribute{"trace": {DataType: "String", StringValue: "abc"}, "tenant": {DataType: "String", StringValue: "t-1"}}
	if err := quarantine.SealRecord(r); err != nil {
		b.Fatal(err)
	}
	return r
}

// BenchmarkSeal measures the seal (RFC 8785 canonical JSON + SHA-256) of a
// record with a 2 KB payload, and reports its cost as a ratio to the
// baseline of SHA-256 over plain json.Marshal of the same record, timed in
// the same run ("x-baseline").
func BenchmarkSeal(b *testing.B) {
	r := benchRecord(b)
	b.ReportAllocs()
	start := time.Now()
	n := 0
	for b.Loop() {
		if _, err := quarantine.ComputeSeal(r); err != nil {
			b.Fatal(err)
		}
		n++
	}
	sealed := time.Since(start)
	b.StopTimer()
	start = time.Now()
	for range n {
		raw, err := json.Marshal(r)
		if err != nil {
			b.Fatal(err)
		}
		_ = sha256.Sum256(raw)
	}
	b.ReportMetric(float64(sealed)/float64(time.Since(start)), "x-baseline")
}

// BenchmarkSealBaseline is the baseline alone: SHA-256 over json.Marshal.
func BenchmarkSealBaseline(b *testing.B) {
	r := benchRecord(b)
	b.ReportAllocs()
	for b.Loop() {
		raw, err := json.Marshal(r)
		if err != nil {
			b.Fatal(err)
		}
		_ = sha256.Sum256(raw)
	}
}

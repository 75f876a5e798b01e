package quarantine_test

import (
	"testing"
	"time"

	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
	"github.com/dlqquarantine/dlqq/shared/domain/schemas"
)

// The domain's fixture: the inventory source and sealed records of it,
// built from the domain's own functions (ingest's use case, which makes
// them from messages, is tested in package ingest).

func inventorySource(t testing.TB) *quarantine.Source {
	t.Helper()
	sch, version, err := schemas.Compile("inventory-movement.v1")
	if err != nil {
		t.Fatal(err)
	}
	return &quarantine.Source{
		Name: "inventory", ARN: "arn:aws:sqs:us-east-1:000000000000:inventory", DLQName: "inventory-dlq",
		IdempotencyPointer: "/event_id", Schema: sch, SchemaVersion: version, RedriveCap: 3,
	}
}

const validBody = `{"event_id":"evt-1","ndc":"12345-678-90","lot":"L1","quantity_delta":-5,"schedule":"CII","facility":"F1","occurred_at":"2026-11-29T10:00:00Z"}`

// fixtureTime is when the fixture's records first failed.
var fixtureTime = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

// sealedRecord is the sealed QUARANTINED record of one failure of body,
// keyed by the producer's idempotency-key attribute key, first seen at
// at: classified, keyed and stamped as an arrival is.
func sealedRecord(t testing.TB, key, body string, at time.Time) *quarantine.Record {
	t.Helper()
	src := inventorySource(t)
	attrs := map[string]quarantine.Attribute{quarantine.DefaultKeyAttribute: {DataType: "String", StringValue: key}}
	verdict := src.Check([]byte(body))
	c := quarantine.Classify(src, attrs, verdict).Bounded()
	k, origin := quarantine.DeriveKey(src, quarantine.DefaultKeyAttribute, attrs, verdict.Doc, src.ARN, []byte(body))
	first := quarantine.At(at)
	att := quarantine.Attempt{At: first, Stage: c.Stage, Reason: c.Reason, MessageID: "m-" + k, Actor: quarantine.ActorIngest,
		ReceiveCount: 1, BodySHA256: quarantine.BodySHA256([]byte(body)), Kind: quarantine.AttemptArrival}
	r := &quarantine.Record{DLQID: quarantine.RecordID(src.Name, k), Source: src.Name, SourceARN: src.ARN,
		IdempotencyKey: k, KeyOrigin: origin, Status: quarantine.StatusQuarantined, StatusSince: first,
		FailureClass: c.Class, FailureSignature: c.Signature, FailureStage: c.Stage, FailureReason: c.Reason,
		Body: body, BodyEncoding: quarantine.EncodingUTF8, BodySHA256: att.BodySHA256, BodySize: int64(len(body)),
		Attributes: attrs, Attempts: []quarantine.Attempt{att}, AttemptCount: 1, FirstSeen: first, LastSeen: first,
		SchemaVersion: src.SchemaVersion, RedriveCap: src.RedriveCap, Version: 1}
	if err := quarantine.SealRecord(r); err != nil {
		t.Fatal(err)
	}
	return r
}

package quarantine_test

import (
	"slices"
	"testing"

	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
)

// A record's claim-check objects are its body, its attributes and each
// correction's body, and only keys of its own kinds, source and id are
// its.
func TestPayloadRefsAndOwnership(t *testing.T) {
	r := &quarantine.Record{DLQID: quarantine.RecordID("inventory", "e1"), Source: "inventory"}
	other := &quarantine.Record{DLQID: quarantine.RecordID("inventory", "e2"), Source: "inventory"}
	ref := func(kind string) *quarantine.ObjectRef {
		return &quarantine.ObjectRef{Bucket: "p", Key: quarantine.PayloadKey(kind, r, kind+"sum")}
	}
	r.BodyRef, r.AttributesRef = ref("bodies"), ref("attributes")
	r.Corrections = []quarantine.Correction{{N: 1}, {N: 2, BodyRef: ref("corrections")}}
	want := []quarantine.ObjectRef{*r.BodyRef, *r.AttributesRef, *r.Corrections[1].BodyRef}
	if got := quarantine.PayloadRefs(r); !slices.Equal(got, want) {
		t.Fatalf("PayloadRefs %+v, want %+v", got, want)
	}
	for _, k := range want {
		if !quarantine.OwnsPayload(r, k.Key) {
			t.Errorf("%s is not r's", k.Key)
		}
	}
	for _, key := range []string{
		quarantine.PayloadKey("bodies", other, "sum"),         // another record's
		quarantine.PayloadKey("bodies", r, ""),                // no object under it
		quarantine.PayloadKey("bodies", r, "sum/deeper"),      // below its own
		quarantine.PayloadKey("archive", r, "sum"),            // not a claim-check kind
		"x" + quarantine.PayloadKey("bodies", r, "sum"),       // a prefix before
		quarantine.PayloadKey("bodies", r, "sum")[:20] + "/s", // cut short
	} {
		if quarantine.OwnsPayload(r, key) {
			t.Errorf("%s taken for r's", key)
		}
	}
}

package testkeys

import (
	"testing"
	"time"

	"github.com/dlqquarantine/dlqq/shared/domain/ledger"
)

// A digest signed here verifies with the DER key it came with, and not
// with another.
func TestSignedDigestsVerify(t *testing.T) {
	k, der := ECDSA(t)
	d := SignDigest(t, k, ledger.NewDigest(1, time.Now(), "stream", "key", ledger.AlgECDSA, nil, nil))
	if err := ledger.VerifyDigest(d, der); err != nil {
		t.Fatal(err)
	}
	_, other := ECDSA(t)
	if ledger.VerifyDigest(d, other) == nil {
		t.Fatal("a digest verifies with another key")
	}
}

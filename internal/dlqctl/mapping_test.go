package dlqctl_test

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/dlqquarantine/dlqq/internal/dlqctl"
	"github.com/dlqquarantine/dlqq/shared/adapter/dynamostore"
	"github.com/dlqquarantine/dlqq/shared/domain/ledger"
)

// A stopped ledger pages someone (issue 25). On the embedded stack, with
// the ledger's stream mapping in kumo's Lambda: the mapping is disabled,
// a record is rewritten behind the functions and written back, and the
// mapping comes back re-created at LATEST, so those changes are never
// read, as on AWS. Every digest records the mapping it saw; the anchoring
// lag grows while it is off (the digest run's canary does not arrive) past
// LedgerAnchoringLagAlarm's 15 minutes; and dlqctl verify names the digest
// during which it was off, the re-created mapping and the canaries that
// never arrived. Without the pipeline check the lag stayed 0 and verify
// was clean.
func TestVerifyNamesAStoppedMapping(t *testing.T) {
	l := newLedgerFixture(t)
	ctx := context.Background()
	clock := time.Now()
	l.fns.Ledger.Now = func() time.Time { return clock }
	run := func() (n int64, lag float64) {
		t.Helper()
		clock = clock.Add(5 * time.Minute)
		rep, err := l.fns.Ledger.Digest(ctx)
		if err != nil {
			t.Fatalf("digest: %v", err)
		}
		return rep.N, rep.LagSeconds
	}
	a := l.create("a")
	l.drain()
	l.digest()
	l.drain() // the first canary arrives
	run()
	l.drain()

	if err := l.fns.LedgerMapping.SetEnabled(ctx, false); err != nil {
		t.Fatal(err)
	}
	key := map[string]ddbtypes.AttributeValue{dynamostore.KeyAttr: &ddbtypes.AttributeValueMemberS{Value: a.DLQID}}
	got, err := l.st.Clients.DynamoDB.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(l.table), Key: key, ConsistentRead: aws.Bool(true)})
	if err != nil || got.Item == nil {
		t.Fatalf("get %s: %v", a.DLQID, err)
	}
	tampered := map[string]ddbtypes.AttributeValue{}
	for k, v := range got.Item {
		tampered[k] = v
	}
	tampered["redrive_cap"] = &ddbtypes.AttributeValueMemberN{Value: "99"}
	for _, item := range []map[string]ddbtypes.AttributeValue{tampered, got.Item} { // made and undone
		if _, err := l.st.Clients.DynamoDB.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(l.table), Item: item}); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := l.poller.Drain(ctx); err != nil || n != 0 {
		t.Fatalf("a disabled mapping delivered %d records (%v)", n, err)
	}
	off, _ := run()
	var lags []float64
	for range 4 {
		_, lag := run()
		lags = append(lags, lag)
		l.drain()
	}
	for i := 1; i < len(lags); i++ {
		if lags[i] <= lags[i-1] {
			t.Fatalf("the anchoring lag did not grow while the mapping was off: %v", lags)
		}
	}
	if lags[len(lags)-1] <= 15*60 {
		t.Fatalf("lags %v: LedgerAnchoringLagAlarm (more than 15 minutes) would not fire", lags)
	}

	if _, err := l.fns.LedgerMapping.Recreate(ctx, "LATEST"); err != nil {
		t.Fatal(err)
	}
	l.drain() // skips what the stream held, as a new mapping at LATEST does
	recreated, _ := run()
	l.drain()
	run()
	l.drain()
	run() // (the lag once canaries arrive again: the unit tests; here the stream's times are the real clock's)
	if d, err := l.st.Clients.DynamoDB.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(l.table), Key: map[string]ddbtypes.AttributeValue{
		dynamostore.KeyAttr: &ddbtypes.AttributeValueMemberS{Value: ledger.CanaryKey}}, ConsistentRead: aws.Bool(true)}); err != nil || d.Item == nil {
		t.Fatalf("no canary item in the table: %v", err)
	}

	l.now = func() time.Time { return clock.Add(time.Minute) }
	out, errOut, code := l.run(false, "verify")
	if code != dlqctl.ExitMismatch {
		t.Fatalf("verify exit %d, want %d:\n%s%s", code, dlqctl.ExitMismatch, out, errOut)
	}
	mustContain(t, out,
		"  MISMATCH "+ledger.DigestKey(off)+": mapping-off: mapping ",
		"was Disabled between digest",
		"  MISMATCH "+ledger.DigestKey(recreated)+": mapping-recreated: mapping ",
		"changes in between may never have been read",
		": canary-missing: canary ")
	// Only what the stop explains: the record itself verifies (its
	// tampering never reached the ledger: that is what the named digests
	// warn of).
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, "MISMATCH") && !regexp.MustCompile(`: (mapping-off|mapping-changed|mapping-recreated|canary-missing): `).MatchString(line) {
			t.Errorf("another problem: %s", line)
		}
	}
}

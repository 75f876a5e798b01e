package dlqctl

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/dlqquarantine/dlqq/shared/adapter/dynamostore"
	"github.com/dlqquarantine/dlqq/shared/domain/ledger"
)

// evidence is what verify checks beyond ledger.Verify (issue 25, part
// F): the digest the auditor recorded, the digests' key_id, the
// counters.
type evidence struct {
	// expect is --expect-digest (nil: none).
	expect *ledger.ExpectedDigest
	// asOf is --as-of (zero: now).
	asOf time.Time
	// readStart is --read-start (zero: asOf, or now).
	readStart time.Time
	// keyARN is the signing key's ARN every digest's key_id must name
	// (empty: not checked), keyFrom where it came from.
	keyARN, keyFrom string
	offline         bool
	counters        counterRead
	// tableItems are the table's items the counters' recount reads: its
	// counters and their checkpoints.
	tableItems []ledger.Item
}

// counterRead says whether the counters read with the table are those of
// the checkpoints read with them: moved says why not.
type counterRead struct {
	moved string
}

// evidence parses the flags of the checks beyond ledger.Verify.
func (o VerifyOptions) evidence() (evidence, error) {
	ev := evidence{offline: o.Offline != "" || o.PublicKey != ""}
	if o.ExpectDigest != "" {
		if o.NoLedger {
			return ev, &UsageError{errors.New("--expect-digest checks the ledger: --no-ledger does not go with it")}
		}
		e, err := ledger.ParseExpectedDigest(o.ExpectDigest)
		if err != nil {
			return ev, &UsageError{fmt.Errorf("--expect-digest %w", err)}
		}
		ev.expect = &e
	}
	if o.AsOf != "" {
		if !ev.offline {
			return ev, &UsageError{errors.New("--as-of goes with --offline DIR (online, verify judges the bucket as of now)")}
		}
		t, err := time.Parse(time.RFC3339, strings.TrimSpace(o.AsOf))
		if err != nil {
			return ev, &UsageError{fmt.Errorf("--as-of %q: want an RFC 3339 time, such as 2026-12-01T23:00:00Z (when the copy was exported)", o.AsOf)}
		}
		ev.asOf = t
	}
	if o.ReadStart != "" {
		if !ev.offline {
			return ev, &UsageError{errors.New("--read-start goes with --offline DIR (online, verify's own ledger read is the start)")}
		}
		t, err := time.Parse(time.RFC3339, strings.TrimSpace(o.ReadStart))
		if err != nil {
			return ev, &UsageError{fmt.Errorf("--read-start %q: want an RFC 3339 time, such as 2026-12-01T23:00:00Z (when the export's ledger read began, as it printed)", o.ReadStart)}
		}
		if !ev.asOf.IsZero() && t.After(ev.asOf) {
			return ev, &UsageError{fmt.Errorf("--read-start %s is after --as-of %s: the ledger is read before the table", o.ReadStart, o.AsOf)}
		}
		ev.readStart = t
	}
	if o.SigningKeyARN != "" {
		if !ev.offline {
			return ev, &UsageError{errors.New("--signing-key-arn goes with --offline DIR (online, the digests are checked against the configured signing key's ARN)")}
		}
		if arn := strings.TrimSpace(o.SigningKeyARN); !strings.HasPrefix(arn, "arn:") || !strings.Contains(arn, ":kms:") || !strings.Contains(arn, ":key/") {
			return ev, &UsageError{fmt.Errorf("--signing-key-arn %q: want the key's ARN, arn:aws:kms:REGION:ACCOUNT:key/ID (digests record the ARN, not an alias)", o.SigningKeyARN)}
		}
		ev.keyARN, ev.keyFrom = strings.TrimSpace(o.SigningKeyARN), "--signing-key-arn"
	}
	return ev, nil
}

// CounterReport is the counters' part of verify: the table's counter
// items compared with a recount of the ledgered changes up to the
// counters' checkpoints.
type CounterReport struct {
	// Checked counts the counter items compared; Problems those that
	// differ (in VerifyResult.Problems, kind counter-drift or
	// counter-checkpoint).
	Checked  int `json:"checked"`
	Problems int `json:"problems"`
	// Behind counts the ledgered segments not yet counted (the counters'
	// lag, not a problem).
	Behind int64 `json:"behind"`
	// Unchecked says which counters could not be recounted, and why.
	Unchecked []string `json:"unchecked,omitempty"`
	// NotChecked says why no counter was compared (empty: they were).
	NotChecked string `json:"not_checked,omitempty"`
}

// addEvidence runs the checks beyond ledger.Verify on in and merges them
// into res (after addLedger).
func (res *VerifyResult) addEvidence(in ledger.Input, ev evidence) {
	l := res.Ledger
	if l == nil {
		return
	}
	add := func(ps ...ledger.Problem) {
		for _, p := range ps {
			res.Problems = append(res.Problems, Problem{ID: p.Subject, Kind: string(p.Kind), What: string(p.Kind) + ": " + p.Detail})
		}
	}
	if l.NewestDigest > 0 {
		l.NewestDigestSHA256 = ledger.SHA256Hex(in.Digests[ledger.DigestKey(l.NewestDigest)])
	}
	if ev.expect != nil {
		if p := ledger.CheckExpectedDigest(in.Digests, in.PublicKeyDER, *ev.expect); p != nil {
			add(*p)
			l.Problems++
		} else {
			res.Notes = append(res.Notes, fmt.Sprintf("--expect-digest: digest %d is in it, hashes to the SHA-256 recorded and verifies", ev.expect.N))
		}
	} else if ev.offline {
		res.Notes = append(res.Notes, "the copy's completeness is unproven: digests and their segments removed from its end go unseen but for the newest digest's age; --expect-digest N:SHA256, recorded from the bucket on its own path (verify or ledger export prints it), proves it holds that digest")
	}
	if ev.keyARN != "" {
		ps := ledger.CheckDigestKeys(in.Digests, ev.keyARN)
		add(ps...)
		l.Problems += len(ps)
	} else if ev.offline {
		res.Notes = append(res.Notes, "the digests' key_id was not checked (--signing-key-arn ARN checks it)")
	}
	if ev.offline {
		at := "now"
		if !ev.asOf.IsZero() {
			at = ev.asOf.UTC().Format(time.RFC3339) + " (--as-of)"
		}
		grace := "the grace runs back from then (--read-start, the ledger read start the export printed, keeps the changes made during the export not yet ledgered)"
		if !ev.readStart.IsZero() {
			grace = "the grace runs back from " + ev.readStart.UTC().Format(time.RFC3339) + " (--read-start, the export's ledger read)"
		}
		res.Notes = append(res.Notes, "the copy is judged as of "+at+": its newest signed digest must be at most the digest age old then; "+grace)
	}
	c := &CounterReport{}
	l.Counters = c
	if ev.counters.moved != "" {
		c.NotChecked = ev.counters.moved
		return
	}
	cin, probs := dynamostore.LedgerCounterInput(ev.tableItems, nil, in.Baselines, in.Now)
	cin.SegmentKeys, cin.ReadSegment, cin.Headers = in.SegmentKeys, in.ReadSegment, in.Headers
	r := ledger.RecountCounters(cin)
	probs = append(probs, r.Problems...)
	add(probs...)
	c.Checked, c.Problems, c.Behind, c.NotChecked = r.Checked, len(probs), r.Behind, r.NotChecked
	for _, n := range r.Unchecked {
		c.Unchecked = append(c.Unchecked, n.Detail)
	}
}

// writeEvidence prints the newest digest's line and the counters' line.
func (l *LedgerReport) writeEvidence(w io.Writer) {
	if l.NewestDigestSHA256 != "" && l.NewestDigestAt != nil {
		fmt.Fprintf(w, "ledger: newest digest #%d, SHA-256 %s, signed %s (record %d:%s for verify --offline --expect-digest)\n",
			l.NewestDigest, l.NewestDigestSHA256, l.NewestDigestAt.UTC().Format(time.RFC3339Nano), l.NewestDigest, l.NewestDigestSHA256)
	}
	c := l.Counters
	switch {
	case c == nil:
	case c.NotChecked != "" && c.Checked == 0:
		fmt.Fprintf(w, "counters: not checked (%s): %s\n", c.NotChecked, plural(c.Problems, "problem", "problems"))
	default:
		lag := ""
		if c.Behind > 0 {
			lag = fmt.Sprintf("; %s not counted yet", plural(int(c.Behind), "segment", "segments"))
		}
		unchecked := ""
		if len(c.Unchecked) > 0 {
			unchecked = "; not recounted: " + strings.Join(c.Unchecked, ", ")
		}
		fmt.Fprintf(w, "counters: %s recounted from the ledger up to the checkpoints%s%s: %s\n", plural(c.Checked, "counter", "counters"), lag, unchecked, plural(c.Problems, "problem", "problems"))
	}
}

// countCheckpoints reads the counters' checkpoint of every shard the
// ledger bucket has segments of (one LIST of the shards' prefixes, then a
// consistent GetItem each): before the ledger's read and after the
// table's scan, so that the counters scanned are known to be those of the
// checkpoints scanned (every counting transaction moves its shard's
// checkpoint, and a shard is counted only after its segment is written).
func (a *App) countCheckpoints(ctx context.Context) (map[string]string, error) {
	c, err := a.connect(ctx)
	if err != nil {
		return nil, err
	}
	var shards []string
	p := s3.NewListObjectsV2Paginator(c.S3, &s3.ListObjectsV2Input{Bucket: aws.String(a.LedgerBucket), Prefix: aws.String(ledger.SegmentPrefix), Delimiter: aws.String("/")})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("ledger bucket %s: %w", a.LedgerBucket, err)
		}
		for _, cp := range page.CommonPrefixes {
			shards = append(shards, strings.TrimSuffix(strings.TrimPrefix(aws.ToString(cp.Prefix), ledger.SegmentPrefix), "/"))
		}
	}
	out := map[string]string{}
	for _, shard := range shards {
		got, err := c.DynamoDB.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(a.Table), ConsistentRead: aws.Bool(true),
			Key: map[string]ddbtypes.AttributeValue{dynamostore.KeyAttr: &ddbtypes.AttributeValueMemberS{Value: dynamostore.LedgerCountKey(shard)}}})
		if err != nil {
			return nil, describe(err, a.Table)
		}
		if len(got.Item) == 0 {
			continue
		}
		it, err := dynamostore.LedgerItem(got.Item)
		if err != nil {
			out[shard] = "unreadable"
			continue
		}
		out[shard] = checkpointState(it)
	}
	return out, nil
}

// checkpointState is a checkpoint item as compared between reads.
func checkpointState(it ledger.Item) string {
	b, err := it.Canonical()
	if err != nil {
		return "unreadable"
	}
	return string(b)
}

// countersRead compares the checkpoints read before the ledger (before),
// with the table's scan (in items) and after it (after).
func countersRead(before, after map[string]string, items []ledger.Item) counterRead {
	scanned := map[string]string{}
	for _, it := range items {
		if key := it.S(ledger.KeyAttr); dynamostore.IsCountCheckpointKey(key) {
			scanned[strings.TrimPrefix(key, dynamostore.LedgerCountPrefix)] = checkpointState(it)
		}
	}
	shards := map[string]bool{}
	for _, m := range []map[string]string{before, after, scanned} {
		for s := range m {
			shards[s] = true
		}
	}
	for _, s := range slices.Sorted(maps.Keys(shards)) {
		if before[s] != scanned[s] || scanned[s] != after[s] {
			return counterRead{moved: fmt.Sprintf("the ledger counted shard %s while the table was read: run it again", s)}
		}
	}
	return counterRead{}
}

package demo

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatch"
	cwtypes "github.com/aws/aws-sdk-go-v2/service/cloudwatch/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/kms"

	"github.com/dlqquarantine/dlqq/shared/adapter/dynamostore"
	"github.com/dlqquarantine/dlqq/shared/adapter/s3store"
	"github.com/dlqquarantine/dlqq/shared/dev/embedded"
	"github.com/dlqquarantine/dlqq/shared/dev/localrunner"
	dl "github.com/dlqquarantine/dlqq/shared/domain/ledger"
	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
	"github.com/dlqquarantine/dlqq/shared/usecase/ingest"
	"github.com/dlqquarantine/dlqq/shared/usecase/metrics"
	"github.com/dlqquarantine/dlqq/shared/usecase/sweeper"
)

// verify reads back every record of the demo's source and checks the
// invariants: every dead-lettered event has exactly one record, nothing else
// does, and every seal verifies. (A scan is fine for a demo-sized table.)
func verify(ctx context.Context, st *embedded.Stack, cfg ingest.Config, source string, gen []Generated, rep *Report) error {
	store := dynamostore.New(st.Clients.DynamoDB, cfg.TableName)
	payloads := s3store.New(st.Clients.S3, cfg.PayloadBucket, "")
	byID, err := scanRecords(ctx, st, cfg.TableName, source)
	if err != nil {
		return err
	}
	expected := map[string]Generated{}
	idOf := recordIDs(cfg, source)
	for _, g := range gen {
		if g.Kind == Good {
			continue
		}
		expected[idOf(g.Body)] = g
	}
	for id, g := range expected {
		r, ok := byID[id]
		if !ok {
			rep.Lost = append(rep.Lost, id)
			continue
		}
		if _, err := store.Get(ctx, id); err != nil {
			return err
		}
		body, err := quarantine.LoadBody(ctx, payloads, r)
		if err != nil || string(body) != g.Body {
			rep.SealFailures = append(rep.SealFailures, id+": body not verbatim")
		}
	}
	for _, id := range slices.Sorted(maps.Keys(byID)) {
		r := byID[id]
		if _, ok := expected[id]; !ok {
			rep.Unexpected = append(rep.Unexpected, id)
		}
		if err := quarantine.Verify(r); err != nil {
			rep.SealFailures = append(rep.SealFailures, id)
		}
		rep.Records = append(rep.Records, r)
		rep.ByClass[r.FailureClass]++
		rep.BySignature[r.FailureSignature]++
	}
	return nil
}

// recordIDs returns the id ingest gives the record of a body dead-lettered
// from source.
func recordIDs(cfg ingest.Config, source string) func(body string) string {
	src := quarantine.Source{Name: source, ARN: cfg.Sources[source].ARN, IdempotencyPointer: cfg.Sources[source].IdempotencyPointer}
	return func(body string) string {
		key, _ := quarantine.DeriveKey(&src, quarantine.DefaultKeyAttribute, nil, src.Check([]byte(body)).Doc, src.ARN, []byte(body))
		return quarantine.RecordID(source, key)
	}
}

// scanRecords reads every record of source, skipping the metrics counters.
// (A scan is fine for a demo-sized table.)
func scanRecords(ctx context.Context, st *embedded.Stack, table, source string) (map[string]*quarantine.Record, error) {
	expr, err := expression.NewBuilder().WithFilter(expression.Name("source").Equal(expression.Value(source))).Build()
	if err != nil {
		return nil, err
	}
	p := dynamodb.NewScanPaginator(st.Clients.DynamoDB, &dynamodb.ScanInput{
		TableName: aws.String(table), FilterExpression: expr.Filter(),
		ExpressionAttributeNames: expr.Names(), ExpressionAttributeValues: expr.Values(), ConsistentRead: aws.Bool(true),
	})
	byID := map[string]*quarantine.Record{}
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("scan records: %w", err)
		}
		for _, item := range page.Items {
			if k, ok := item[dynamostore.KeyAttr].(*ddbtypes.AttributeValueMemberS); ok && !dynamostore.IsRecordKey(k.Value) {
				continue // a metrics counter, not a record
			}
			r, err := dynamostore.Unmarshal(item)
			if err != nil {
				return nil, err
			}
			byID[r.DLQID] = r
		}
	}
	return byID, nil
}

// verifyFinal checks where every event ended: outage events RESOLVED and
// consumed exactly once, recalled lots parked at their cap and archived
// (stub and object verified), malformed events still quarantined and never
// replayed, every good event consumed exactly once, every seal intact.
func verifyFinal(ctx context.Context, st *embedded.Stack, fns *localrunner.Functions, gen []Generated, c *consumer, rep *Report) error {
	store := dynamostore.New(st.Clients.DynamoDB, fns.IngestConfig.TableName)
	idOf := recordIDs(fns.IngestConfig, fns.Source)
	for _, g := range gen {
		if g.Kind == Good {
			if n := c.consumedCount(g.ID); n != 1 {
				rep.Duplicated = append(rep.Duplicated, fmt.Sprintf("%s consumed %d times", g.ID, n))
			}
			continue
		}
		id := idOf(g.Body)
		r, err := store.Get(ctx, id)
		if err != nil {
			rep.Lost = append(rep.Lost, id)
			continue
		}
		rep.Final[r.Status]++
		rep.Replays += r.RedriveCount
		if r.Status == quarantine.StatusQuarantined {
			rep.OpenBySignature[r.FailureSignature]++
		}
		if err := quarantine.Verify(r); err != nil {
			rep.SealFailures = append(rep.SealFailures, id)
		}
		wrong := func(format string, a ...any) {
			rep.WrongState = append(rep.WrongState, id+": "+fmt.Sprintf(format, a...))
		}
		switch g.Kind {
		case Outage:
			if r.Status != quarantine.StatusResolved || r.RedriveCount != 1 {
				wrong("%s after %d redrives, want RESOLVED after 1", r.Status, r.RedriveCount)
			}
			if n := c.consumedCount(g.ID); n != 1 {
				rep.Duplicated = append(rep.Duplicated, fmt.Sprintf("%s consumed %d times after the replay", g.ID, n))
			}
		case Recalled:
			if r.Status != quarantine.StatusArchived {
				wrong("%s, want ARCHIVED (parked as poison at the cap)", r.Status)
				continue
			}
			problems, err := s3store.VerifyStub(ctx, st.Clients.S3, r)
			if err != nil || len(problems) > 0 {
				rep.BadStubs = append(rep.BadStubs, fmt.Sprintf("%s: %v %v", id, problems, err))
			}
			if r.RedriveCount != fns.RedriveCap {
				wrong("archived after %d redrives, want %d", r.RedriveCount, fns.RedriveCap)
			}
		case Malformed:
			if rep.Corrected[g.ID] {
				// Corrected, replayed by the standing policy, consumed once,
				// the original kept beside the correction.
				if r.Status != quarantine.StatusResolved || r.RedriveCount != 1 || len(r.Corrections) != 1 || r.BodySHA256 != quarantine.BodySHA256([]byte(g.Body)) ||
					r.RedrivenBy == "" || !strings.HasPrefix(r.RedrivenBy, quarantine.PolicyActorPrefix) {
					wrong("corrected: %s after %d redrives by %q with %d corrections, want RESOLVED once by the policy", r.Status, r.RedriveCount, r.RedrivenBy, len(r.Corrections))
				}
				if n := c.consumedCount(g.ID); n != 1 {
					rep.Duplicated = append(rep.Duplicated, fmt.Sprintf("%s consumed %d times after its correction", g.ID, n))
				}
				continue
			}
			if r.Status != quarantine.StatusQuarantined || r.RedriveCount != 0 || r.FailureClass != quarantine.ClassValidation {
				wrong("%s class %s after %d redrives: malformed events are never replayed", r.Status, r.FailureClass, r.RedriveCount)
			}
		}
	}
	return nil
}

// readMetrics reads back, from CloudWatch, what the metrics function
// published for source, and the sweeper's archive counts.
func readMetrics(ctx context.Context, st *embedded.Stack, source string) (map[string]float64, map[string]string, error) {
	out, units := map[string]float64{}, map[string]string{}
	src := []cwtypes.Dimension{{Name: aws.String(metrics.DimSource), Value: aws.String(source)}}
	for _, m := range []struct {
		name string
		dims []cwtypes.Dimension
	}{
		{metrics.MetricDLQDepth, src}, {metrics.MetricOldestAge, src}, {metrics.MetricArrivals, src}, {metrics.MetricSuccessRate, src},
		{metrics.MetricPoison, src}, {metrics.MetricNewPoison, src}, {metrics.MetricDominantShare, src},
		{sweeper.MetricArchived, nil}, {sweeper.MetricFailures, nil},
	} {
		res, err := readMax(ctx, st, m.name, m.dims)
		if err == nil && len(res.Datapoints) == 0 && m.name == metrics.MetricDLQDepth && st.Names["DeadLetterQueue"] != "" {
			// A DLQ that several sources share has its depth published
			// under the DLQ's name, not under each source (metrics.Run).
			res, err = readMax(ctx, st, m.name, []cwtypes.Dimension{{Name: aws.String(metrics.DimSource), Value: aws.String(st.Names["DeadLetterQueue"])}})
		}
		if err != nil {
			return nil, nil, fmt.Errorf("read back %s: %w", m.name, err)
		}
		if len(res.Datapoints) > 0 {
			out[m.name] = aws.ToFloat64(res.Datapoints[0].Maximum)
			units[m.name] = string(res.Datapoints[0].Unit)
		}
	}
	return out, units, nil
}

// readMax reads the hour-long Maximum of one DLQQuarantine metric.
func readMax(ctx context.Context, st *embedded.Stack, name string, dims []cwtypes.Dimension) (*cloudwatch.GetMetricStatisticsOutput, error) {
	return st.Clients.CloudWatch.GetMetricStatistics(ctx, &cloudwatch.GetMetricStatisticsInput{
		Namespace: aws.String("DLQQuarantine"), MetricName: aws.String(name), Dimensions: dims,
		StartTime: aws.Time(time.Now().Add(-time.Hour)), EndTime: aws.Time(time.Now().Add(time.Hour)),
		Period: aws.Int32(3600), Statistics: []cwtypes.Statistic{cwtypes.StatisticMaximum},
	})
}

// LedgerReport is what the ledger function made of the demo's writes,
// read back from the bucket and checked against the table's stream (read
// apart, from its start) and the table.
type LedgerReport struct {
	// RecordVersions and PolicyVersions are the stream's records of record
	// keys and of standing-policy keys: every version the table was
	// written.
	RecordVersions, PolicyVersions int
	// RecordEntries and PolicyEntries are the entries of the bucket's
	// segments, by the same split; Segments and Shards count the segments
	// and the shards they chain.
	RecordEntries, PolicyEntries, Segments, Shards int
	// Digests are the digest objects in the bucket; Signed the digest runs
	// that reported writing one; Newest the newest digest whose signature
	// verifies (its n).
	Digests, Signed int
	Newest          int64
	// Problems are what the pure verification (ledger.Verify) names over
	// the table and the bucket; Unanchored the changes after the newest
	// digest (information).
	Problems   []string
	Unanchored int
	// Counters are the metrics counters, as the ledger counted them from
	// the stream, against a recount of the table.
	Counters []CounterCheck
	// Batches is what the stream's mapping delivered to the ledger.
	Batches localrunner.StreamStats
}

// CounterCheck is one counter (summed over its shards) and its recount.
type CounterCheck struct {
	Name               string
	Counted, Recounted int64
}

// verifyLedger fills rep.Ledger (but Signed and Batches, the run's own)
// once the ledger has caught up with the stream and signed its last
// digest.
func verifyLedger(ctx context.Context, st *embedded.Stack, fns *localrunner.Functions, rep *Report) error {
	lr := rep.Ledger
	// The stream, read apart from its start: what the table was written.
	reader := &localrunner.StreamPoller{API: st.Clients.DynamoDBStreams, StreamARN: fns.LedgerStream.StreamARN,
		Handler: func(_ context.Context, ev events.DynamoDBTimeWindowEvent) (events.DynamoDBTimeWindowEventResponse, error) {
			for _, r := range ev.Records {
				k := r.Change.Keys[dynamostore.KeyAttr]
				switch {
				case k.DataType() != events.DataTypeString || !dl.Ledgered(k.String()):
				case dynamostore.IsRecordKey(k.String()):
					lr.RecordVersions++
				default:
					lr.PolicyVersions++
				}
			}
			resp := events.DynamoDBTimeWindowEventResponse{}
			resp.State = map[string]string{}
			return resp, nil
		}}
	if _, err := reader.Drain(ctx); err != nil {
		return fmt.Errorf("read the table's stream: %w", err)
	}
	// The bucket: segments and digests.
	objects := s3store.LedgerObjects{API: st.Clients.S3, Bucket: fns.LedgerConfig.Bucket}
	in := dl.Input{Segments: map[string][]byte{}, Digests: map[string][]byte{}, Now: time.Now()}
	shards := map[string]bool{}
	for prefix, into := range map[string]map[string][]byte{dl.SegmentPrefix: in.Segments, dl.DigestPrefix: in.Digests} {
		keys, err := objects.List(ctx, prefix, "")
		if err != nil {
			return fmt.Errorf("list %s: %w", prefix, err)
		}
		for _, k := range keys {
			if into[k], err = objects.Get(ctx, k); err != nil {
				return fmt.Errorf("read %s: %w", k, err)
			}
		}
	}
	for k, raw := range in.Segments {
		seg, err := dl.ParseSegment(raw)
		if err != nil {
			return fmt.Errorf("segment %s: %w", k, err)
		}
		shards[seg.Shard] = true
		for _, e := range seg.Entries {
			if dl.IsCanary(e.Key) {
				continue // the digest runs' canary: not a record's or a policy's version
			}
			if dynamostore.IsRecordKey(e.Key) {
				lr.RecordEntries++
			} else {
				lr.PolicyEntries++
			}
		}
	}
	lr.Segments, lr.Shards, lr.Digests = len(in.Segments), len(shards), len(in.Digests)
	// The table, and the key's public part.
	if err := ledgerInput(ctx, st, fns, &in); err != nil {
		return err
	}
	res := dl.Verify(in)
	for _, pr := range res.Problems {
		lr.Problems = append(lr.Problems, pr.String())
	}
	lr.Newest, lr.Unanchored = res.LastDigest, res.Unanchored
	return recountCounters(ctx, st, fns, lr)
}

// recountCounters compares the state and open-signature counters of the
// demo's source with a recount of its records in the table.
func recountCounters(ctx context.Context, st *embedded.Stack, fns *localrunner.Functions, lr *LedgerReport) error {
	byID, err := scanRecords(ctx, st, fns.IngestConfig.TableName, fns.Source)
	if err != nil {
		return err
	}
	state, open := map[string]int64{}, map[string]int64{}
	for _, r := range byID {
		state[string(r.Status)+"/"+string(r.FailureClass)]++
		open[r.FailureSignature] += 0
		if r.Status == quarantine.StatusQuarantined {
			open[r.FailureSignature]++
		}
	}
	store := dynamostore.New(st.Clients.DynamoDB, fns.IngestConfig.TableName)
	sum := func(key func(shard int) quarantine.CounterKey) (int64, error) {
		var keys []quarantine.CounterKey
		for shard := range quarantine.CounterShards {
			keys = append(keys, key(shard))
		}
		got, err := store.ReadCounters(ctx, keys)
		var n int64
		for _, v := range got {
			n += v
		}
		return n, err
	}
	for _, stt := range []quarantine.Status{quarantine.StatusQuarantined, quarantine.StatusRedriving, quarantine.StatusRedriven,
		quarantine.StatusResolved, quarantine.StatusParked, quarantine.StatusArchived} {
		for _, cl := range []quarantine.Class{quarantine.ClassExhausted, quarantine.ClassPoison, quarantine.ClassValidation} {
			n, err := sum(func(shard int) quarantine.CounterKey { return quarantine.StateCounterKey(fns.Source, stt, cl, shard) })
			if err != nil {
				return err
			}
			if want := state[string(stt)+"/"+string(cl)]; n != 0 || want != 0 {
				lr.Counters = append(lr.Counters, CounterCheck{Name: string(stt) + "/" + string(cl), Counted: n, Recounted: want})
			}
		}
	}
	for _, sig := range slices.Sorted(maps.Keys(open)) {
		n, err := sum(func(shard int) quarantine.CounterKey { return quarantine.OpenCounterKey(fns.Source, sig, shard) })
		if err != nil {
			return err
		}
		if n != 0 || open[sig] != 0 {
			lr.Counters = append(lr.Counters, CounterCheck{Name: "QUARANTINED " + sig, Counted: n, Recounted: open[sig]})
		}
	}
	return nil
}

// ledgerInput completes in (its segments and digests read) for the
// ledger's verification as dlqctl verify runs it: the signing key's public
// part, every item of the table (a consistent scan) and the check that
// each ledgered version is one a function could have written.
func ledgerInput(ctx context.Context, st *embedded.Stack, fns *localrunner.Functions, in *dl.Input) error {
	pub, err := st.Clients.KMS.GetPublicKey(ctx, &kms.GetPublicKeyInput{KeyId: aws.String(fns.LedgerConfig.SigningKey)})
	if err != nil {
		return fmt.Errorf("public key: %w", err)
	}
	in.PublicKeyDER, in.CheckVersion = pub.PublicKey, dynamostore.LedgerVersionCheck()
	if in.CheckWriter, err = writerCheck(ctx, st); err != nil { // writers.go
		return err
	}
	p := dynamodb.NewScanPaginator(st.Clients.DynamoDB, &dynamodb.ScanInput{TableName: aws.String(fns.LedgerConfig.TableName), ConsistentRead: aws.Bool(true)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return fmt.Errorf("scan the table: %w", err)
		}
		for _, item := range page.Items {
			it, err := dynamostore.LedgerItem(item)
			if err != nil {
				return err
			}
			in.Items = append(in.Items, it)
		}
	}
	return nil
}

package demo

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/dlqquarantine/dlqq/shared/adapter/dynamostore"
	"github.com/dlqquarantine/dlqq/shared/adapter/s3store"
	dl "github.com/dlqquarantine/dlqq/shared/domain/ledger"
	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
)

// check reads everything back (on clean clients) and fills the report's
// invariant lists.
func (s *soak) check(ctx context.Context, gen []Generated, c *consumer) error {
	rep, fns := s.rep, s.fns
	records, err := scanRecords(ctx, s.st, fns.IngestConfig.TableName, fns.Source)
	if err != nil {
		return err
	}
	payloads := s3store.New(s.st.Clients.S3, fns.IngestConfig.PayloadBucket, "")
	idOf := recordIDs(fns.IngestConfig, fns.Source)
	expected := map[string]Generated{}
	for _, g := range gen {
		if g.Kind == Good {
			if n := c.consumedCount(g.ID); n != 1 {
				rep.Overconsumed = append(rep.Overconsumed, fmt.Sprintf("%s (never dead-lettered) consumed %d times", g.ID, n))
			}
			continue
		}
		expected[idOf(g.Body)] = g
	}
	// Duplicate sends, and whether the record's history explains each: in
	// any version, since a record keeps only its newest attempts.
	changes, err := s.readStream(ctx)
	if err != nil {
		return err
	}
	recVersions, err := recordVersions(changes)
	if err != nil {
		return err
	}
	repeats := mayRepeat(append(recVersions, slices.Collect(maps.Values(records))...))
	dupsOf := map[string]int{}
	for _, k := range slices.SortedFunc(maps.Keys(c.sends), func(a, b replay) int { return strings.Compare(a.id+"|"+a.round, b.id+"|"+b.round) }) {
		n := len(c.sends[k])
		if n < 2 {
			continue
		}
		rep.DuplicateSends += n - 1
		if !repeats[k.id][k.round] {
			rep.Unexplained = append(rep.Unexplained, fmt.Sprintf("%s round %s sent %d times; no version of its history has a lease takeover or a possible send of that round%s", k.id, k.round, n, sendsAndHistory(c.sends[k], records[k.id])))
			continue
		}
		dupsOf[k.id] += n - 1
	}
	recount, open := map[string]int64{}, map[string]int64{}
	for id, g := range expected {
		r, ok := records[id]
		if !ok {
			rep.Lost = append(rep.Lost, id)
			continue
		}
		rep.Final[r.Status]++
		wrong := func(format string, a ...any) {
			rep.WrongState = append(rep.WrongState, id+": "+fmt.Sprintf(format, a...))
		}
		switch g.Kind {
		case Outage:
			if r.Status != quarantine.StatusResolved || r.RedriveCount < 1 || r.RedriveCount > r.RedriveCap {
				wrong("%s after %d redrives, want RESOLVED within the cap %d", r.Status, r.RedriveCount, r.RedriveCap)
			}
			if n := c.consumedCount(g.ID); n < 1 || n > 1+dupsOf[id] {
				rep.Overconsumed = append(rep.Overconsumed, fmt.Sprintf("%s consumed %d times; %d explained duplicate sends", g.ID, n, dupsOf[id]))
			}
		case Recalled:
			if r.Status != quarantine.StatusArchived || r.RedriveCount != fns.RedriveCap {
				wrong("%s after %d redrives, want ARCHIVED at the cap %d", r.Status, r.RedriveCount, fns.RedriveCap)
			}
		case Malformed:
			if r.Status != quarantine.StatusQuarantined || r.RedriveCount != 0 || r.FailureClass != quarantine.ClassValidation {
				wrong("%s class %s after %d redrives: malformed events are never replayed", r.Status, r.FailureClass, r.RedriveCount)
			}
		}
	}
	for _, id := range slices.Sorted(maps.Keys(records)) {
		r := records[id]
		g, ok := expected[id]
		if !ok {
			rep.Duplicates = append(rep.Duplicates, id)
		}
		recount[string(r.Status)+"/"+string(r.FailureClass)]++
		if r.Status == quarantine.StatusQuarantined {
			open[r.FailureSignature]++
		}
		if err := quarantine.Verify(r); err != nil {
			rep.SealFailures = append(rep.SealFailures, id+": "+err.Error())
			continue
		}
		if r.Status == quarantine.StatusArchived {
			if err := s.checkArchived(ctx, r, g.Body); err != nil {
				rep.BadStubs = append(rep.BadStubs, id+": "+err.Error())
			}
			continue
		}
		if body, err := quarantine.LoadBody(ctx, payloads, r); ok && (err != nil || string(body) != g.Body) {
			rep.SealFailures = append(rep.SealFailures, id+": body not verbatim")
		}
	}
	// The metrics counters, counted by the ledger (caught up with the
	// table's stream), against the recount.
	store := dynamostore.New(s.st.Clients.DynamoDB, fns.IngestConfig.TableName)
	for _, stt := range []quarantine.Status{quarantine.StatusQuarantined, quarantine.StatusRedriving, quarantine.StatusRedriven,
		quarantine.StatusResolved, quarantine.StatusParked, quarantine.StatusArchived} {
		for _, cl := range []quarantine.Class{quarantine.ClassValidation, quarantine.ClassExhausted, quarantine.ClassPoison} {
			var keys []quarantine.CounterKey
			for shard := range quarantine.CounterShards {
				keys = append(keys, quarantine.StateCounterKey(fns.Source, stt, cl, shard))
			}
			got, err := store.ReadCounters(ctx, keys)
			if err != nil {
				return err
			}
			rep.Counters += len(keys)
			var n int64
			for _, v := range got {
				n += v
			}
			if want := recount[string(stt)+"/"+string(cl)]; n != want {
				rep.CounterDrift = append(rep.CounterDrift, fmt.Sprintf("%s/%s: counter %d, recount %d", stt, cl, n, want))
			}
		}
	}
	for _, sig := range slices.Sorted(maps.Keys(open)) {
		var keys []quarantine.CounterKey
		for shard := range quarantine.CounterShards {
			keys = append(keys, quarantine.OpenCounterKey(fns.Source, sig, shard))
		}
		got, err := store.ReadCounters(ctx, keys)
		if err != nil {
			return err
		}
		rep.Counters += len(keys)
		var n int64
		for _, v := range got {
			n += v
		}
		if n != open[sig] {
			rep.CounterDrift = append(rep.CounterDrift, fmt.Sprintf("open %s: counter %d, recount %d", sig, n, open[sig]))
		}
	}
	if err := s.checkLedger(ctx, records, changes); err != nil {
		return err
	}
	// Every object of the archive bucket (the archive and the ledger): one
	// version per key.
	versions := map[string]int{}
	p := s3.NewListObjectVersionsPaginator(s.st.Clients.S3, &s3.ListObjectVersionsInput{Bucket: aws.String(fns.ArchiveBucket)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return fmt.Errorf("list archive versions: %w", err)
		}
		for _, v := range page.Versions {
			versions[aws.ToString(v.Key)]++
		}
	}
	for k := range versions {
		if !strings.HasPrefix(k, "ledger/") {
			rep.ArchiveObjects++
		}
	}
	for _, k := range slices.Sorted(maps.Keys(versions)) {
		if versions[k] > 1 {
			rep.MultiVersion = append(rep.MultiVersion, fmt.Sprintf("%s: %d versions", k, versions[k]))
		}
	}
	return nil
}

// recordVersions decodes every record version in the table's stream.
func recordVersions(changes []streamChange) ([]*quarantine.Record, error) {
	var out []*quarantine.Record
	for _, c := range changes {
		if !dynamostore.IsRecordKey(c.rec.Change.Keys[dl.KeyAttr].String()) {
			continue
		}
		r, _, err := recordOf(c.rec.Change.NewImage)
		if err != nil {
			return nil, fmt.Errorf("change %s: %w", c.seq, err)
		}
		if r != nil {
			out = append(out, r)
		}
	}
	return out, nil
}

// mayRepeat collects, by record id, the rounds that some version of a
// record's history says may have reached SQS more than once
// (quarantine.RoundsThatMayRepeat). Given every version, it finds the
// entries a record's bounded history has since dropped.
func mayRepeat(versions []*quarantine.Record) map[string]map[string]bool {
	histories := map[string][]quarantine.Attempt{}
	for _, r := range versions {
		histories[r.DLQID] = append(histories[r.DLQID], r.Attempts...)
	}
	out := map[string]map[string]bool{}
	for id, attempts := range histories {
		for round := range quarantine.RoundsThatMayRepeat(attempts) {
			if out[id] == nil {
				out[id] = map[string]bool{}
			}
			out[id][strconv.Itoa(round)] = true
		}
	}
	return out
}

// checkArchived verifies an ARCHIVED stub against its object and that the
// object holds the original body verbatim.
func (s *soak) checkArchived(ctx context.Context, stub *quarantine.Record, body string) error {
	problems, err := s3store.VerifyStub(ctx, s.st.Clients.S3, stub)
	if err != nil {
		return err
	}
	if len(problems) > 0 {
		return fmt.Errorf("%v", problems)
	}
	env, err := s3store.ReadArchive(ctx, s.st.Clients.S3, stub.Archive)
	if err != nil {
		return err
	}
	got, err := env.Body()
	if err != nil {
		return err
	}
	if string(got) != body {
		return errors.New("archived body is not the original")
	}
	return nil
}

// sendsAndHistory lists, for a duplicate send the history does not
// explain, each message that carried it (its id and SQS's send time) and
// the record's history (times, stages, reasons, actors and message ids:
// no payload values), to find the cause from a failed run alone.
func sendsAndHistory(sends map[string]string, r *quarantine.Record) string {
	var b strings.Builder
	for _, id := range slices.SortedFunc(maps.Keys(sends), func(a, b string) int { return strings.Compare(sends[a], sends[b]) }) {
		fmt.Fprintf(&b, "\n      sent %s as %s", sends[id], id)
	}
	if r == nil {
		return b.String() + "\n      no record"
	}
	for _, a := range r.Attempts {
		fmt.Fprintf(&b, "\n      %s %s: %q by %s", a.At.Time.UTC().Format("15:04:05.000"), a.Stage, a.Reason, a.Actor)
		if a.MessageID != "" {
			fmt.Fprintf(&b, " (message %s)", a.MessageID)
		}
	}
	return b.String()
}

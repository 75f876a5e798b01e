package demo

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/dlqquarantine/dlqq/shared/adapter/dynamostore"
	"github.com/dlqquarantine/dlqq/shared/adapter/s3store"
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
	// Duplicate sends, and whether the record's history explains each.
	dupsOf := map[string]int{}
	for _, k := range slices.SortedFunc(maps.Keys(c.sends), func(a, b replay) int { return strings.Compare(a.id+"|"+a.round, b.id+"|"+b.round) }) {
		n := len(c.sends[k])
		if n < 2 {
			continue
		}
		rep.DuplicateSends += n - 1
		if r := records[k.id]; r == nil || !slices.ContainsFunc(r.Attempts, func(a quarantine.Attempt) bool { return explainsDuplicate(a, k.round) }) {
			rep.Unexplained = append(rep.Unexplained, fmt.Sprintf("%s round %s sent %d times; its history has neither a lease takeover nor a possible send of that round", k.id, k.round, n))
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
	if err := s.checkLedger(ctx, records); err != nil {
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

// explainsDuplicate reports whether a history entry explains a second send
// of round: a takeover of the round's expired lease ("lease expired; round
// 2 reclaimed, …"), or a send of the round whose outcome was ambiguous
// ("send outcome unknown (round 2): possibly sent", "sent (round 2); an
// earlier try may also have been enqueued, possibly sent twice").
func explainsDuplicate(a quarantine.Attempt, round string) bool {
	return strings.HasPrefix(a.Reason, "lease expired; round "+round+" reclaimed") ||
		(strings.Contains(a.Reason, "possibly sent") && strings.Contains(a.Reason, "(round "+round+")"))
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

package sweeper_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/dlqquarantine/dlqq/shared/adapter/s3store"
	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
)

// The payload bucket's lifecycle removes only versions tagged archived
// (infra/template.yaml). The sweeper marks a record's claim-check version
// only once the record's ARCHIVED stub is written: not a record whose stub
// write lost a race, not a record that is not due.
func TestOnlyArchivedRecordsBodiesAreMarked(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	big := strings.Repeat("b", 200<<10)
	archived := e.park(t, e.quarantine(t, "ma", inv("ma", big)))
	raced := e.park(t, e.quarantine(t, "mb", inv("mb", big)))
	open := e.quarantine(t, "mq", inv("mq", big))
	for _, r := range []*quarantine.Record{archived, raced, open} {
		if r.BodyRef == nil {
			t.Fatalf("%s: body not claim-checked", r.DLQID)
		}
	}
	e.clock.Advance(2 * time.Hour)
	// raced changes after the sweeper read it: its stub write conflicts.
	change := func() {
		cur, _ := e.store.Get(ctx, raced.DLQID)
		next, err := cur.Arrive(quarantine.Attempt{At: quarantine.At(e.clock.Now()), Stage: "consumer", Reason: "again", MessageID: "x", Actor: quarantine.ActorIngest},
			quarantine.Classification{Class: quarantine.ClassExhausted, Stage: "consumer", Reason: "again", Signature: "consumer|again|"}, 20, e.clock.Now())
		if err != nil {
			t.Error(err)
			return
		}
		if err := e.store.Replace(ctx, cur, next); err != nil {
			t.Error(err)
		}
	}
	rep, err := e.sweeper(&raceOne{Store: e.store, id: raced.DLQID, change: change}, nil).Run(ctx)
	if err != nil || len(rep.Archived) != 1 || rep.Archived[0].ID != archived.DLQID {
		t.Fatalf("run: %+v %v", rep, err)
	}
	tags := func(ref *quarantine.ObjectRef) map[string]string {
		out, err := e.st.Clients.S3.GetObjectTagging(ctx, &s3.GetObjectTaggingInput{Bucket: aws.String(ref.Bucket), Key: aws.String(ref.Key), VersionId: aws.String(ref.VersionID)})
		if err != nil {
			t.Fatalf("tags of %s: %v", ref.Key, err)
		}
		m := map[string]string{}
		for _, tg := range out.TagSet {
			m[aws.ToString(tg.Key)] = aws.ToString(tg.Value)
		}
		return m
	}
	if got := tags(archived.BodyRef); got[s3store.ArchivedTagKey] != s3store.ArchivedTagValue {
		t.Errorf("the archived record's body version is not marked for the lifecycle: %v", got)
	}
	for _, r := range []*quarantine.Record{raced, open} {
		if got := tags(r.BodyRef); got[s3store.ArchivedTagKey] != "" {
			t.Errorf("%s is not archived, yet its body is marked for removal: %v", r.DLQID, got)
		}
		if _, err := quarantine.LoadBody(ctx, e.payloads, e.get(t, r.DLQID)); err != nil {
			t.Errorf("%s: body unreadable: %v", r.DLQID, err)
		}
	}
}

// raceOne changes one record just before the sweeper writes its stub.
type raceOne struct {
	quarantine.Store
	id     string
	change func()
}

func (s *raceOne) Replace(ctx context.Context, prev, r *quarantine.Record) error {
	if r.Status == quarantine.StatusArchived && r.DLQID == s.id {
		s.change()
	}
	return s.Store.Replace(ctx, prev, r)
}

package dlqctl

import (
	"testing"

	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
)

// ls counts a send that got no answer from SQS (possibly sent: it counts
// toward the cap and may have been enqueued) as a replay, and marks it;
// a claim's or release's redrive entry is no replay.
func TestReplaysCountThePossiblySent(t *testing.T) {
	t.Parallel()
	r := &quarantine.Record{DLQID: "orders#o1", AttemptCount: 5, Attempts: []quarantine.Attempt{
		{Kind: quarantine.AttemptArrival, Stage: "consumer", Actor: quarantine.ActorIngest},
		{Stage: quarantine.StageRedrive, MessageID: "m-1", Reason: "sent"},
		{Stage: quarantine.StageRedrive, Reason: "send outcome unknown (round 2, RequestTimeout): possibly sent; counted toward the cap"},
		{Stage: quarantine.StageRedrive, Reason: "send failed after retries: InternalError"},
		{Kind: quarantine.AttemptArrival, Stage: "consumer", Actor: quarantine.ActorIngest},
	}}
	s := summarize(r)
	if s.Failures != 2 || s.Replays != 2 || s.PossiblySent != 1 || replaysCell(s) != "2 (1?)" {
		t.Fatalf("failures %d, replays %d, possibly sent %d, cell %q; want 2, 2, 1, \"2 (1?)\"", s.Failures, s.Replays, s.PossiblySent, replaysCell(s))
	}
	r.AttemptCount = 9
	if s := summarize(r); replaysCell(s) != "2+ (1?)" {
		t.Fatalf("a trimmed history: cell %q, want \"2+ (1?)\"", replaysCell(s))
	}
	r.Attempts = r.Attempts[:2]
	if s := summarize(r); s.PossiblySent != 0 || replaysCell(s) != "1+" {
		t.Fatalf("no possibly sent replay: %d, cell %q", s.PossiblySent, replaysCell(s))
	}
}

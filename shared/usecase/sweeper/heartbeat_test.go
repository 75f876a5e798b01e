package sweeper_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatch"
	cwtypes "github.com/aws/aws-sdk-go-v2/service/cloudwatch/types"

	"github.com/dlqquarantine/dlqq/shared/dev/memstore"
	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
	"github.com/dlqquarantine/dlqq/shared/runtime/clock"
	"github.com/dlqquarantine/dlqq/shared/usecase/ingest"
	"github.com/dlqquarantine/dlqq/shared/usecase/sweeper"
)

// putLog records the data of every PutMetricData.
type putLog struct {
	mu   sync.Mutex
	data []cwtypes.MetricDatum
}

func (p *putLog) PutMetricData(_ context.Context, in *cloudwatch.PutMetricDataInput, _ ...func(*cloudwatch.Options)) (*cloudwatch.PutMetricDataOutput, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.data = append(p.data, in.MetricData...)
	return &cloudwatch.PutMetricDataOutput{}, nil
}

// beats returns the heartbeat data published, as "value Table=name".
func (p *putLog) beats() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for _, d := range p.data {
		if aws.ToString(d.MetricName) != sweeper.MetricCompleted {
			continue
		}
		s := ""
		if aws.ToFloat64(d.Value) == 1 {
			s = "1"
		}
		for _, dim := range d.Dimensions {
			s += " " + aws.ToString(dim.Name) + "=" + aws.ToString(dim.Value)
		}
		out = append(out, s)
	}
	return out
}

// brokenLister cannot list.
type brokenLister struct{ quarantine.Lister }

func (brokenLister) List(context.Context, quarantine.ListQuery) (quarantine.ListPage, error) {
	return quarantine.ListPage{}, errors.New("throttled")
}

// Every run that completes publishes the heartbeat (SweepsCompleted 1,
// with the table as dimension) that the template's SweeperHeartbeatAlarm
// watches: one with nothing to do, and one cut short by its deadline
// (which leaves the rest to the next run). A run that fails before it
// completes publishes nothing, which is what a heartbeat must do.
func TestEveryCompletedRunPublishesTheHeartbeat(t *testing.T) {
	t.Parallel()
	src := &quarantine.Source{Name: "inventory", ARN: "arn:aws:sqs:us-east-1:000000000000:inventory", IdempotencyPointer: "/event_id", RedriveCap: 3}
	for _, c := range []struct {
		name    string
		parked  int
		ctx     func() (context.Context, context.CancelFunc)
		broken  bool
		stopped string
		beats   int
	}{
		{name: "nothing to do", ctx: background, stopped: "done", beats: 1},
		// The deadline is already inside the run's margin (20 s): the run
		// archives nothing and leaves both records to the next run.
		{name: "cut short by its deadline", parked: 2, stopped: "deadline", beats: 1, ctx: func() (context.Context, context.CancelFunc) {
			return context.WithDeadline(context.Background(), time.Now().Add(5*time.Second))
		}},
		{name: "cannot list", broken: true, ctx: background, beats: 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			clk := clock.NewFake(time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC))
			mem := memstore.New()
			q := ingest.NewQuarantiner(mem, memstore.NewPayloads(), clk.Now, ingest.QuarantinerConfig{Sources: map[string]*quarantine.Source{"inventory": src}})
			for i := range c.parked {
				out, err := q.Quarantine(context.Background(), ingest.Message{MessageID: "m", SourceARN: src.ARN, Body: []byte(inv(string(rune('a'+i)), ""))})
				if err != nil {
					t.Fatal(err)
				}
				if _, err := mem.Update(context.Background(), out.Record.DLQID, func(r *quarantine.Record) (*quarantine.Record, error) { return r.ParkPoison("test", clk.Now()) }); err != nil {
					t.Fatal(err)
				}
			}
			clk.Advance(2 * time.Hour)
			var lister quarantine.Lister = mem
			if c.broken {
				lister = brokenLister{mem}
			}
			puts := &putLog{}
			svc := sweeper.New(mem, lister, memstore.NewPayloads(), nil, puts, clk.Now, slog.New(slog.NewJSONHandler(io.Discard, nil)),
				sweeper.Config{Bucket: "archive", ParkAge: time.Hour, ResolvedAge: time.Hour, Retention: 24 * time.Hour, Table: "prod-quarantine-1"})
			ctx, cancel := c.ctx()
			defer cancel()
			rep, err := svc.Run(ctx)
			if c.broken != (err != nil) {
				t.Fatalf("run: %+v, %v", rep, err)
			}
			if rep != nil && (rep.Stopped != c.stopped || len(rep.Archived) != 0 || rep.Remaining != c.parked) {
				t.Fatalf("report %+v, want stopped %q with %d remaining", rep, c.stopped, c.parked)
			}
			want := []string(nil)
			for range c.beats {
				want = append(want, "1 Table=prod-quarantine-1")
			}
			if got := puts.beats(); len(got) != len(want) || (len(want) > 0 && got[0] != want[0]) {
				t.Fatalf("heartbeats %q, want %q", got, want)
			}
		})
	}
}

func background() (context.Context, context.CancelFunc) {
	return context.WithCancel(context.Background())
}

// The function's configuration names its table as the heartbeat's
// dimension.
func TestHeartbeatDimensionFromTheEnvironment(t *testing.T) {
	t.Parallel()
	cfg, err := sweeper.ConfigFromEnv(func(k string) string {
		return map[string]string{"TABLE_NAME": "prod-quarantine-1", "ARCHIVE_BUCKET": "archive"}[k]
	})
	if err != nil || cfg.Sweeper.Table != "prod-quarantine-1" {
		t.Fatalf("config %+v, %v", cfg.Sweeper, err)
	}
}

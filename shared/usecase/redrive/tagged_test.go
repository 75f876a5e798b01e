package redrive_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/smithy-go"

	"github.com/dlqquarantine/dlqq/shared/dev/memstore"
	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
	"github.com/dlqquarantine/dlqq/shared/domain/sources"
	"github.com/dlqquarantine/dlqq/shared/usecase/ingest"
	"github.com/dlqquarantine/dlqq/shared/usecase/redrive"
)

// A source granted by its queue's tag alone (TaggedSourceAccess: a source
// of the sources file in no ARN list) is replayed only while its queue
// carries dlq-quarantine:source=<stack>: the run reads the tag before it
// claims anything, and refuses without it (no tag, another stack's, the
// tags unreadable), leaving every record as it was. Real IAM would refuse
// the sends too; kumo enforces no IAM, so the run's own check is what
// keeps a replay from starting, claims and all, toward a queue the role
// may not reach.
func TestATaggedSourceReplaysOnlyWhileItsQueueCarriesTheTag(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, fifo := range []bool{false, true} {
		t.Run(map[bool]string{false: "standard", true: "fifo"}[fifo], func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, fifo)
			ids := e.seed(t, 3, none)
			cfg := redrive.Config{TaggedSources: map[string]bool{e.src.Name: true}, SourceTagValue: "dlqq-prod"}
			req := redrive.Request{Source: e.src.Name, MaxMessages: 10, RequestedBy: "ops@example.com"}
			tag := func(v string) {
				t.Helper()
				var err error
				if v == "" {
					_, err = stack.Clients.SQS.UntagQueue(ctx, &sqs.UntagQueueInput{QueueUrl: aws.String(e.srcURL), TagKeys: []string{sources.SourceTagKey}})
				} else {
					_, err = stack.Clients.SQS.TagQueue(ctx, &sqs.TagQueueInput{QueueUrl: aws.String(e.srcURL), Tags: map[string]string{sources.SourceTagKey: v}})
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			unchanged := func(why string) {
				t.Helper()
				for _, id := range ids {
					if r := e.get(t, id); r.Status != quarantine.StatusQuarantined || r.Version != 1 {
						t.Fatalf("%s: record %s is %s at version %d", why, id, r.Status, r.Version)
					}
				}
				if got := e.receive(t); len(got) != 0 {
					t.Fatalf("%s: %d messages sent", why, len(got))
				}
			}
			refused := func(svc *redrive.Service, why string) {
				t.Helper()
				rep, err := svc.Run(ctx, req)
				if !errors.Is(err, redrive.ErrSourceUntagged) || !strings.Contains(err.Error(), sources.SourceTagKey+"=dlqq-prod") {
					t.Fatalf("%s: %+v, %v", why, rep, err)
				}
				unchanged(why)
			}
			refused(e.service(nil, nil, cfg), "untagged")
			tag("dlqq-staging")
			refused(e.service(nil, nil, cfg), "another stack's tag")
			tag("dlqq-prod")
			refused(e.service(noTags{stack.Clients.SQS}, nil, cfg), "tags unreadable")

			rep, err := e.service(nil, nil, cfg).Run(ctx, req)
			if err != nil || rep.Redriven.Count != 3 {
				t.Fatalf("tagged: %s, %v", rep.Summary(), err)
			}
			if got := e.receive(t); len(got) != 3 {
				t.Fatalf("tagged: %d messages sent, want 3", len(got))
			}

			// Untagged again: the next run reads the tag anew.
			tag("")
			if _, err := e.service(nil, nil, cfg).Run(ctx, req); !errors.Is(err, redrive.ErrSourceUntagged) {
				t.Fatalf("untagged after a replay: %v", err)
			}
			// A source in an ARN list is never asked for its tags.
			rep, err = e.service(noTags{stack.Clients.SQS}, nil, redrive.Config{}).Run(ctx, redrive.Request{Source: e.src.Name, MaxMessages: 10, RequestedBy: "ops@example.com", IDs: ids})
			if err != nil {
				t.Fatalf("a listed source: %s, %v", rep.Summary(), err)
			}
		})
	}
}

// noTags is a sender whose role may not read queue tags.
type noTags struct{ redrive.Sender }

func (noTags) ListQueueTags(context.Context, *sqs.ListQueueTagsInput, ...func(*sqs.Options)) (*sqs.ListQueueTagsOutput, error) {
	return nil, errors.New("AccessDenied (test)")
}

// A replay into another queue checks the queue it sends to: a target
// granted by its tag alone, untagged, refuses the approved run before any
// record of the source is claimed; tagged, the run replays into it.
func TestARetargetIntoATaggedSourceChecksTheTarget(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a, b := newEnv(t, false), newEnv(t, false)
	both := map[string]*quarantine.Source{a.src.Name: a.src, b.src.Name: b.src}
	b.clock = a.clock
	a.q = ingest.NewQuarantiner(a.store, a.payloads, a.clock.Now, ingest.QuarantinerConfig{Sources: both})
	ids := a.seed(t, 2, none)
	svc := redrive.New(a.store, a.lister, a.payloads, stack.Clients.SQS, both, a.clock.Now, slog.New(slog.NewJSONHandler(io.Discard, nil)),
		redrive.Config{ApprovalThreshold: 10000, MaxBackoff: 20 * time.Millisecond, TaggedSources: map[string]bool{b.src.Name: true}, SourceTagValue: "dlqq-prod"}).
		WithApprovals(memstore.NewApprovals())
	req := redrive.Request{Source: a.src.Name, Target: b.src.Name, MaxMessages: 10}
	if _, err := runApproved(ctx, svc, req); !errors.Is(err, redrive.ErrSourceUntagged) {
		t.Fatalf("into an untagged target: %v", err)
	}
	for _, id := range ids {
		if r := a.get(t, id); r.Status != quarantine.StatusQuarantined || r.Version != 1 {
			t.Fatalf("record %s is %s at version %d", id, r.Status, r.Version)
		}
	}
	if _, err := stack.Clients.SQS.TagQueue(ctx, &sqs.TagQueueInput{QueueUrl: aws.String(b.srcURL), Tags: map[string]string{sources.SourceTagKey: "dlqq-prod"}}); err != nil {
		t.Fatal(err)
	}
	rep, err := runApproved(ctx, svc, req)
	if err != nil || rep.Redriven.Count != 2 {
		t.Fatalf("into the tagged target: %s, %v", rep.Summary(), err)
	}
	if got := b.receive(t); len(got) != 2 {
		t.Fatalf("the target got %d messages", len(got))
	}
}

// On real AWS the grant rests on the tag for GetQueueUrl too: a queue
// without it is refused there, before its tags can be read, and the run
// says so the same way (nothing claimed). A run never replays into a
// queue of another Region than the function's: the SQS client would look
// the name up in its own.
func TestATaggedSourceRefusedAtItsLookupAndAnotherRegion(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEnv(t, false)
	ids := e.seed(t, 2, none)
	req := redrive.Request{Source: e.src.Name, MaxMessages: 10, RequestedBy: "ops@example.com"}
	unchanged := func(why string) {
		t.Helper()
		for _, id := range ids {
			if r := e.get(t, id); r.Status != quarantine.StatusQuarantined || r.Version != 1 {
				t.Fatalf("%s: record %s is %s at version %d", why, id, r.Status, r.Version)
			}
		}
	}
	tagged := redrive.Config{TaggedSources: map[string]bool{e.src.Name: true}, SourceTagValue: "dlqq-prod"}
	if _, err := e.service(lookupRefused{stack.Clients.SQS}, nil, tagged).Run(ctx, req); !errors.Is(err, redrive.ErrSourceUntagged) {
		t.Fatalf("lookup refused: %v", err)
	}
	unchanged("lookup refused")
	parts := strings.Split(e.src.ARN, ":")
	other := map[string]string{"us-east-1": "eu-west-1"}[parts[3]]
	if other == "" {
		t.Fatalf("the test stack's Region is %s", parts[3])
	}
	if _, err := e.service(nil, nil, redrive.Config{Region: other}).Run(ctx, req); !errors.Is(err, redrive.ErrOtherRegion) {
		t.Fatalf("another Region: %v", err)
	}
	unchanged("another Region")
	if rep, err := e.service(nil, nil, redrive.Config{Region: parts[3]}).Run(ctx, req); err != nil || rep.Redriven.Count != 2 {
		t.Fatalf("its own Region: %s, %v", rep.Summary(), err)
	}
}

// lookupRefused is a sender whose GetQueueUrl IAM refuses.
type lookupRefused struct{ redrive.Sender }

func (lookupRefused) GetQueueUrl(context.Context, *sqs.GetQueueUrlInput, ...func(*sqs.Options)) (*sqs.GetQueueUrlOutput, error) {
	return nil, &smithy.GenericAPIError{Code: "AccessDenied", Message: "not authorized (test)"}
}

// The redrive function's configuration names the sources its role reaches
// by tag alone, the tag's value and its Region.
func TestConfigNamesTheTaggedSources(t *testing.T) {
	t.Parallel()
	vars := map[string]string{
		"TABLE_NAME":                "t",
		sources.EnvSources:          `{"own":{"arn":"arn:aws:sqs:eu-west-1:111122223333:own","dlq":"dlqq-dlq"}}`,
		sources.EnvExtraSources:     `{"tagged":{"arn":"arn:aws:sqs:eu-west-1:111122223333:tagged"}}`,
		sources.EnvDefaultDLQ:       "dlqq-dlq",
		sources.EnvSourceTagAccount: "111122223333", sources.EnvSourceTagRegion: "eu-west-1", sources.EnvSourceTagValue: "dlqq",
		"AWS_REGION": "eu-west-1",
	}
	cfg, err := redrive.ConfigFromEnv(func(k string) string { return vars[k] })
	if err != nil {
		t.Fatal(err)
	}
	if !cfg.Service.TaggedSources["tagged"] || cfg.Service.TaggedSources["own"] || cfg.Service.SourceTagValue != "dlqq" || cfg.Service.Region != "eu-west-1" {
		t.Fatalf("config: %+v", cfg.Service)
	}
}

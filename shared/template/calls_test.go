package template_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go/middleware"

	"github.com/dlqquarantine/dlqq/shared/awsclients"
	"github.com/dlqquarantine/dlqq/shared/demo"
	"github.com/dlqquarantine/dlqq/shared/dynamostore"
	"github.com/dlqquarantine/dlqq/shared/embedded"
	"github.com/dlqquarantine/dlqq/shared/localrunner"
	"github.com/dlqquarantine/dlqq/shared/policy"
	"github.com/dlqquarantine/dlqq/shared/quarantine"
)

// recorder notes the IAM action every SDK call needs.
type recorder struct {
	mu      sync.Mutex
	actions map[string]bool
}

func (r *recorder) option(stack *middleware.Stack) error {
	return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("record-iam-actions",
		func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
			svc, op := awsmiddleware.GetServiceID(ctx), awsmiddleware.GetOperationName(ctx)
			var need []string
			switch svc {
			case "DynamoDB":
				need = []string{"dynamodb:" + op}
				if p, ok := in.Parameters.(*dynamodb.TransactWriteItemsInput); ok {
					// IAM authorizes each item of a transaction by its own action.
					need = nil
					for _, it := range p.TransactItems {
						switch {
						case it.Put != nil:
							need = append(need, "dynamodb:PutItem")
						case it.Update != nil:
							need = append(need, "dynamodb:UpdateItem")
						case it.Delete != nil:
							need = append(need, "dynamodb:DeleteItem")
						case it.ConditionCheck != nil:
							need = append(need, "dynamodb:ConditionCheckItem")
						}
					}
				}
			case "S3":
				switch p := in.Parameters.(type) {
				case *s3.ListObjectVersionsInput:
					need = []string{"s3:ListBucketVersions"}
				case *s3.HeadObjectInput:
					need = []string{"s3:GetObject"}
				case *s3.GetObjectInput:
					need = []string{"s3:GetObject"}
					if p.VersionId != nil {
						need = []string{"s3:GetObjectVersion"}
					}
				case *s3.PutObjectInput:
					need = []string{"s3:PutObject"}
					if p.ObjectLockMode != "" {
						need = append(need, "s3:PutObjectRetention")
					}
				default:
					need = []string{"s3:" + op}
				}
			case "SQS":
				need = []string{"sqs:" + strings.TrimSuffix(op, "Batch")}
			case "CloudWatch":
				need = []string{"cloudwatch:" + op}
			default:
				need = []string{strings.ToLower(svc) + ":" + op}
			}
			r.mu.Lock()
			for _, a := range need {
				r.actions[a] = true
			}
			r.mu.Unlock()
			return next.HandleInitialize(ctx, in)
		}), middleware.Before)
}

// Every AWS call each function makes, through every path the tests drive
// (ingest with a claim-checked body, redrive, settle, correct, standing
// policies, the sweeper, metrics), is granted by its role in the template.
// The emulators enforce no IAM, so this is what stands between a green
// suite and AccessDenied on the first deploy.
func TestEveryCallIsGrantedByItsRole(t *testing.T) {
	ctx := context.Background()
	st, err := embedded.Start(ctx, embedded.Options{Params: demo.StackParams, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	log := slog.New(slog.NewJSONHandler(io.Discard, nil))
	recs := map[string]*recorder{}
	fns := map[string]*localrunner.Functions{}
	for _, name := range []string{"IngestRole", "RedriveRole", "SweeperRole", "MetricsRole"} {
		recs[name] = &recorder{actions: map[string]bool{}}
		cfg := st.AWS.Copy()
		cfg.APIOptions = append(cfg.APIOptions, recs[name].option)
		if fns[name], err = localrunner.NewFunctions(st, awsclients.New(cfg, awsclients.Options{Local: true}), log, io.Discard); err != nil {
			t.Fatal(err)
		}
	}
	f := fns["IngestRole"]
	src := f.IngestConfig.Sources[f.Source]
	var msgs []events.SQSMessage
	for i, body := range []string{
		`{"event_id":"e1","ndc":"12345-678-90","lot":"L","quantity_delta":1,"schedule":"CII","facility":"F","occurred_at":"2026-11-29T09:00:00Z"}`,
		`{"event_id":"e2","ndc":"NDC?","lot":"L","quantity_delta":1,"schedule":"CII","facility":"F","occurred_at":"2026-11-29T09:00:00Z"}`,
		`{"event_id":"e3","ndc":"12345-678-90","lot":"L","quantity_delta":1,"schedule":"CII","facility":"F","occurred_at":"2026-11-29T09:00:00Z","note":"` + strings.Repeat("x", 200<<10) + `"}`,
		`{"event_id":"e4","ndc":"12345-678-90","lot":"L","quantity_delta":1,"schedule":"CII","facility":"F","occurred_at":"2026-11-29T09:00:00Z"}`,
		`{"event_id":"e5","ndc":"12345-678-90","lot":"L","quantity_delta":1,"schedule":"CII","facility":"F","occurred_at":"2026-11-29T09:00:00Z"}`,
	} {
		msgs = append(msgs, events.SQSMessage{MessageId: fmt.Sprint("m", i), Body: body, EventSource: "aws:sqs", EventSourceARN: st.QueueARNs["DeadLetterQueue"],
			Attributes: map[string]string{"ApproximateReceiveCount": "3", "SentTimestamp": "1764400000000", "DeadLetterQueueSourceArn": src.ARN}})
	}
	// e3's body is claim-checked. Its object is there already, as after a
	// crash between the upload and the record's write (or a put whose
	// answer was lost): ingest's conditional put gets 412 and reads the
	// existing object to verify it (HeadObject, maybe GetObject).
	e3 := msgs[2].Body
	if _, err := st.Clients.S3.PutObject(ctx, &s3.PutObjectInput{
		Bucket: aws.String(f.IngestConfig.PayloadBucket), Body: strings.NewReader(e3),
		Key: aws.String("bodies/" + f.Source + "/" + quarantine.BodySHA256([]byte(quarantine.RecordID(f.Source, "e3")))[:32] + "/" + quarantine.BodySHA256([]byte(e3))),
	}); err != nil {
		t.Fatal(err)
	}
	resp, err := f.Ingest.Handle(ctx, events.SQSEvent{Records: msgs})
	if err != nil || len(resp.BatchItemFailures) > 0 {
		t.Fatalf("ingest: %+v %v", resp, err)
	}
	id := func(key string) string { return quarantine.RecordID(f.Source, key) }

	// Park one for the sweeper (parked records are due at once here).
	store := dynamostore.New(st.Clients.DynamoDB, f.IngestConfig.TableName)
	rec, err := store.Get(ctx, id("e4"))
	if err != nil {
		t.Fatal(err)
	}
	parked, err := rec.ParkManual("ops", "audit", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if err := store.Replace(ctx, parked, rec.Version); err != nil {
		t.Fatal(err)
	}
	// Tamper with e5 behind its seal: redrive holds it (a conditional
	// update and a counter in one transaction).
	forged, err := store.Get(ctx, id("e5"))
	if err != nil {
		t.Fatal(err)
	}
	forged.RedriveCap = 99
	item, err := dynamostore.Marshal(forged)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Clients.DynamoDB.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(f.IngestConfig.TableName), Item: item}); err != nil {
		t.Fatal(err)
	}
	r := fns["RedriveRole"].Redrive
	for _, req := range []string{
		`{"source":"` + f.Source + `","ids":["` + id("e1") + `","` + id("e3") + `","` + id("e5") + `"],"requested_by":"ops"}`,
		`{"action":"settle","source":"` + f.Source + `","requested_by":"schedule:settle"}`,
		`{"action":"correct","source":"` + f.Source + `","ids":["` + id("e2") + `"],"requested_by":"ops","reason":"typo","payload":"{\"event_id\":\"e2\",\"ndc\":\"12345-678-90\",\"lot\":\"L\",\"quantity_delta\":1,\"schedule\":\"CII\",\"facility\":\"F\",\"occurred_at\":\"2026-11-29T09:00:00Z\"}"}`,
		`{"action":"policies","source":"` + f.Source + `","requested_by":"schedule:policies"}`,
	} {
		if strings.Contains(req, `"policies"`) {
			p, err := policy.New(policy.Spec{Source: f.Source, MinAge: time.Nanosecond, MaxPerRun: 5, ExpiresAt: time.Now().Add(time.Hour)}, "lead", time.Now())
			if err != nil {
				t.Fatal(err)
			}
			if err := policy.NewStore(st.Clients.DynamoDB, f.IngestConfig.TableName).Create(ctx, p); err != nil {
				t.Fatal(err)
			}
		}
		rep, err := r.Handle(ctx, []byte(req))
		if err != nil {
			t.Fatalf("redrive %s: %v", req[:40], err)
		}
		if strings.Contains(req, id("e5")) && rep.Integrity.Count != 1 {
			t.Fatalf("the tampered record was not held: %+v", rep)
		}
	}
	if rep, err := fns["SweeperRole"].Sweeper.Run(ctx); err != nil || len(rep.Archived) != 1 {
		t.Fatalf("sweeper: %+v %v", rep, err)
	}
	if _, err := fns["MetricsRole"].Metrics.Run(ctx); err != nil {
		t.Fatal(err)
	}

	if !recs["IngestRole"].actions["s3:GetObject"] {
		t.Fatal("ingest did not read the existing claim-check object: the 412 path was not driven")
	}
	for role, rec := range recs {
		granted := grants(t, st.Template, role)
		used := slices.Sorted(maps.Keys(rec.actions))
		if len(used) == 0 {
			t.Fatalf("%s: no calls recorded", role)
		}
		for _, a := range used {
			if _, ok := granted[a]; !ok {
				t.Errorf("%s does not grant %s, which its function calls", role, a)
			}
		}
		t.Logf("%s uses %v", role, used)
	}
}

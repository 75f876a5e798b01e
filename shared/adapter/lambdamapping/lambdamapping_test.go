package lambdamapping

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/lambda/types"

	dl "github.com/dlqquarantine/dlqq/shared/domain/ledger"
)

type pages struct {
	t     *testing.T
	pages []lambda.ListEventSourceMappingsOutput
	calls int
	err   error
}

func (p *pages) ListEventSourceMappings(_ context.Context, in *lambda.ListEventSourceMappingsInput, _ ...func(*lambda.Options)) (*lambda.ListEventSourceMappingsOutput, error) {
	if aws.ToString(in.FunctionName) != "prod-ledger" || aws.ToString(in.EventSourceArn) != "arn:stream" {
		p.t.Fatalf("asked for %q on %q", aws.ToString(in.FunctionName), aws.ToString(in.EventSourceArn))
	}
	if p.err != nil {
		return nil, p.err
	}
	if (p.calls == 0) != (in.Marker == nil) {
		p.t.Fatalf("call %d with marker %v", p.calls, in.Marker)
	}
	out := p.pages[p.calls]
	p.calls++
	return &out, nil
}

func TestMappingsListsEveryPage(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 12, 1, 9, 0, 0, 0, time.FixedZone("x", 3600))
	api := &pages{t: t, pages: []lambda.ListEventSourceMappingsOutput{
		{EventSourceMappings: []types.EventSourceMappingConfiguration{{UUID: aws.String("u-1"), State: aws.String("Enabled"), LastModified: &at,
			EventSourceArn: aws.String("arn:stream"), StartingPosition: types.EventSourcePositionTrimHorizon}}, NextMarker: aws.String("m")},
		{EventSourceMappings: []types.EventSourceMappingConfiguration{{UUID: aws.String("u-2"), State: aws.String("Disabled"), EventSourceArn: aws.String("arn:stream")}}},
	}}
	got, err := Mappings{API: api, Function: "prod-ledger", StreamARN: "arn:stream"}.Mappings(context.Background())
	want := []dl.Mapping{{UUID: "u-1", State: "Enabled", LastModified: "2026-12-01T08:00:00Z", EventSourceARN: "arn:stream", StartingPosition: "TRIM_HORIZON"},
		{UUID: "u-2", State: "Disabled", EventSourceARN: "arn:stream"}}
	if err != nil || len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("got %+v %v, want %+v", got, err, want)
	}

	api = &pages{t: t, err: errors.New("AccessDeniedException")}
	if _, err := (Mappings{API: api, Function: "prod-ledger", StreamARN: "arn:stream"}).Mappings(context.Background()); err == nil {
		t.Fatal("an error was lost")
	}
	if _, err := (Mappings{API: api}).Mappings(context.Background()); err == nil {
		t.Fatal("no function name: no error")
	}
}

// anySource answers ListEventSourceMappings for a function on every source
// (no EventSourceArn in the request).
type anySource struct {
	t     *testing.T
	pages []lambda.ListEventSourceMappingsOutput
	calls int
}

func (a *anySource) ListEventSourceMappings(_ context.Context, in *lambda.ListEventSourceMappingsInput, _ ...func(*lambda.Options)) (*lambda.ListEventSourceMappingsOutput, error) {
	if aws.ToString(in.FunctionName) != "prod-digest" || in.EventSourceArn != nil {
		a.t.Fatalf("asked for %q on %v", aws.ToString(in.FunctionName), in.EventSourceArn)
	}
	out := a.pages[a.calls]
	a.calls++
	return &out, nil
}

// The digest function's own mappings are listed on every source, every
// page: a queue or a stream attached to it is found.
func TestAnySourceListsEveryMappingOfTheFunction(t *testing.T) {
	t.Parallel()
	api := &anySource{t: t, pages: []lambda.ListEventSourceMappingsOutput{
		{EventSourceMappings: []types.EventSourceMappingConfiguration{{UUID: aws.String("u-1"), State: aws.String("Enabled"), EventSourceArn: aws.String("arn:aws:sqs:eu-west-1:1:q")}}, NextMarker: aws.String("m")},
		{EventSourceMappings: []types.EventSourceMappingConfiguration{{UUID: aws.String("u-2"), State: aws.String("Enabled"), EventSourceArn: aws.String("arn:stream")}}},
	}}
	got, err := AnySource{API: api, Function: "prod-digest"}.Mappings(context.Background())
	if err != nil || len(got) != 2 || got[0].EventSourceARN != "arn:aws:sqs:eu-west-1:1:q" || got[1].UUID != "u-2" {
		t.Fatalf("got %+v %v", got, err)
	}
	if _, err := (AnySource{API: api}).Mappings(context.Background()); err == nil {
		t.Fatal("no function name: no error")
	}
}

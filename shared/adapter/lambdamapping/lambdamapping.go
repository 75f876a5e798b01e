// Package lambdamapping reads the ledger functions' event source mappings
// (Lambda ListEventSourceMappings) for the digest run's pipeline check
// (usecase/ledger pipeline.go): the stream function's on its stream, and
// the digest function's own on any source. ListEventSourceMappings
// supports no resource-level permission: the ledger role is granted it on
// Resource "*" (infra/template.yaml, ReadItsMapping).
package lambdamapping

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/lambda"

	dl "github.com/dlqquarantine/dlqq/shared/domain/ledger"
)

// API is what Mappings needs of the Lambda client.
type API interface {
	ListEventSourceMappings(ctx context.Context, in *lambda.ListEventSourceMappingsInput, opts ...func(*lambda.Options)) (*lambda.ListEventSourceMappingsOutput, error)
}

// maxPages bounds the pages read (a function has a handful of mappings).
const maxPages = 100

// Mappings lists Function's mappings on StreamARN.
type Mappings struct {
	API API
	// Function is the function's name or ARN (AWS_LAMBDA_FUNCTION_NAME).
	Function  string
	StreamARN string
}

// Mappings returns every mapping ListEventSourceMappings lists, every page.
func (m Mappings) Mappings(ctx context.Context) ([]dl.Mapping, error) {
	if m.Function == "" || m.StreamARN == "" {
		return nil, errors.New("list event source mappings: no function name or stream ARN")
	}
	return list(ctx, m.API, &lambda.ListEventSourceMappingsInput{FunctionName: aws.String(m.Function), EventSourceArn: aws.String(m.StreamARN)})
}

// AnySource lists Function's mappings on every event source (a stream, a
// queue, anything): the digest function should have none.
type AnySource struct {
	API API
	// Function is the function's name or ARN (AWS_LAMBDA_FUNCTION_NAME).
	Function string
}

// Mappings returns every mapping of the function, every page.
func (m AnySource) Mappings(ctx context.Context) ([]dl.Mapping, error) {
	if m.Function == "" {
		return nil, errors.New("list event source mappings: no function name")
	}
	return list(ctx, m.API, &lambda.ListEventSourceMappingsInput{FunctionName: aws.String(m.Function)})
}

func list(ctx context.Context, api API, in *lambda.ListEventSourceMappingsInput) ([]dl.Mapping, error) {
	out := []dl.Mapping{}
	p := lambda.NewListEventSourceMappingsPaginator(api, in)
	for pages := 0; p.HasMorePages(); pages++ {
		if pages == maxPages {
			return out, fmt.Errorf("list event source mappings: more than %d pages", maxPages)
		}
		page, err := p.NextPage(ctx)
		if err != nil {
			return out, fmt.Errorf("list event source mappings: %w", err)
		}
		for _, c := range page.EventSourceMappings {
			dm := dl.Mapping{UUID: aws.ToString(c.UUID), State: aws.ToString(c.State), EventSourceARN: aws.ToString(c.EventSourceArn),
				StartingPosition: string(c.StartingPosition)}
			if c.LastModified != nil {
				dm.LastModified = c.LastModified.UTC().Format(time.RFC3339Nano)
			}
			out = append(out, dm)
		}
	}
	return out, nil
}

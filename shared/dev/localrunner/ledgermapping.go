package localrunner

import (
	"archive/zip"
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	ltypes "github.com/aws/aws-sdk-go-v2/service/lambda/types"
)

// The ledger's stream mapping in the dev kit (issue 25). kumo's Lambda
// stores event source mappings (Create/List/Update/Delete, with a UUID,
// State Enabled/Disabled and LastModified) but never polls them and keeps
// no StartingPosition. LedgerMapping creates the template's mapping there,
// so that the ledger's digest run reads it through the real Lambda API
// (ListEventSourceMappings) as on AWS, and it is the StreamPoller's gate:
// a disabled mapping is not polled, and a mapping re-created at LATEST
// skips what the stream holds when it is created, as Lambda does. The
// starting position of each mapping it creates is kept here.

// LambdaMappingAPI is what LedgerMapping needs of the Lambda client.
type LambdaMappingAPI interface {
	GetFunction(ctx context.Context, in *lambda.GetFunctionInput, opts ...func(*lambda.Options)) (*lambda.GetFunctionOutput, error)
	CreateFunction(ctx context.Context, in *lambda.CreateFunctionInput, opts ...func(*lambda.Options)) (*lambda.CreateFunctionOutput, error)
	CreateEventSourceMapping(ctx context.Context, in *lambda.CreateEventSourceMappingInput, opts ...func(*lambda.Options)) (*lambda.CreateEventSourceMappingOutput, error)
	UpdateEventSourceMapping(ctx context.Context, in *lambda.UpdateEventSourceMappingInput, opts ...func(*lambda.Options)) (*lambda.UpdateEventSourceMappingOutput, error)
	DeleteEventSourceMapping(ctx context.Context, in *lambda.DeleteEventSourceMappingInput, opts ...func(*lambda.Options)) (*lambda.DeleteEventSourceMappingOutput, error)
	ListEventSourceMappings(ctx context.Context, in *lambda.ListEventSourceMappingsInput, opts ...func(*lambda.Options)) (*lambda.ListEventSourceMappingsOutput, error)
}

// LedgerMapping is the ledger function's mapping on the table's stream.
type LedgerMapping struct {
	API       LambdaMappingAPI
	Function  string
	StreamARN string

	mu        sync.Mutex
	positions map[string]string // UUID → starting position
}

// MappingState is what the poller needs of a mapping.
type MappingState struct {
	UUID             string
	Enabled          bool
	StartingPosition string
}

// NewLedgerMapping creates the mapping in kumo as the template declares it
// (enabled as given, from TRIM_HORIZON), creating the function there
// first when the stack runs it in-process (any small zip: kumo runs
// nothing). An existing mapping of the function on the stream (kept by an
// earlier run) is reused.
func NewLedgerMapping(ctx context.Context, api LambdaMappingAPI, function, streamARN string, enabled bool) (*LedgerMapping, error) {
	m := &LedgerMapping{API: api, Function: function, StreamARN: streamARN, positions: map[string]string{}}
	if _, err := api.GetFunction(ctx, &lambda.GetFunctionInput{FunctionName: aws.String(function)}); err != nil {
		var nf *ltypes.ResourceNotFoundException
		if !errors.As(err, &nf) {
			return nil, fmt.Errorf("ledger mapping: get function %s: %w", function, err)
		}
		var zbuf bytes.Buffer
		zw := zip.NewWriter(&zbuf)
		w, _ := zw.Create("bootstrap")
		_, _ = w.Write([]byte("#!/bin/sh\n"))
		_ = zw.Close()
		if _, err := api.CreateFunction(ctx, &lambda.CreateFunctionInput{FunctionName: aws.String(function), Runtime: ltypes.RuntimeProvidedal2023,
			Handler: aws.String("bootstrap"), Role: aws.String("arn:aws:iam::000000000000:role/" + function), Code: &ltypes.FunctionCode{ZipFile: zbuf.Bytes()}}); err != nil {
			return nil, fmt.Errorf("ledger mapping: create function %s: %w", function, err)
		}
	}
	cur, err := m.list(ctx)
	if err != nil {
		return nil, err
	}
	if len(cur) > 0 {
		for _, c := range cur {
			m.positions[aws.ToString(c.UUID)] = "TRIM_HORIZON"
		}
		return m, nil
	}
	if _, err := m.create(ctx, "TRIM_HORIZON", enabled); err != nil {
		return nil, err
	}
	return m, nil
}

func (m *LedgerMapping) list(ctx context.Context) ([]ltypes.EventSourceMappingConfiguration, error) {
	out, err := m.API.ListEventSourceMappings(ctx, &lambda.ListEventSourceMappingsInput{FunctionName: aws.String(m.Function), EventSourceArn: aws.String(m.StreamARN)})
	if err != nil {
		return nil, fmt.Errorf("ledger mapping: list: %w", err)
	}
	return out.EventSourceMappings, nil
}

func (m *LedgerMapping) create(ctx context.Context, position string, enabled bool) (string, error) {
	out, err := m.API.CreateEventSourceMapping(ctx, &lambda.CreateEventSourceMappingInput{FunctionName: aws.String(m.Function),
		EventSourceArn: aws.String(m.StreamARN), StartingPosition: ltypes.EventSourcePosition(position), Enabled: aws.Bool(enabled), BatchSize: aws.Int32(100)})
	if err != nil {
		return "", fmt.Errorf("ledger mapping: create: %w", err)
	}
	id := aws.ToString(out.UUID)
	m.mu.Lock()
	m.positions[id] = position
	m.mu.Unlock()
	return id, nil
}

// only is the one mapping (an error when there is none or several).
func (m *LedgerMapping) only(ctx context.Context) (ltypes.EventSourceMappingConfiguration, error) {
	cur, err := m.list(ctx)
	if err != nil {
		return ltypes.EventSourceMappingConfiguration{}, err
	}
	if len(cur) != 1 {
		return ltypes.EventSourceMappingConfiguration{}, fmt.Errorf("ledger mapping: %d mappings on the stream", len(cur))
	}
	return cur[0], nil
}

// SetEnabled disables or enables the mapping (UpdateEventSourceMapping).
func (m *LedgerMapping) SetEnabled(ctx context.Context, enabled bool) error {
	c, err := m.only(ctx)
	if err != nil {
		return err
	}
	if _, err := m.API.UpdateEventSourceMapping(ctx, &lambda.UpdateEventSourceMappingInput{UUID: c.UUID, Enabled: aws.Bool(enabled)}); err != nil {
		return fmt.Errorf("ledger mapping: update: %w", err)
	}
	return nil
}

// Recreate deletes the mapping and creates a new one (a new UUID) at
// position (LATEST or TRIM_HORIZON), enabled; it returns the new UUID.
func (m *LedgerMapping) Recreate(ctx context.Context, position string) (string, error) {
	c, err := m.only(ctx)
	if err != nil {
		return "", err
	}
	if _, err := m.API.DeleteEventSourceMapping(ctx, &lambda.DeleteEventSourceMappingInput{UUID: c.UUID}); err != nil {
		return "", fmt.Errorf("ledger mapping: delete: %w", err)
	}
	return m.create(ctx, position, true)
}

// State is the mapping as the poller sees it: none, or several, is not
// enabled (Lambda polls with each; the dev kit polls with one only).
func (m *LedgerMapping) State(ctx context.Context) (MappingState, error) {
	cur, err := m.list(ctx)
	if err != nil || len(cur) == 0 {
		return MappingState{}, err
	}
	c := cur[0]
	m.mu.Lock()
	pos := m.positions[aws.ToString(c.UUID)]
	m.mu.Unlock()
	return MappingState{UUID: aws.ToString(c.UUID), Enabled: aws.ToString(c.State) == "Enabled", StartingPosition: pos}, nil
}

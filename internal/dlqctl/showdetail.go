package dlqctl

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
	"github.com/dlqquarantine/dlqq/shared/domain/schemas"
	"github.com/dlqquarantine/dlqq/shared/domain/sources"
)

// Withheld is what show prints instead of a failure detail it cannot
// derive without payload values.
const Withheld = "detail withheld: use --payload (audited) to see it"

// failureView is the failure detail as show gives it without --payload:
// the value-free summary, or why it is withheld.
type failureView struct {
	Summary  []DetailLine `json:"summary,omitempty"`
	Withheld string       `json:"withheld,omitempty"`
	// Why says why it is withheld (never a payload value).
	Why string `json:"why,omitempty"`
}

// failureSummary derives r's failure detail without payload values: it
// re-validates the stored body (the original, else the latest correction)
// against the source's schema at r's schema version (recordSchema: named
// by the redrive function's SOURCES, embedded in dlqctl) and describes each
// failing leaf (ValueFreeDetail). It does so only when that body fails
// exactly as recorded; otherwise, or when the body is claim-checked in S3
// or the schema cannot be found, the detail is withheld. nil: r has no
// detail.
func (a *App) failureSummary(ctx context.Context, r *quarantine.Record) *failureView {
	if strings.TrimSpace(r.FailureDetail) == "" {
		return nil
	}
	withhold := func(format string, args ...any) *failureView {
		return &failureView{Withheld: Withheld, Why: fmt.Sprintf(format, args...)}
	}
	if r.FailureStage != quarantine.StageGate || r.SchemaVersion == "" {
		return withhold("the failure is not a schema validation")
	}
	sch, why := a.recordSchema(ctx, r)
	if sch == nil {
		return withhold("%s", why)
	}
	src := &quarantine.Source{Name: r.Source, Schema: sch, SchemaVersion: r.SchemaVersion}
	bodies, why := inlineBodies(r)
	for _, body := range bodies {
		v := src.Check(body)
		if v.Valid || v.Stage != r.FailureStage || v.Reason != r.FailureReason {
			continue
		}
		var ve *jsonschema.ValidationError
		if err := sch.Validate(v.Doc); errors.As(err, &ve) {
			return &failureView{Summary: ValueFreeDetail(ve, v.Doc, quarantine.DeclaredProperties(sch))}
		}
	}
	if why == "" {
		why = "the stored body no longer fails the schema as recorded"
	}
	return withhold("%s", why)
}

// inlineBodies returns the bodies of r kept in its item whose hashes
// check: the original, then the latest correction. why says what it left
// out when it returns none.
func inlineBodies(r *quarantine.Record) (bodies [][]byte, why string) {
	if r.BodyRef != nil {
		why = "the body is claim-checked in S3"
	} else if b, err := quarantine.DecodeBody(r); err != nil || quarantine.BodySHA256(b) != r.BodySHA256 {
		why = "the stored body does not match its hash"
	} else {
		bodies = append(bodies, b)
	}
	if c := r.Latest(); c != nil && c.BodyRef == nil && quarantine.BodySHA256([]byte(c.Body)) == c.BodySHA256 {
		bodies = append(bodies, []byte(c.Body))
	}
	return bodies, why
}

// recordSchema compiles the schema of r's source when its version is r's
// schema version; else nil and why not. The source's schema name comes
// from the SOURCES of the deployed redrive function only, and the schema
// from those embedded in dlqctl only: a schema dlqctl's user could supply
// (a file, another configuration) could probe the payload's values, an
// enum or a pattern at a time, through the detail without an audited read.
func (a *App) recordSchema(ctx context.Context, r *quarantine.Record) (*jsonschema.Schema, string) {
	from := fmt.Sprintf("the SOURCES of function %s", a.Function)
	cfg, fileNote, err := a.functionSources(ctx, a.Function)
	if err != nil {
		return nil, err.Error()
	}
	c, ok := cfg[r.Source]
	switch {
	case !ok:
		if fileNote != "" {
			return nil, fmt.Sprintf("%s name no source %s (%s)", from, r.Source, fileNote)
		}
		return nil, fmt.Sprintf("%s name no source %s", from, r.Source)
	case c.Schema == "":
		return nil, fmt.Sprintf("%s give source %s no schema", from, r.Source)
	}
	sch, version, err := schemas.CompileEmbedded(c.Schema)
	if err != nil {
		return nil, fmt.Sprintf("the schema %q of source %s is not one embedded in dlqctl (it reads no schema file)", c.Schema, r.Source)
	}
	if version != r.SchemaVersion {
		return nil, fmt.Sprintf("the schema of %s is now %s (%s); the record failed %s", r.Source, version, c.Schema, r.SchemaVersion)
	}
	return sch, ""
}

// functionSources reads the sources from the configuration of function fn
// (lambda:GetFunctionConfiguration) as the function reads them at init:
// SOURCES merged with EXTRA_SOURCES and the attached source
// (sources.FromVariables). fileNote, when fn also reads a sources file from
// its package (which dlqctl does not read), says so for a source the
// configuration read does not name; else "".
func (a *App) functionSources(ctx context.Context, fn string) (cfg map[string]sources.Config, fileNote string, err error) {
	c, err := a.connect(ctx)
	if err != nil {
		return nil, "", err
	}
	out, err := c.Lambda.GetFunctionConfiguration(ctx, &lambda.GetFunctionConfigurationInput{FunctionName: aws.String(fn)})
	if err != nil {
		var code interface{ ErrorCode() string }
		if errors.As(err, &code) {
			return nil, "", fmt.Errorf("the sources could not be read from function %s (%s; --function names the redrive function)", fn, code.ErrorCode())
		}
		return nil, "", fmt.Errorf("the sources could not be read from function %s (%v)", fn, err)
	}
	if out.Environment == nil || strings.TrimSpace(out.Environment.Variables[sources.EnvSources]+out.Environment.Variables[sources.EnvExtraSources]) == "" {
		return nil, "", fmt.Errorf("function %s has no SOURCES in its configuration", fn)
	}
	// A SOURCES_FILE is in the function's package, not in its
	// configuration: dlqctl reads no sources file, neither one of the
	// directory it runs in nor one at a path the configuration names.
	vars := maps.Clone(out.Environment.Variables)
	delete(vars, sources.EnvSourcesFile)
	if cfg, err = sources.FromVariables(vars); err != nil {
		return nil, "", fmt.Errorf("the SOURCES of function %s: %w", fn, err)
	}
	if file := strings.TrimSpace(out.Environment.Variables[sources.EnvSourcesFile]); file != "" {
		fileNote = fmt.Sprintf("function %s also reads the sources file in its package (%s), which dlqctl does not read", fn, file)
	}
	return cfg, fileNote, nil
}

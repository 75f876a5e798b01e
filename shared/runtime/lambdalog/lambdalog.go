// Package lambdalog builds the JSON slog logger every function uses: one JSON
// object per line with the Lambda request id of the invocation, so a line can
// be traced to its invocation. Callers log ids, classes, counts and hashes,
// never payload values.
package lambdalog

import (
	"context"
	"io"
	"log/slog"

	"github.com/aws/aws-lambda-go/lambdacontext"
)

// New returns a JSON logger writing to w that adds requestId from the Lambda
// context of each call.
func New(w io.Writer, level slog.Leveler) *slog.Logger {
	return slog.New(handler{slog.NewJSONHandler(w, &slog.HandlerOptions{Level: level, ReplaceAttr: lambdacontext.ReplaceAttr})})
}

type handler struct{ slog.Handler }

func (h handler) Handle(ctx context.Context, r slog.Record) error {
	if lc, ok := lambdacontext.FromContext(ctx); ok && lc.AwsRequestID != "" {
		r.AddAttrs(slog.String("requestId", lc.AwsRequestID))
	}
	return h.Handler.Handle(ctx, r)
}

func (h handler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return handler{h.Handler.WithAttrs(attrs)}
}

func (h handler) WithGroup(name string) slog.Handler {
	return handler{h.Handler.WithGroup(name)}
}

package dlqctl

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
)

// What the commands share: how a command is declared, how a record is
// read, and how output is written.

// command is a command without arguments that runs run.
func command(use, short string, run func(ctx context.Context) error) *cobra.Command {
	return &cobra.Command{
		Use: use, Short: short, Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return run(cmd.Context()) },
	}
}

// idCommand is a command whose one argument is an id, given to run.
func idCommand(use, short string, run func(ctx context.Context, id string) error) *cobra.Command {
	return &cobra.Command{
		Use: use, Short: short, Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error { return run(cmd.Context(), args[0]) },
	}
}

// getRecord reads record id, saying which table has no such record.
func (a *App) getRecord(ctx context.Context, store quarantine.Store, id string) (*quarantine.Record, error) {
	r, err := store.Get(ctx, id)
	if errors.Is(err, quarantine.ErrNotFound) {
		return nil, fmt.Errorf("no record %q in table %s", id, a.Table)
	}
	if err != nil {
		return nil, describe(err, a.Table)
	}
	return r, nil
}

// writeJSON writes v as indented JSON (--output json).
func (a *App) writeJSON(v any) error {
	enc := json.NewEncoder(a.Out)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// newTable is the aligned-columns writer of the table output.
func newTable(w io.Writer) *tabwriter.Writer { return tabwriter.NewWriter(w, 0, 4, 2, ' ', 0) }

// shortKeyRunes is how much of a long idempotency key a table shows.
const shortKeyRunes = 12

// ShortID is how tables print a record id: the source in full and, when
// the key is longer than 16 characters (a 64-hex body hash, say), its
// first 12 and an ellipsis. show and -o json keep the full id, and show
// accepts the short form (a unique prefix).
func ShortID(id string) string {
	source, key, ok := strings.Cut(id, "#")
	if !ok {
		return id
	}
	if r := []rune(key); len(r) > 16 {
		key = string(r[:shortKeyRunes]) + "…"
	}
	return source + "#" + key
}

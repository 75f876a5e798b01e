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

// idCommand is a command whose one argument is an id, given to run; what
// says what it is ("a record id (from dlqctl ls)"), in the error without
// it.
func idCommand(use, short, what string, run func(ctx context.Context, id string) error) *cobra.Command {
	return &cobra.Command{
		Use: use, Short: short, Args: oneArg(what),
		RunE: func(cmd *cobra.Command, args []string) error { return run(cmd.Context(), args[0]) },
	}
}

// required is a required flag and whether it was left unset.
type required struct {
	flag  string
	unset bool
}

// requireFlags is a usage error naming the required flags left unset,
// only those ("--reason is required", "--source and --reason are
// required"), or nil.
func requireFlags(flags ...required) error {
	var missing []string
	for _, f := range flags {
		if f.unset {
			missing = append(missing, f.flag)
		}
	}
	switch len(missing) {
	case 0:
		return nil
	case 1:
		return &UsageError{fmt.Errorf("%s is required", missing[0])}
	}
	return &UsageError{fmt.Errorf("%s and %s are required", strings.Join(missing[:len(missing)-1], ", "), missing[len(missing)-1])}
}

// recordArg is what a command on one record takes.
const recordArg = "a record id (from dlqctl ls)"

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

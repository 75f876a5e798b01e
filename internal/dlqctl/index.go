package dlqctl

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/dlqquarantine/dlqq/shared/adapter/dynamostore"
)

// IndexBackfillReport is what dlqctl index backfill did.
type IndexBackfillReport struct {
	Index    string   `json:"index"`
	Scanned  int      `json:"scanned"`
	Updated  int      `json:"updated"`
	Skipped  int      `json:"skipped"`
	Passes   int      `json:"passes"`
	Sources  []string `json:"sources"`
	Complete bool     `json:"complete"`
}

func (a *App) indexCmd() *cobra.Command {
	c := &cobra.Command{Use: "index", Short: "The table's listing index (the move to the per-source index)"}
	backfill := command("backfill", "Give every item its source-index key, then move listings to the source index", a.IndexBackfill)
	c.AddCommand(backfill)
	return c
}

// IndexBackfill runs dlqctl index backfill: dynamostore.Backfill on the
// table, with the caller's credentials (it writes every item that lacks
// status_key: the deployer's, not an operator's; docs/operations.md,
// "Moving to the source index"). Incomplete (items still changing under
// it) is an error: run it again.
func (a *App) IndexBackfill(ctx context.Context) error {
	if err := a.checkOutput(); err != nil {
		return err
	}
	c, err := a.connect(ctx)
	if err != nil {
		return err
	}
	rep, err := dynamostore.Backfill(ctx, c.DynamoDB, a.Table)
	if err != nil {
		return describe(err, a.Table)
	}
	out := IndexBackfillReport{Index: dynamostore.IndexBySource, Scanned: rep.Scanned, Updated: rep.Updated, Skipped: rep.Skipped,
		Passes: rep.Passes, Sources: rep.Sources, Complete: rep.Complete}
	if out.Sources == nil {
		out.Sources = []string{}
	}
	if a.Output == "json" {
		err = a.writeJSON(out)
	} else {
		fmt.Fprintf(a.Out, "%d items scanned in %s, %d given their index key, %d changed meanwhile; sources: %s\n",
			out.Scanned, plural(out.Passes, "pass", "passes"), out.Updated, out.Skipped, strings.Join(out.Sources, ", "))
		if out.Complete {
			fmt.Fprintf(a.Out, "complete: listings read %s\n", out.Index)
		}
	}
	if err == nil && !out.Complete {
		err = fmt.Errorf("not complete: items still changed under the last pass; run dlqctl index backfill again")
	}
	return err
}

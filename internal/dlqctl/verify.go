package dlqctl

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/spf13/cobra"

	"github.com/dlqquarantine/dlqq/shared/adapter/dynamostore"
	"github.com/dlqquarantine/dlqq/shared/adapter/s3store"
	"github.com/dlqquarantine/dlqq/shared/domain/archive"
	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
)

// VerifyResult is what dlqctl verify found.
type VerifyResult struct {
	Records  int               `json:"records"`
	Archived int               `json:"archived"`
	Problems []archive.Problem `json:"problems"`
	// Held are the records set aside by an integrity hold (a transition
	// found them failing verification); they are never replayed,
	// re-sealed or archived.
	Held []quarantine.IntegrityHold `json:"held"`
}

func (a *App) verifyCmd() *cobra.Command {
	return command("verify", "Recompute every seal; check every archived stub against its Object Lock object", a.Verify)
}

// Verify reads every record of the table (a forensic full read: the one
// command that scans), recomputes its seal and body hash, re-reads
// claim-checked bodies, and checks archived stubs against their objects. It
// returns a *MismatchError listing nothing itself when problems were found.
func (a *App) Verify(ctx context.Context) error {
	if err := a.checkOutput(); err != nil {
		return err
	}
	c, err := a.connect(ctx)
	if err != nil {
		return err
	}
	_, _, payloads, err := a.store(ctx)
	if err != nil {
		return err
	}
	res := VerifyResult{Problems: []archive.Problem{}, Held: []quarantine.IntegrityHold{}}
	p := dynamodb.NewScanPaginator(c.DynamoDB, &dynamodb.ScanInput{TableName: aws.String(a.Table), ConsistentRead: aws.Bool(true)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return describe(err, a.Table)
		}
		for _, item := range page.Items {
			if k, ok := item["dlq_id"].(*ddbtypes.AttributeValueMemberS); ok && !dynamostore.IsRecordKey(k.Value) {
				continue // a metrics counter, not a record
			}
			r, err := dynamostore.Unmarshal(item)
			if err != nil {
				res.Problems = append(res.Problems, archive.Problem{ID: fmt.Sprint(item["dlq_id"]), What: "unreadable item: " + err.Error()})
				continue
			}
			res.Records++
			if h, held := dynamostore.HoldOf(item); held {
				res.Held = append(res.Held, h)
			}
			if r.Status == quarantine.StatusArchived {
				res.Archived++
				probs, err := s3store.VerifyStub(ctx, c.S3, r)
				if err != nil {
					probs = append(probs, archive.Problem{ID: r.DLQID, What: "archive object unreadable: " + err.Error()})
				}
				res.Problems = append(res.Problems, probs...)
				continue
			}
			if err := quarantine.Verify(r); err != nil {
				res.Problems = append(res.Problems, archive.Problem{ID: r.DLQID, What: err.Error()})
				continue
			}
			if r.BodyRef != nil {
				if _, err := quarantine.LoadBody(ctx, payloads, r); err != nil {
					res.Problems = append(res.Problems, archive.Problem{ID: r.DLQID, What: "claim-check body: " + err.Error()})
				}
			}
		}
	}
	if a.Output == "json" {
		if err := a.writeJSON(res); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(a.Out, "verified %d records (%d archived stubs): %d problems\n", res.Records, res.Archived, len(res.Problems))
		for _, pr := range res.Problems {
			fmt.Fprintf(a.Out, "  MISMATCH %s: %s\n", pr.ID, pr.What)
		}
		for _, h := range res.Held {
			fmt.Fprintf(a.Out, "  HELD %s: version %d, %s, since %s\n", h.ID, h.Version, h.Reason, quarantine.At(h.At))
		}
	}
	if len(res.Problems) > 0 {
		return &MismatchError{Count: len(res.Problems)}
	}
	return nil
}

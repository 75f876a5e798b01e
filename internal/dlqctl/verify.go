package dlqctl

import (
	"context"
	"fmt"
	"strings"

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
	Records  int       `json:"records"`
	Archived int       `json:"archived"`
	Problems []Problem `json:"problems"`
	// Held are the records set aside by an integrity hold (a transition
	// found them failing verification); they are never replayed,
	// re-sealed or archived.
	Held []quarantine.IntegrityHold `json:"held"`
}

// Problem is one verification problem: the record and what is wrong,
// said once (the id is not repeated in What).
type Problem struct {
	ID   string `json:"id"`
	What string `json:"what"`
}

// problem is p with What rid of the "record <id>: " a seal error starts
// with, which would name the record twice.
func problem(id, what string) Problem {
	return Problem{ID: id, What: strings.Replace(what, "record "+id+": ", "record ", 1)}
}

func plural(n int, one, many string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, one)
	}
	return fmt.Sprintf("%d %s", n, many)
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
	res := VerifyResult{Problems: []Problem{}, Held: []quarantine.IntegrityHold{}}
	p := dynamodb.NewScanPaginator(c.DynamoDB, &dynamodb.ScanInput{TableName: aws.String(a.Table), ConsistentRead: aws.Bool(true)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return describe(err, a.Table)
		}
		for _, item := range page.Items {
			k, _ := item["dlq_id"].(*ddbtypes.AttributeValueMemberS)
			if k != nil && !dynamostore.IsRecordKey(k.Value) {
				continue // a metrics counter, not a record
			}
			r, err := dynamostore.Unmarshal(item)
			if err != nil {
				id := "(no string dlq_id)"
				if k != nil {
					id = k.Value
				}
				res.Problems = append(res.Problems, problem(id, "unreadable item: "+err.Error()))
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
				for _, p := range probs {
					res.Problems = append(res.Problems, problem(p.ID, p.What))
				}
				continue
			}
			if err := quarantine.Verify(r); err != nil {
				res.Problems = append(res.Problems, problem(r.DLQID, err.Error()))
				continue
			}
			if r.BodyRef != nil {
				if _, err := quarantine.LoadBody(ctx, payloads, r); err != nil {
					res.Problems = append(res.Problems, problem(r.DLQID, "claim-check body: "+err.Error()))
				}
			}
		}
	}
	if a.Output == "json" {
		if err := a.writeJSON(res); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(a.Out, "verified %s (%s): %s\n", plural(res.Records, "record", "records"),
			plural(res.Archived, "archived stub", "archived stubs"), plural(len(res.Problems), "problem", "problems"))
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

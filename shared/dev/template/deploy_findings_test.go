package template_test

// Issue 26, one test per finding of the outside review of the template's
// deployability and of what it keeps; each fails on the template of
// c4cb269 (the finding) and passes now.

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/dlqquarantine/dlqq/shared/dev/template"
)

// IAM refuses a managed policy over 6,144 characters (white space not
// counted). Every managed policy of the template, rendered with a
// 56-character stack name in every partition (aws-us-gov's ARNs among
// the longest), with CloudFormation's own shapes of the names it
// generates (a role's <stack>-<id>-<suffix> cut to 64, a key's
// key/<uuid>) and with every optional ARN given at its longest, fits.
// On c4cb269 AuditorPolicy rendered to 6,630 characters in aws-us-gov.
func TestManagedPoliciesFitIAMsLimit(t *testing.T) {
	d := readDecl(t)
	for _, p := range partitionEnvs {
		for _, s := range settings(t, d, p) {
			if s.stack != longestStack || !strings.HasPrefix(s.name, "every optional ARN") && s.name != "defaults" {
				continue
			}
			tpl, _ := render(t, p, s)
			policies := tpl.GetAllIAMManagedPolicyResources()
			if len(policies) == 0 {
				t.Fatal("no managed policy")
			}
			for _, id := range slices.Sorted(maps.Keys(policies)) {
				pol := policies[id]
				raw, _ := json.Marshal(pol.PolicyDocument)
				if strings.Contains(string(raw), "unresolved:") {
					t.Fatalf("%s has an unresolved reference: %s", id, raw)
				}
				n := iamSize(pol.PolicyDocument)
				t.Logf("%s, %s: %s %d characters", p.Partition, s.name, id, n)
				if n > managedPolicyLimit {
					t.Errorf("%s in %s (%s): %d characters, IAM allows a managed policy %d", id, p.Partition, s.name, n, managedPolicyLimit)
				}
			}
		}
	}
}

// Lambda keeps 100 of an account's concurrency unreserved, so a
// reservation of 1 fails on an account whose quota is 100 or less (new
// accounts often start at 10). It is a choice now, on by default, with
// the precondition in the docs; off, the function reserves nothing.
func TestRedriveConcurrencyReservationIsOptional(t *testing.T) {
	for _, c := range []struct {
		value string
		want  *int
	}{{"true", aws.Int(1)}, {"false", nil}} {
		e := env
		e.Params = map[string]any{"RedriveOneRunAtATime": c.value}
		tpl, err := template.Open(template.Path(), e)
		if err != nil {
			t.Fatal(err)
		}
		fn := lookup(t, tpl.GetServerlessFunctionWithName, "RedriveFunction")
		if got := fn.ReservedConcurrentExecutions; (got == nil) != (c.want == nil) || got != nil && *got != *c.want {
			t.Errorf("RedriveOneRunAtATime=%s: reserved concurrency %v, want %v", c.value, got, c.want)
		}
	}
	if d := readDecl(t).Parameters["RedriveOneRunAtATime"]; d == nil || fmt.Sprint(d.Default) != "true" {
		t.Errorf("RedriveOneRunAtATime: %+v, want a parameter defaulting to true (one run at a time where the account allows it)", d)
	}
	pre := preconditions(t)
	for _, want := range []string{"RedriveOneRunAtATime", "UnreservedConcurrentExecutions", "100"} {
		if !strings.Contains(pre, want) {
			t.Errorf("docs/template.md's deploy preconditions do not mention %s", want)
		}
	}
}

// Lambda refuses an SQS trigger whose function timeout exceeds the
// queue's visibility timeout. The bounds make every allowed pair valid:
// the ingest timeout's maximum is at most the DLQ visibility's minimum
// (c4cb269 bounded neither), and the rendering at those two ends is held
// to it by TestTheTemplateDeploysAtEveryDocumentedSetting.
func TestIngestTimeoutNeverExceedsTheDLQVisibility(t *testing.T) {
	d := readDecl(t)
	timeout, vis := d.Parameters["IngestTimeoutSeconds"], d.Parameters["DLQVisibilityTimeoutSeconds"]
	if timeout.MaxValue == nil || vis.MinValue == nil {
		t.Fatalf("IngestTimeoutSeconds max %v, DLQVisibilityTimeoutSeconds min %v: an ingest timeout above the DLQ's visibility timeout deploys the function and then fails the trigger",
			timeout.MaxValue, vis.MinValue)
	}
	if *timeout.MaxValue > *vis.MinValue {
		t.Errorf("IngestTimeoutSeconds up to %v, DLQVisibilityTimeoutSeconds from %v: Lambda refuses the trigger for such a pair", *timeout.MaxValue, *vis.MinValue)
	}
	if fn := open(t).Resources["IngestFunction"]; fn == nil {
		t.Fatal("no IngestFunction")
	}
	tpl, _ := render(t, template.Env{Partition: "aws", Region: "us-east-1"}, setting{"ends", "prod",
		map[string]any{"NamingMode": "generated", "IngestTimeoutSeconds": *timeout.MaxValue, "DLQVisibilityTimeoutSeconds": *vis.MinValue}})
	fn := lookup(t, tpl.GetServerlessFunctionWithName, "IngestFunction")
	dlq := lookup(t, tpl.GetSQSQueueWithName, "DeadLetterQueue")
	if aws.ToInt(fn.Timeout) > aws.ToInt(dlq.VisibilityTimeout) {
		t.Errorf("ingest timeout %d s, DLQ visibility %d s", aws.ToInt(fn.Timeout), aws.ToInt(dlq.VisibilityTimeout))
	}
}

// A failed first deploy leaves nothing behind: everything the stack keeps
// on deletion is RetainExceptOnCreate (c4cb269: Retain, so each failed
// create left a key set, a table and two buckets, and each retry added
// another), every replacement keeps the old resource, and the one
// resource that still stops a rollback, the deletion-protected table, is
// a documented precondition with its remedy.
func TestAFailedCreateLeavesNothingBehind(t *testing.T) {
	tpl := open(t)
	kept := 0
	for _, id := range slices.Sorted(maps.Keys(tpl.Resources)) {
		m := meta(t, tpl, id)
		if m.DeletionPolicy == "" && m.UpdateReplacePolicy == "" {
			continue
		}
		kept++
		if m.DeletionPolicy != "RetainExceptOnCreate" || m.UpdateReplacePolicy != "Retain" {
			t.Errorf("%s: DeletionPolicy %q, UpdateReplacePolicy %q; want RetainExceptOnCreate / Retain", id, m.DeletionPolicy, m.UpdateReplacePolicy)
		}
	}
	for _, id := range []string{"QuarantineKey", "LedgerSigningKey", "IngestWriterKey", "RedriveWriterKey", "SweeperWriterKey",
		"QuarantineTable", "PayloadBucket", "ArchiveBucket"} {
		if m := meta(t, tpl, id); m.DeletionPolicy != "RetainExceptOnCreate" {
			t.Errorf("%s is not kept (%s)", id, m.DeletionPolicy)
		}
	}
	if kept < 8 {
		t.Errorf("%d kept resources", kept)
	}
	pre := preconditions(t)
	for _, want := range []string{"ROLLBACK_FAILED", "--no-deletion-protection-enabled", "delete-stack"} {
		if !strings.Contains(pre, want) {
			t.Errorf("docs/template.md's deploy preconditions do not say how a failed create's protected table is removed (%q missing)", want)
		}
	}
}

// The evidence of a hole in the ledger (LedgerFailureQueue) and the
// bucket policies that protect the retained buckets outlive the stack
// (c4cb269 deleted all three with it). The retained queue has a name
// CloudFormation generates, so a stack deployed again under the same name
// does not collide with it; legacy stacks keep theirs.
func TestEvidenceOutlivesTheStack(t *testing.T) {
	tpl := open(t)
	for _, id := range []string{"LedgerFailureQueue", "ArchiveBucketPolicy", "PayloadBucketPolicy"} {
		if m := meta(t, tpl, id); !m.keptOnDelete() || m.UpdateReplacePolicy != "Retain" {
			t.Errorf("%s: %s / %s, deleted with the stack", id, m.DeletionPolicy, m.UpdateReplacePolicy)
		}
	}
	q := lookup(t, tpl.GetSQSQueueWithName, "LedgerFailureQueue")
	if got, want := aws.ToString(q.QueueName), template.GeneratedName("prod", "LedgerFailureQueue", 80); got != want {
		t.Errorf("LedgerFailureQueue is named %q: a stack deployed again under its name would collide with the retained queue", got)
	}
	e := env
	e.Params = map[string]any{"NamingMode": "legacy"}
	legacy, err := template.Open(template.Path(), e)
	if err != nil {
		t.Fatal(err)
	}
	if got := aws.ToString(lookup(t, legacy.GetSQSQueueWithName, "LedgerFailureQueue").QueueName); got != "prod-ledger-failures" {
		t.Errorf("with NamingMode legacy LedgerFailureQueue is %q, want its old name", got)
	}
}

// Any change to the table's StreamSpecification gives the table a new
// stream; the mapping's EventSourceArn cannot change in place, so the
// mapping is replaced: the old stream's unread tail is dropped, and writes
// made while no stream is on are in no stream. The specification is
// pinned, and docs/operations.md has the one safe way to change it.
func TestStreamSpecificationIsPinned(t *testing.T) {
	tb := lookup(t, open(t).GetDynamoDBTableWithName, "QuarantineTable")
	raw, _ := json.Marshal(tb.StreamSpecification)
	if string(raw) != `{"StreamViewType":"NEW_AND_OLD_IMAGES"}` {
		t.Fatalf("QuarantineTable's StreamSpecification is %s. Changing it replaces the table's stream and the ledger's mapping and loses the "+
			"changes made meanwhile: follow docs/operations.md \"Changing the table's stream\", then pin the new value here.", raw)
	}
	doc := strings.Join(section(t, operationsDoc(t), "Changing the table's stream"), "\n")
	// Every writer stopped (each ingest mapping, the writing functions),
	// the old stream anchored by a digest before the digests stop, the
	// findings verify then names, and the template's reservation given back.
	for _, want := range []string{"list-event-source-mappings --function-name $STACK-ingest", "--no-enabled", "put-function-concurrency",
		"not yet anchored", "disable-rule", "dlqctl verify", "mapping-stream", "canary-missing", "--reserved-concurrent-executions 1"} {
		if !strings.Contains(doc, want) {
			t.Errorf("the runbook for a stream change does not mention %s", want)
		}
	}
}

// preconditions is docs/template.md's "Deploy preconditions" section.
func preconditions(t *testing.T) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(filepath.Dir(template.Path()), "..", "docs", "template.md"))
	if err != nil {
		t.Fatal(err)
	}
	return strings.Join(section(t, string(raw), "Deploy preconditions"), "\n")
}

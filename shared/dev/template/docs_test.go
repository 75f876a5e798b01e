package template_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/dlqquarantine/dlqq/shared/dev/template"
)

// section returns the lines of a markdown document from the heading that
// starts with title to the next heading of the same or a higher level.
func section(t *testing.T, doc, title string) []string {
	t.Helper()
	lines := strings.Split(doc, "\n")
	for i, l := range lines {
		if !strings.HasPrefix(l, "#") || !strings.HasPrefix(strings.TrimLeft(l, "# "), title) {
			continue
		}
		level := len(l) - len(strings.TrimLeft(l, "#"))
		for j := i + 1; j < len(lines); j++ {
			if h := lines[j]; strings.HasPrefix(h, "#") && len(h)-len(strings.TrimLeft(h, "#")) <= level {
				return lines[i+1 : j]
			}
		}
		return lines[i+1:]
	}
	t.Fatalf("docs/operations.md has no section %q", title)
	return nil
}

var tableRowID = regexp.MustCompile("^\\| `([A-Za-z0-9]+)`")

// rowIDs returns the logical ids in the first column of a section's
// tables, up to its first subsection.
func rowIDs(lines []string) []string {
	var ids []string
	for _, l := range lines {
		if strings.HasPrefix(l, "#") {
			break
		}
		if m := tableRowID.FindStringSubmatch(l); m != nil {
			ids = append(ids, m[1])
		}
	}
	return ids
}

func operationsDoc(t *testing.T) string {
	t.Helper()
	return readDoc(t, "operations.md")
}

// readDoc is docs/<name>.
func readDoc(t *testing.T, name string) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(filepath.Dir(template.Path()), "..", "docs", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(raw)
}

// The runbook table lists exactly the template's alarms: a new alarm
// without a row, or a row for an alarm that is gone, fails here.
func TestRunbookListsEveryAlarm(t *testing.T) {
	tpl := open(t)
	var alarms []string
	for id := range tpl.GetAllCloudWatchAlarmResources() {
		alarms = append(alarms, id)
	}
	for id, r := range tpl.Resources {
		if r.AWSCloudFormationType() == "AWS::CloudWatch::CompositeAlarm" {
			alarms = append(alarms, id)
		}
	}
	if len(alarms) == 0 {
		t.Fatal("the template has no alarms")
	}
	rows := rowIDs(section(t, operationsDoc(t), "Runbook"))
	for _, a := range alarms {
		if !slices.Contains(rows, a) {
			t.Errorf("alarm %s has no row in the runbook table of docs/operations.md", a)
		}
	}
	for _, r := range rows {
		if !slices.Contains(alarms, r) {
			t.Errorf("the runbook table of docs/operations.md has a row for %s, which is not an alarm of the template", r)
		}
	}
}

// Every resource the stack keeps on deletion or replacement is in the
// retained-resources table, with its policies as the template sets them.
func TestOperationsDocListsEveryRetainedResource(t *testing.T) {
	raw, err := json.Marshal(open(t).Resources)
	if err != nil {
		t.Fatal(err)
	}
	var res map[string]struct{ DeletionPolicy, UpdateReplacePolicy string }
	if err := json.Unmarshal(raw, &res); err != nil {
		t.Fatal(err)
	}
	lines := section(t, operationsDoc(t), "Deploy, update and delete")
	rows := map[string]string{}
	for _, l := range lines {
		if m := tableRowID.FindStringSubmatch(l); m != nil {
			rows[m[1]] = l
		}
	}
	retained := 0
	for id, r := range res {
		if !strings.HasPrefix(r.DeletionPolicy, "Retain") && r.UpdateReplacePolicy != "Retain" {
			continue
		}
		retained++
		row, ok := rows[id]
		if !ok {
			t.Errorf("%s is retained (%s / %s) but not in the retained-resources table of docs/operations.md", id, r.DeletionPolicy, r.UpdateReplacePolicy)
			continue
		}
		if want := r.DeletionPolicy + " / " + r.UpdateReplacePolicy; !strings.Contains(row, want) {
			t.Errorf("docs/operations.md gives %s other policies than the template's %q: %s", id, want, row)
		}
	}
	if retained == 0 {
		t.Fatal("the template retains nothing")
	}
}

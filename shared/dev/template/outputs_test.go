package template_test

import (
	"fmt"
	"testing"

	"github.com/dlqquarantine/dlqq/shared/dev/template"
	"github.com/dlqquarantine/dlqq/shared/runtime/stackoutputs"
)

// dlqctl --stack reads these outputs (stackoutputs.DLQCTL): the template
// must declare each, as the value dlqctl takes it for.
func TestOutputsDlqctlReads(t *testing.T) {
	tpl, names, err := template.OpenNamed(template.Path(), env)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		stackoutputs.QuarantineTable:  names["QuarantineTable"],
		stackoutputs.PayloadBucket:    names["PayloadBucket"],
		stackoutputs.RedriveFunction:  names["RedriveFunction"],
		stackoutputs.ArchiveBucket:    names["ArchiveBucket"],
		stackoutputs.LedgerSigningKey: "arn:aws:kms:eu-west-1:111122223333:" + signingAlias,
		// The function URL AWS gives (the HTTP API's where auto picks it:
		// operator_test.go).
		stackoutputs.OperatorEndpoint: fmt.Sprintf("https://%s.lambda-url.%s.on.aws/", template.ServiceID(env.StackName, "OperatorFunctionUrl", 32), env.Region),
	}
	// The writer keys, ingest,redrive,sweeper (--writer-keys order).
	for i, w := range writers() {
		want[stackoutputs.WriterKeys()[i]] = w.arn
	}
	for _, name := range stackoutputs.DLQCTL() {
		out, ok := tpl.Outputs[name]
		if !ok {
			t.Errorf("the template has no output %s, which dlqctl --stack reads", name)
			continue
		}
		w, known := want[name]
		if !known {
			t.Errorf("output %s: this test does not know what it should be", name)
			continue
		}
		if got := fmt.Sprint(out.Value); got != w || w == "" {
			t.Errorf("output %s is %q, dlqctl takes it for %q", name, got, w)
		}
	}
}

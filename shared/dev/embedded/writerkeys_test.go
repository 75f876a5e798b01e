package embedded_test

import (
	"context"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/aws/aws-sdk-go-v2/service/kms/types"

	"github.com/dlqquarantine/dlqq/shared/dev/embedded"
)

// The template's writer keys exist on the embedded stack as HMAC_256 keys
// under their aliases; the outputs and each writing function's
// WRITER_KEY_ID carry the key's real ARN, and the key MACs.
func TestWriterKeysFromTheTemplate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, err := embedded.Start(ctx, embedded.Options{NoS3: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	c := kms.NewFromConfig(st.AWS)
	outs := st.Outputs()
	for _, w := range []string{"Ingest", "Redrive", "Sweeper"} {
		id := w + "WriterKey"
		alias := "alias/" + st.Env.StackName + "-writer-" + strings.ToLower(w)
		if st.Names[id] != alias {
			t.Errorf("%s is named %q, want %q", id, st.Names[id], alias)
		}
		d, err := c.DescribeKey(ctx, &kms.DescribeKeyInput{KeyId: aws.String(alias)})
		if err != nil {
			t.Fatalf("%s: %v", alias, err)
		}
		arn := aws.ToString(d.KeyMetadata.Arn)
		if d.KeyMetadata.KeySpec != types.KeySpecHmac256 || d.KeyMetadata.KeyUsage != types.KeyUsageTypeGenerateVerifyMac || arn != st.KeyARNs[id] || !strings.Contains(arn, ":key/") {
			t.Errorf("%s: %s %s %s (stack: %s)", alias, d.KeyMetadata.KeySpec, d.KeyMetadata.KeyUsage, arn, st.KeyARNs[id])
		}
		if outs[id+"Arn"] != arn {
			t.Errorf("output %sArn = %q, want %s", id, outs[id+"Arn"], arn)
		}
		fn, err := st.Template.GetServerlessFunctionWithName(w + "Function")
		if err != nil {
			t.Fatal(err)
		}
		if got := fn.Environment.Variables["WRITER_KEY_ID"]; got != arn {
			t.Errorf("%sFunction WRITER_KEY_ID = %v, want %s", w, got, arn)
		}
		g, err := c.GenerateMac(ctx, &kms.GenerateMacInput{KeyId: aws.String(arn), Message: []byte("root"), MacAlgorithm: types.MacAlgorithmSpecHmacSha256})
		if err != nil || aws.ToString(g.KeyId) != arn {
			t.Fatalf("%s GenerateMac: %v", id, err)
		}
	}
}

package embedded_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/cloudformation"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/aws/smithy-go"

	"github.com/dlqquarantine/dlqq/shared/runtime/stackoutputs"
)

// The embedded stack answers DescribeStacks for itself, through the SDK's
// own client and configuration, with the template's outputs resolved to
// what it created; an unknown stack is CloudFormation's ValidationError.
func TestDescribeStacksAnswersWithTheStacksOutputs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := startNoS3(ctx, t)
	client := cloudformation.NewFromConfig(st.AWS)
	got := stackOutputs(ctx, t, client, st.Env.StackName)
	fn, err := st.Template.GetServerlessFunctionWithName("RedriveFunction")
	if err != nil {
		t.Fatal(err)
	}
	bucket := func(id string) string {
		b, err := st.Template.GetS3BucketWithName(id)
		if err != nil {
			t.Fatal(err)
		}
		return aws.ToString(b.BucketName)
	}
	want := map[string]string{
		stackoutputs.QuarantineTable:  st.Names["QuarantineTable"],
		stackoutputs.RedriveFunction:  aws.ToString(fn.FunctionName),
		stackoutputs.PayloadBucket:    bucket("PayloadBucket"),
		stackoutputs.ArchiveBucket:    bucket("ArchiveBucket"),
		stackoutputs.LedgerSigningKey: st.KeyARNs["LedgerSigningKey"],
		"SourceQueueUrl":              st.QueueURLs["SourceQueue"],
		"DeadLetterQueueUrl":          st.QueueURLs["DeadLetterQueue"],
	}
	for k, v := range want {
		if v == "" || got[k] != v {
			t.Errorf("output %s = %q, want %q", k, got[k], v)
		}
	}
	// The key ARN is one KMS takes (the template's placeholder is not).
	if _, err := kms.NewFromConfig(st.AWS).GetPublicKey(ctx, &kms.GetPublicKeyInput{KeyId: aws.String(got[stackoutputs.LedgerSigningKey])}); err != nil {
		t.Errorf("the signing key output: %v", err)
	}

	missing := st.Env.StackName + "-nosuch"
	_, err = client.DescribeStacks(ctx, &cloudformation.DescribeStacksInput{StackName: aws.String(missing)})
	var api smithy.APIError
	if !errors.As(err, &api) || api.ErrorCode() != "ValidationError" || api.ErrorMessage() != "Stack with id "+missing+" does not exist" {
		t.Fatalf("an unknown stack: %v", err)
	}
}

// The stack is found by its id too, and once closed it is gone.
func TestDescribeStacksByIDAndAfterClose(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := startNoS3(ctx, t)
	client := cloudformation.NewFromConfig(st.AWS)
	out, err := client.DescribeStacks(ctx, &cloudformation.DescribeStacksInput{StackName: aws.String(st.Env.StackName)})
	if err != nil || len(out.Stacks) != 1 {
		t.Fatalf("%v %v", out, err)
	}
	s := out.Stacks[0]
	if !strings.HasPrefix(aws.ToString(s.StackId), "arn:aws:cloudformation:") || s.StackStatus != "CREATE_COMPLETE" || s.CreationTime == nil {
		t.Fatalf("stack %+v", s)
	}
	if byID, err := client.DescribeStacks(ctx, &cloudformation.DescribeStacksInput{StackName: s.StackId}); err != nil || aws.ToString(byID.Stacks[0].StackName) != st.Env.StackName {
		t.Fatalf("by id: %v %v", byID, err)
	}
	st.Close()
	if _, err := client.DescribeStacks(ctx, &cloudformation.DescribeStacksInput{StackName: aws.String(st.Env.StackName)}); err == nil {
		t.Fatal("a closed stack is still described")
	}
}

// A child process finds the endpoint through Environ
// (AWS_ENDPOINT_URL_CLOUDFORMATION), as dlqctl does with build/local.env.
func TestDescribeStacksThroughTheEnvironment(t *testing.T) {
	ctx := context.Background()
	st := startNoS3(ctx, t)
	t.Setenv("AWS_CONFIG_FILE", t.TempDir()+"/none")
	t.Setenv("AWS_PROFILE", "")
	for _, kv := range st.Environ() {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := stackOutputs(ctx, t, cloudformation.NewFromConfig(cfg), st.Env.StackName)
	if got[stackoutputs.QuarantineTable] != st.Names["QuarantineTable"] {
		t.Fatalf("outputs %v", got)
	}
}

func stackOutputs(ctx context.Context, t *testing.T, client *cloudformation.Client, name string) map[string]string {
	t.Helper()
	out, err := client.DescribeStacks(ctx, &cloudformation.DescribeStacksInput{StackName: aws.String(name)})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Stacks) != 1 || aws.ToString(out.Stacks[0].StackName) != name {
		t.Fatalf("stacks %+v", out.Stacks)
	}
	got := map[string]string{}
	for _, o := range out.Stacks[0].Outputs {
		got[aws.ToString(o.OutputKey)] = aws.ToString(o.OutputValue)
	}
	return got
}

package dlqctl_test

import (
	"context"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sts"

	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
)

// fixedSTS answers GetCallerIdentity with one ARN.
type fixedSTS string

func (f fixedSTS) GetCallerIdentity(context.Context, *sts.GetCallerIdentityInput, ...func(*sts.Options)) (*sts.GetCallerIdentityOutput, error) {
	return &sts.GetCallerIdentityOutput{Arn: aws.String(string(f)), Account: aws.String("123456789012")}, nil
}

// The longest ARN an assumed role can have (the aws-us-gov partition, a
// 64-byte role name, a 64-byte session name: 175 bytes, as an SSO
// permission set's role and an e-mail session name reach) is recorded
// whole: dlqctl does not refuse it and the redrive function does not clip
// it.
func TestTheLongestAssumedRoleARNIsRecordedWhole(t *testing.T) {
	f := newFixture(t)
	f.startStackRedrive(t)
	ctx := context.Background()
	role := ("AWSReservedSSO_DLQQuarantineOperator_0123456789abcdef" + strings.Repeat("x", 64))[:64]
	session := ("maria.gonzalez-fernandez@pharma-distribution.example.com" + strings.Repeat("y", 64))[:64]
	arn := "arn:aws-us-gov:sts::123456789012:assumed-role/" + role + "/" + session
	if len(arn) != 175 {
		t.Fatalf("the ARN is %d bytes, want 175", len(arn))
	}
	a, out, errw := f.stackApp(nil, fixedSTS(arn))
	if code := a.Main(ctx, []string{"park", f.ids["o2"], "--reason", "recall review"}); code != 0 {
		t.Fatalf("park (exit %d):\n%s%s", code, out, errw)
	}
	r, err := f.store.Get(ctx, f.ids["o2"])
	if err != nil {
		t.Fatal(err)
	}
	if got := r.Attempts[len(r.Attempts)-1].Actor; got != "unverified:"+arn || r.Status != quarantine.StatusParked {
		t.Fatalf("park recorded %q (%s), want %q", got, r.Status, "unverified:"+arn)
	}
}

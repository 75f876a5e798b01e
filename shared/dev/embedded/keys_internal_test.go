package embedded

import (
	"context"
	"errors"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	kmstypes "github.com/aws/aws-sdk-go-v2/service/kms/types"
)

type describeKeyFunc func(*kms.DescribeKeyInput) (*kms.DescribeKeyOutput, error)

func (f describeKeyFunc) DescribeKey(_ context.Context, in *kms.DescribeKeyInput, _ ...func(*kms.Options)) (*kms.DescribeKeyOutput, error) {
	return f(in)
}

// Only KMS's NotFoundException means "no such key": any other failure of
// DescribeKey is an error, so that a persistent stack never gets a new key
// (its old ciphertexts would no longer decrypt) because one call failed.
func TestDescribeKeyCreatesNothingOnAFailure(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name      string
		answer    func(*kms.DescribeKeyInput) (*kms.DescribeKeyOutput, error)
		found     bool
		wantError bool
	}{
		{"not found", func(*kms.DescribeKeyInput) (*kms.DescribeKeyOutput, error) {
			return nil, &kmstypes.NotFoundException{Message: aws.String("Alias alias/x is not found.")}
		}, false, false},
		{"internal error", func(*kms.DescribeKeyInput) (*kms.DescribeKeyOutput, error) {
			return nil, &kmstypes.KMSInternalException{Message: aws.String("internal")}
		}, false, true},
		{"no answer", func(*kms.DescribeKeyInput) (*kms.DescribeKeyOutput, error) {
			return nil, errors.New("connection reset")
		}, false, true},
		{"no metadata", func(*kms.DescribeKeyInput) (*kms.DescribeKeyOutput, error) {
			return &kms.DescribeKeyOutput{}, nil
		}, false, true},
		{"found", func(in *kms.DescribeKeyInput) (*kms.DescribeKeyOutput, error) {
			return &kms.DescribeKeyOutput{KeyMetadata: &kmstypes.KeyMetadata{KeyId: in.KeyId}}, nil
		}, true, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			key, found, err := describeKey(ctx, describeKeyFunc(c.answer), "alias/x")
			if (err != nil) != c.wantError || found != c.found || (key != nil) != c.found {
				t.Errorf("describeKey = %v, %v, %v; want found %v, error %v", key, found, err, c.found, c.wantError)
			}
		})
	}
}

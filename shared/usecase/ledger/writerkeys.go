package ledger

import (
	"fmt"
	"strings"

	"github.com/dlqquarantine/dlqq/shared/domain/writerproof"
)

// writerKeyEnv is the environment variable naming each role's writer key.
var writerKeyEnv = map[writerproof.Role]string{
	writerproof.RoleIngest:  "INGEST_WRITER_KEY_ARN",
	writerproof.RoleRedrive: "REDRIVE_WRITER_KEY_ARN",
	writerproof.RoleSweeper: "SWEEPER_WRITER_KEY_ARN",
}

// writerKeysFromEnv reads the three writer keys' ARNs: all three (each a
// KMS key ARN, no two the same) or none (nil). The digests record them so
// that verify trusts the keys the ledger was deployed with, not only what
// the stack's outputs or an operator's flags say (issue 25 review).
func writerKeysFromEnv(getenv func(string) string) (map[string]string, error) {
	keys := map[string]string{}
	seen := map[string]writerproof.Role{}
	var missing []string
	for _, r := range writerproof.Roles {
		name := writerKeyEnv[r]
		v := strings.TrimSpace(getenv(name))
		if v == "" {
			missing = append(missing, name)
			continue
		}
		if !strings.HasPrefix(v, "arn:") || !strings.Contains(v, ":kms:") || !strings.Contains(v, ":key/") {
			return nil, fmt.Errorf("%s=%q is not a KMS key ARN (arn:aws:kms:REGION:ACCOUNT:key/ID)", name, v)
		}
		if o, dup := seen[v]; dup {
			return nil, fmt.Errorf("%s is %s too (each role has its own key)", name, writerKeyEnv[o])
		}
		seen[v] = r
		keys[string(r)] = v
	}
	switch len(missing) {
	case 0:
		return keys, nil
	case len(writerproof.Roles):
		return nil, nil
	}
	return nil, fmt.Errorf("%s: not set (the writer keys are given all three or none)", strings.Join(missing, ", "))
}

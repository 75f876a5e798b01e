package sigv4front

import (
	"crypto/sha256"
	"encoding/base32"
	"encoding/base64"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
)

// Identity is one caller the front knows: the keys it signs with, the
// principal AWS would report for them in requestContext.authorizer.iam, and
// whether its IAM policy grants lambda:InvokeFunctionUrl and
// lambda:InvokeFunction on the operator function.
type Identity struct {
	// Name is a short label for logs and tests ("operator-a").
	Name string
	// AccessKeyID and SecretAccessKey are the signing keys.
	AccessKeyID     string
	SecretAccessKey string
	// SessionToken, when set, must arrive as X-Amz-Security-Token (the
	// identity is a role session); when empty, a request carrying a token
	// is refused, as AWS refuses a token sent with long-term keys.
	SessionToken string
	// ARN is the caller's ARN: arn:aws:iam::111122223333:user/operator-a,
	// or arn:aws:sts::111122223333:assumed-role/Ops/alice for a session.
	ARN string
	// Account is the caller's account id.
	Account string
	// UserID is the caller's unique id: AIDA… for a user, AROA…:alice for
	// a role session. The front reports it as both callerId and userId.
	UserID string
	// MayInvoke says whether the identity's policy grants the function URL.
	MayInvoke bool
}

// Credentials returns the identity's keys in the SDK's form, for Sign.
func (id Identity) Credentials() aws.Credentials {
	return aws.Credentials{
		AccessKeyID:     id.AccessKeyID,
		SecretAccessKey: id.SecretAccessKey,
		SessionToken:    id.SessionToken,
		Source:          "sigv4front",
	}
}

// Store holds identities by access key id. It does not change after
// NewStore, so one Store may serve many requests at once.
type Store struct {
	byKey map[string]Identity
}

// NewStore returns a store of ids; an identity without keys or a second
// identity with the same access key id is an error.
func NewStore(ids ...Identity) (*Store, error) {
	s := &Store{byKey: make(map[string]Identity, len(ids))}
	var errs []error
	for _, id := range ids {
		switch {
		case id.AccessKeyID == "" || id.SecretAccessKey == "":
			errs = append(errs, fmt.Errorf("identity %q: access key id and secret are required", id.Name))
		case s.byKey[id.AccessKeyID].AccessKeyID != "":
			errs = append(errs, fmt.Errorf("identity %q: access key id %s is already %q", id.Name, id.AccessKeyID, s.byKey[id.AccessKeyID].Name))
		default:
			s.byKey[id.AccessKeyID] = id
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("sigv4front store: %w", err)
	}
	return s, nil
}

// Lookup returns the identity that owns accessKeyID.
func (s *Store) Lookup(accessKeyID string) (Identity, bool) {
	id, ok := s.byKey[accessKeyID]
	return id, ok
}

// DefaultIdentities returns the three IAM users of the local stack in
// account: operator-a and operator-b, who may invoke the operator function
// URL, and auditor, who may not. Their keys are derived from the account
// and the name, so they are the same on every run and differ between
// users; they look like AWS keys (AKIA + 16 base32 characters, a
// 40-character secret) but are LOCAL-ONLY: published in this source, they
// must never be given to anything that talks to AWS.
func DefaultIdentities(account string) []Identity {
	user := func(name string, mayInvoke bool) Identity {
		return Identity{
			Name:            name,
			AccessKeyID:     "AKIA" + derive(account, name, "access-key-id")[:16],
			SecretAccessKey: base64.StdEncoding.EncodeToString(digest(account, name, "secret"))[:40],
			ARN:             "arn:aws:iam::" + account + ":user/" + name,
			Account:         account,
			UserID:          "AIDA" + derive(account, name, "user-id")[:17],
			MayInvoke:       mayInvoke,
		}
	}
	return []Identity{
		user("operator-a", true),
		user("operator-b", true),
		user("auditor", false),
	}
}

// derive returns upper-case base32 (A-Z, 2-7: the alphabet of AWS key and
// user ids) of a digest of the parts.
func derive(parts ...string) string {
	return base32.StdEncoding.EncodeToString(digest(parts...))
}

func digest(parts ...string) []byte {
	h := sha256.New()
	h.Write([]byte("dlqq sigv4front local-only"))
	for _, p := range parts {
		h.Write([]byte{0})
		h.Write([]byte(p))
	}
	return h.Sum(nil)
}

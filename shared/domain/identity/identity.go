// Package identity is who acted: a principal AWS authenticated (the IAM
// authorizer of the operator endpoint, a Lambda function URL or an HTTP
// API), or a name a direct invoke gave (unverified), and the one rule that
// says when two principals are the same person for four eyes (Same).
//
// The endpoint's event carries the caller's ARN, account, user id and
// access key id (requestContext.authorizer.iam); it does not carry
// sts:SourceIdentity. The access key id is kept so that an auditor can
// join CloudTrail's record of the session, which does.
package identity

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// UnverifiedPrefix starts the actor of every action a direct invoke asked
// for: the name after it is whatever the caller typed.
const UnverifiedPrefix = "unverified:"

// Kinds of principal.
const (
	KindUser          = "user"
	KindAssumedRole   = "assumed-role"
	KindRoot          = "root"
	KindFederatedUser = "federated-user"
)

// MaxARNBytes bounds the ARN a history keeps (quarantine.MaxActorBytes
// less room for an approval reference): a longer one is refused, never
// clipped, so that a recorded principal is always whole.
const MaxARNBytes = 224

// Principal is a caller AWS authenticated.
type Principal struct {
	// ARN is the caller's ARN as AWS gave it: an IAM user's
	// (arn:aws:iam::123456789012:user/path/name), a role session's
	// (arn:aws:sts::123456789012:assumed-role/Role/session), the root's or
	// a federated user's.
	ARN     string `json:"arn"`
	Account string `json:"account"`
	// UserID is AWS's unique id (AIDA… for a user, AROA…:session for a
	// role session).
	UserID string `json:"user_id"`
	// AccessKey is the access key id that signed the request (ASIA… for a
	// session): CloudTrail's userIdentity.accessKeyId.
	AccessKey string `json:"access_key,omitempty"`
	Kind      string `json:"kind"`
	// Name is the user's name (user, federated-user) or the role's name
	// (assumed-role).
	Name string `json:"name,omitempty"`
	// Session is a role session's name.
	Session string `json:"session,omitempty"`
}

// FromIAM builds the principal of an IAM authorizer's fields
// (requestContext.authorizer.iam: userArn, accountId, userId, accessKey).
// An ARN that does not parse, or that names another account than
// accountId, is an error.
func FromIAM(userARN, accountID, userID, accessKey string) (Principal, error) {
	p := Principal{ARN: userARN, Account: accountID, UserID: userID, AccessKey: accessKey}
	parts := strings.SplitN(userARN, ":", 6)
	if len(parts) != 6 || parts[0] != "arn" || parts[1] == "" || parts[3] != "" {
		return Principal{}, fmt.Errorf("caller %q is not an IAM principal ARN", clip(userARN))
	}
	if len(userARN) > MaxARNBytes {
		return Principal{}, fmt.Errorf("caller ARN is %d bytes, more than the %d a history keeps whole", len(userARN), MaxARNBytes)
	}
	if !digits12(parts[4]) || parts[4] != accountID {
		return Principal{}, fmt.Errorf("caller %q is not of account %q", clip(userARN), accountID)
	}
	if strings.ContainsAny(userARN, "\n\r\t ") {
		return Principal{}, errors.New("caller ARN holds white space")
	}
	service, resource := parts[2], parts[5]
	switch {
	case service == "iam" && resource == "root":
		p.Kind = KindRoot
	case service == "iam" && strings.HasPrefix(resource, "user/"):
		p.Kind = KindUser
		p.Name = resource[strings.LastIndex(resource, "/")+1:]
	case service == "sts" && strings.HasPrefix(resource, "assumed-role/"):
		f := strings.Split(resource, "/")
		if len(f) != 3 || f[1] == "" || f[2] == "" {
			return Principal{}, fmt.Errorf("caller %q is not a role session ARN", clip(userARN))
		}
		p.Kind, p.Name, p.Session = KindAssumedRole, f[1], f[2]
	case service == "sts" && strings.HasPrefix(resource, "federated-user/"):
		p.Kind, p.Name = KindFederatedUser, strings.TrimPrefix(resource, "federated-user/")
	default:
		return Principal{}, fmt.Errorf("caller %q is not a user, role session, root or federated user", clip(userARN))
	}
	if p.Name == "" && p.Kind != KindRoot {
		return Principal{}, fmt.Errorf("caller %q names no one", clip(userARN))
	}
	return p, nil
}

// Actor is what a history records for the principal: its ARN.
func (p Principal) Actor() string { return p.ARN }

// Verified reports whether actor names a principal AWS authenticated (an
// ARN), rather than an unverified name or one of the system's own actors.
func Verified(actor string) bool { return strings.HasPrefix(actor, "arn:") }

// Unverified is the actor of a direct invoke that gave name.
func Unverified(name string) string { return UnverifiedPrefix + name }

// Rules says how role sessions count for Same: TrustedSessionRoles are the
// role names (case-insensitive, as IAM's are) whose session names a
// trusted broker sets, such as IAM Identity Center's permission-set roles
// (AWSReservedSSO_…) or a SAML IdP's role whose RoleSessionName is the
// user's name.
type Rules struct {
	TrustedSessionRoles []string `json:"trusted_session_roles,omitempty"`
}

func (r Rules) trusted(role string) bool {
	return slices.ContainsFunc(r.TrustedSessionRoles, func(t string) bool { return strings.EqualFold(t, role) })
}

// Person is the person a principal stands for under the rules: two
// principals with the same Person are the same principal for four eyes.
//
//   - an IAM user: the account and the user's name (IAM user names are
//     unique regardless of case);
//   - a session of a trusted role: the account and the session name, the
//     broker's name of the user, whichever trusted role it assumed (one
//     person holding two permission sets is still one person);
//   - a session of any other role: the account and the role. Whoever may
//     assume a role chooses the session name, so every session of it is
//     one principal: two people who share such a role cannot approve each
//     other's requests;
//   - the root: the account.
//
// A user's name and a trusted session's name that are equal (case aside)
// are taken as one person too. A federated user (GetFederationToken) names
// itself: it has no Person and takes no part in four eyes (ok false).
func (r Rules) Person(p Principal) (string, bool) {
	switch p.Kind {
	case KindUser:
		return p.Account + "/person/" + strings.ToLower(p.Name), true
	case KindAssumedRole:
		if r.trusted(p.Name) {
			return p.Account + "/person/" + strings.ToLower(p.Session), true
		}
		return p.Account + "/role/" + strings.ToLower(p.Name), true
	case KindRoot:
		return p.Account + "/root", true
	}
	return "", false
}

// Same reports whether a and b are the same principal for four eyes
// (Person). A principal without a Person is the same as anyone: it can
// neither request nor approve.
func (r Rules) Same(a, b Principal) bool {
	pa, oka := r.Person(a)
	pb, okb := r.Person(b)
	return !oka || !okb || pa == pb || (a.UserID != "" && a.UserID == b.UserID)
}

func digits12(s string) bool {
	if len(s) != 12 {
		return false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

func clip(s string) string {
	if len(s) > 96 {
		return s[:96] + "…"
	}
	return s
}

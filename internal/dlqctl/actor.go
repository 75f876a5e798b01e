package dlqctl

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sts"

	"github.com/dlqquarantine/dlqq/shared/domain/identity"
	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
)

// maxDirectActor is the longest name a direct invoke may give: the
// history records it after "unverified:".
const maxDirectActor = quarantine.MaxActorBytes - len(identity.UnverifiedPrefix)

// CallerIdentity says who the credentials belong to.
type CallerIdentity interface {
	GetCallerIdentity(ctx context.Context, in *sts.GetCallerIdentityInput, opts ...func(*sts.Options)) (*sts.GetCallerIdentityOutput, error)
}

// actorPending stands in for the actor while a request's flags are checked
// before STS is asked; it is never sent.
const actorPending = "(pending)"

// actorGiven says whether the user named the actor (--actor, DLQQ_ACTOR).
func (a *App) actorGiven() bool {
	return a.Actor != "" || (a.cmd != nil && a.cmd.Flags().Changed("actor"))
}

// actor is who acts, for the audit history: --actor (DLQQ_ACTOR), else
// the ARN sts:GetCallerIdentity gives for the credentials, asked once and
// only by a command that records an actor. Without an answer the command
// fails: it never records an identity it made up.
func (a *App) actor(ctx context.Context) (string, error) {
	if a.Actor != "" {
		return a.Actor, nil
	}
	c, err := a.connect(ctx)
	if err != nil {
		return "", err
	}
	if c.STS == nil {
		return "", errors.New("who you are: no STS client to ask; name yourself with --actor (DLQQ_ACTOR)")
	}
	out, err := c.STS.GetCallerIdentity(ctx, &sts.GetCallerIdentityInput{})
	if err != nil {
		return "", fmt.Errorf("who you are, for the audit history: sts:GetCallerIdentity failed (name yourself with --actor or DLQQ_ACTOR): %w", err)
	}
	arn := aws.ToString(out.Arn)
	switch {
	case arn == "":
		return "", errors.New("who you are, for the audit history: sts:GetCallerIdentity returned no ARN (name yourself with --actor or DLQQ_ACTOR)")
	case len(arn) > maxDirectActor:
		return "", fmt.Errorf("your ARN %s is longer than the %d bytes the audit history takes after %q: name yourself with --actor (DLQQ_ACTOR)", arn, maxDirectActor, identity.UnverifiedPrefix)
	case quarantine.ReservedActor(arn):
		return "", fmt.Errorf("your ARN %q is a name the system uses for itself: name yourself with --actor (DLQQ_ACTOR)", arn)
	}
	a.Actor = arn
	return arn, nil
}

package demo

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/dlqquarantine/dlqq/shared/dev/embedded"
	"github.com/dlqquarantine/dlqq/shared/dev/lambdatest"
	"github.com/dlqquarantine/dlqq/shared/dev/sigv4front"
	"github.com/dlqquarantine/dlqq/shared/usecase/redrive"
)

// operators are the demo's two verified operators at a local operator
// endpoint: a SigV4 check against the local identities (as a Lambda
// function URL with AWS_IAM does) in front of the redrive code's operator
// entry point, in process. operator-a asks for the high-risk actions,
// operator-b approves them (docs/identity.md).
type operators struct {
	ep   *lambdatest.Endpoint
	a, b sigv4front.Client
	// approved counts the approvals operator-b gave.
	approved int
}

func startOperators(st *embedded.Stack, svc *redrive.Service) (*operators, error) {
	ep, err := lambdatest.ServeHandler(st, svc.OperatorHandler, nil)
	if err != nil {
		return nil, err
	}
	o := &operators{ep: ep}
	if o.a, err = ep.Client(st, "operator-a"); err == nil {
		o.b, err = ep.Client(st, "operator-b")
	}
	if err != nil {
		ep.Close()
		return nil, err
	}
	return o, nil
}

func (o *operators) close() { o.ep.Close() }

// post sends req as c and reads the report or the refusal.
func post(ctx context.Context, c sigv4front.Client, req redrive.Request) (*redrive.Report, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	status, answer, err := c.Post(ctx, body)
	if err != nil {
		return nil, err
	}
	if status != http.StatusOK {
		return nil, fmt.Errorf("operator endpoint refused %s as %s: %d %s", req.Action, c.Identity.Name, status, answer)
	}
	var rep redrive.Report
	if err := json.Unmarshal(answer, &rep); err != nil {
		return nil, fmt.Errorf("operator endpoint: %w", err)
	}
	return &rep, nil
}

// run has operator-a ask for req through the endpoint; a high-risk
// request waits as a pending approval, which operator-b approves, and the
// report is its run's.
func (o *operators) run(ctx context.Context, req redrive.Request) (*redrive.Report, error) {
	req.RequestedBy = ""
	rep, err := post(ctx, o.a, req)
	if err != nil || rep.Stopped != redrive.StoppedPendingApproval {
		return rep, err
	}
	done, err := post(ctx, o.b, redrive.Request{Action: redrive.ActionApprove, Source: req.Source, ApprovalID: rep.Approval.ID,
		Reason: "second pair of eyes: plan checked"})
	if err != nil {
		return nil, err
	}
	o.approved++
	return done, nil
}

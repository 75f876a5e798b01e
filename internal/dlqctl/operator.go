package dlqctl

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

	"github.com/dlqquarantine/dlqq/shared/domain/approval"
	"github.com/dlqquarantine/dlqq/shared/usecase/redrive"
)

// The operator endpoint (docs/identity.md): a Lambda function URL, or an
// HTTP API where function URLs are not offered, both with IAM
// authorization. dlqctl signs each request with your own credentials
// (SigV4, the SDK's signer); AWS verifies the signature and your IAM
// permission before the operator function runs, and the function records
// the principal AWS verified. Nothing you type names you there.

// operatorTimeout bounds one request: a run lasts at most the function's
// timeout (15 minutes).
const operatorTimeout = 16 * time.Minute

// highRisk are the actions that may become a pending approval: dlqctl
// gives each request its approval id, so that the request sent again
// finds the approval it created.
var highRisk = map[string]bool{redrive.ActionRedrive: true, redrive.ActionCorrect: true, redrive.ActionUnpark: true, redrive.ActionPolicyAdd: true, redrive.ActionPolicyResume: true}

// invokeOperator sends req to the operator endpoint, signed.
func (a *App) invokeOperator(ctx context.Context, c *Clients, req redrive.Request, flags flagMapper) (*redrive.Report, error) {
	req.RequestedBy = ""
	if req.ApprovalID == "" && (highRisk[req.Action] || req.Action == "") { // "": a redrive
		req.ApprovalID = a.ApprovalID
		if req.ApprovalID == "" {
			req.ApprovalID = approval.NewID()
		}
	}
	body, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	status, answer, err := a.postSigned(ctx, c, body)
	if err != nil {
		if req.ApprovalID != "" {
			err = fmt.Errorf("%w; sent again with --approval-id %s it finds the approval it created", err, req.ApprovalID)
		}
		return nil, err
	}
	if status == http.StatusBadGateway || status == http.StatusServiceUnavailable || status == http.StatusGatewayTimeout {
		// An HTTP API ends a call at 30 s while the function goes on, and a
		// gateway error says nothing of what ran: not a refusal.
		return nil, &EndpointError{Status: status, Message: strings.TrimSpace(string(answer)), MayHaveRun: true, ApprovalID: req.ApprovalID}
	}
	if status == http.StatusOK {
		var rep redrive.Report
		if err := json.Unmarshal(answer, &rep); err != nil {
			return nil, fmt.Errorf("operator endpoint: the report does not decode: %w", err)
		}
		return &rep, pending(&rep)
	}
	var oe redrive.OperatorError
	if json.Unmarshal(answer, &oe) == nil && oe.Kind != "" {
		return nil, &FunctionError{Type: oe.Kind, Message: mapFunctionError(oe.Error, flags)}
	}
	// AWS's own refusal, before the function: a signature, a credential,
	// an IAM permission.
	var aws struct {
		Message  string `json:"Message"`
		Message2 string `json:"message"`
	}
	_ = json.Unmarshal(answer, &aws)
	msg := cmpOr(aws.Message, cmpOr(aws.Message2, strings.TrimSpace(string(answer))))
	return nil, &EndpointError{Status: status, Message: msg}
}

// EndpointError is a refusal of the operator endpoint itself (AWS checked
// the signature or your IAM permission and said no): nothing ran.
//
// With MayHaveRun it is a gateway's error instead (502, 503, 504): the
// request may have run, and may still be running.
type EndpointError struct {
	Status     int
	Message    string
	MayHaveRun bool
	ApprovalID string
}

func (e *EndpointError) Error() string {
	if e.MayHaveRun {
		again := "look (dlqctl show, dlqctl ls) before you send it again"
		if e.ApprovalID != "" {
			again = fmt.Sprintf("look (dlqctl approvals show %s, dlqctl show) before you send it again with --approval-id %s", e.ApprovalID, e.ApprovalID)
		}
		return fmt.Sprintf("the operator endpoint answered %d %s: the request may have run, or may still be running (an HTTP API ends a call after 30 s while the function goes on): %s", e.Status, e.Message, again)
	}
	hint := ""
	if e.Status == http.StatusForbidden {
		hint = " (your credentials need the stack's OperatorPolicy, and must be current)"
	}
	return fmt.Sprintf("the operator endpoint refused the request: %d %s%s", e.Status, e.Message, hint)
}

// postSigned posts body to the operator endpoint, signed with the
// clients' credentials for the endpoint's service (lambda for a function
// URL, execute-api for an HTTP API) in the clients' region.
func (a *App) postSigned(ctx context.Context, c *Clients, body []byte) (int, []byte, error) {
	u, err := url.Parse(a.OperatorURL)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return 0, nil, &UsageError{fmt.Errorf("--operator-url %q is not an http(s) URL", a.OperatorURL)}
	}
	if c.AWS.Credentials == nil {
		return 0, nil, errors.New("no AWS credentials to sign the operator request with")
	}
	creds, err := c.AWS.Credentials.Retrieve(ctx)
	if err != nil {
		return 0, nil, fmt.Errorf("your AWS credentials, to sign the operator request: %w", err)
	}
	service := "lambda"
	if strings.Contains(u.Host, ".execute-api.") {
		service = "execute-api"
	}
	ctx, cancel := context.WithTimeout(ctx, operatorTimeout)
	defer cancel()
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	hreq.Header.Set("Content-Type", "application/json")
	sum := sha256.Sum256(body)
	hash := hex.EncodeToString(sum[:])
	hreq.Header.Set("X-Amz-Content-Sha256", hash)
	if err := v4.NewSigner().SignHTTP(ctx, creds, hreq, hash, service, c.AWS.Region, a.Now().UTC()); err != nil {
		return 0, nil, fmt.Errorf("sign the operator request: %w", err)
	}
	resp, err := http.DefaultClient.Do(hreq)
	if err != nil {
		return 0, nil, fmt.Errorf("operator endpoint %s: %w (the request may have run: look before you send it again; an approval sent again runs nothing twice)", u.Host, err)
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		return 0, nil, fmt.Errorf("operator endpoint %s: the answer was cut: %w", u.Host, err)
	}
	return resp.StatusCode, answer, nil
}

package redrive

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdacontext"

	"github.com/dlqquarantine/dlqq/shared/domain/approval"
	"github.com/dlqquarantine/dlqq/shared/domain/identity"
	"github.com/dlqquarantine/dlqq/shared/domain/policy"
	"github.com/dlqquarantine/dlqq/shared/domain/quarantine"
)

// The two entry points. The redrive function (LambdaHandler) takes direct
// invokes: the console's test event, `aws lambda invoke`, the schedules.
// AWS does not tell it who called, so the requester it records is
// "unverified:" and the name the request gave, and it never approves nor
// runs a high-risk action. The operator function (OperatorHandler) sits
// behind the operator endpoint, a Lambda function URL or an HTTP API with
// IAM authorization: AWS verified the caller's SigV4 signature and IAM
// permission before the event exists, and the event's authorizer names
// the caller. Only that function trusts an authorizer, and nobody may
// invoke it other than through the endpoint (the template's guardrail).

// operatorEvent is what the operator endpoint delivers: a function URL's
// event (events.LambdaFunctionURLRequest) or an HTTP API's payload format
// 2.0 (events.APIGatewayV2HTTPRequest). Both carry the body and
// requestContext.authorizer.iam the same way.
type operatorEvent struct {
	Version         string `json:"version"`
	Body            string `json:"body"`
	IsBase64Encoded bool   `json:"isBase64Encoded"`
	RequestContext  struct {
		AccountID  string                                                `json:"accountId"`
		RequestID  string                                                `json:"requestId"`
		HTTP       events.LambdaFunctionURLRequestContextHTTPDescription `json:"http"`
		Authorizer *struct {
			IAM *events.LambdaFunctionURLRequestContextAuthorizerIAMDescription `json:"iam"`
		} `json:"authorizer"`
	} `json:"requestContext"`
}

// OperatorError is the body of an operator endpoint's error answer.
type OperatorError struct {
	Error string `json:"error"`
	Kind  string `json:"kind"`
}

// OperatorHandler is the operator function's entry point: an endpoint
// event in, an HTTP answer out (a function URL and an HTTP API both take
// events.LambdaFunctionURLResponse's shape). The body is a request as
// docs/redrive.md describes, without requested_by: the requester is the
// caller AWS verified. A 200 carries the report; an error its kind.
func (s *Service) OperatorHandler(ctx context.Context, raw json.RawMessage) (events.LambdaFunctionURLResponse, error) {
	if err := s.checkLease(ctx); err != nil {
		return answer(http.StatusInternalServerError, nil, err), nil
	}
	p, body, err := s.caller(ctx, raw)
	if err != nil {
		s.log.WarnContext(ctx, "operator request refused", "reason", err.Error())
		return answer(http.StatusForbidden, nil, &ForbiddenError{Problem: err.Error()}), nil
	}
	req, err := parseRequest(body, p.Actor())
	if err != nil {
		return answer(http.StatusBadRequest, nil, err), nil
	}
	req.verified = &p
	rep, err := s.Run(ctx, req)
	if err != nil {
		return answer(statusOf(err), rep, err), nil
	}
	return answer(http.StatusOK, rep, nil), nil
}

// caller is the verified principal of an endpoint event and the request
// body. An event without an IAM authorizer, or whose principal is not of
// this function's account, is refused.
func (s *Service) caller(ctx context.Context, raw json.RawMessage) (identity.Principal, []byte, error) {
	var ev operatorEvent
	if err := json.Unmarshal(raw, &ev); err != nil {
		return identity.Principal{}, nil, errors.New("not an endpoint event")
	}
	a := ev.RequestContext.Authorizer
	if ev.Version != "2.0" || a == nil || a.IAM == nil || a.IAM.UserARN == "" {
		return identity.Principal{}, nil, errors.New("the event carries no IAM authorizer: only the operator endpoint (AWS_IAM) invokes this function")
	}
	if m := ev.RequestContext.HTTP.Method; m != http.MethodPost {
		return identity.Principal{}, nil, fmt.Errorf("method %q: the operator endpoint takes POST", quarantine.Clip(m, 16))
	}
	p, err := identity.FromIAM(a.IAM.UserARN, a.IAM.AccountID, a.IAM.UserID, a.IAM.AccessKey)
	if err != nil {
		return identity.Principal{}, nil, err
	}
	if acct := ownAccount(ctx); acct != "" && (p.Account != acct || ev.RequestContext.AccountID != "" && ev.RequestContext.AccountID != acct) {
		return identity.Principal{}, nil, fmt.Errorf("caller of account %s: the operator endpoint serves account %s only", p.Account, acct)
	}
	body := []byte(ev.Body)
	if ev.IsBase64Encoded {
		if body, err = base64.StdEncoding.DecodeString(ev.Body); err != nil {
			return identity.Principal{}, nil, errors.New("the body is not base64 though the event says so")
		}
	}
	return p, body, nil
}

// ownAccount is the account of the invoked function ("" when unknown).
func ownAccount(ctx context.Context) string {
	lc, ok := lambdacontext.FromContext(ctx)
	if !ok {
		return ""
	}
	parts := strings.Split(lc.InvokedFunctionArn, ":")
	if len(parts) < 5 {
		return ""
	}
	return parts[4]
}

// statusOf maps an error of a run to the endpoint's status.
func statusOf(err error) int {
	var fe *ForbiddenError
	var re *RequestError
	var ce *quarantine.CorrectionError
	var pe *policy.Error
	var cfe *ConfigError
	switch {
	case isJoined(err):
		return http.StatusInternalServerError // a run's errors may name records
	case errors.As(err, &fe):
		return http.StatusForbidden
	case errors.Is(err, approval.ErrNotFound) || errors.As(err, &re) && re.Kind == quarantine.KindNotFound:
		return http.StatusNotFound
	case errors.As(err, &re) && re.Kind == quarantine.KindConflict, errors.Is(err, ErrRecordChanged), errors.Is(err, ErrPolicyChanged),
		errors.Is(err, quarantine.ErrCorrectionConflict), errors.Is(err, approval.ErrConflict):
		return http.StatusConflict
	case errors.As(err, &re), errors.As(err, &ce), errors.As(err, &pe):
		return http.StatusBadRequest
	case errors.As(err, &cfe):
		return http.StatusInternalServerError
	}
	return http.StatusInternalServerError
}

// answer is the endpoint's HTTP answer: the report (200, or beside an
// error when a run made one), or the error's text and kind. An
// operational error's text is replaced by its kind, as LambdaHandler
// does: its text may name a record.
func answer(status int, rep *Report, err error) events.LambdaFunctionURLResponse {
	var body []byte
	if err == nil {
		body, _ = json.Marshal(rep)
	} else {
		msg := err.Error()
		if status == http.StatusInternalServerError && !isConfig(err) {
			msg = fmt.Sprintf("redrive failed: %s (the run's log line has its counts)", quarantine.ErrorKind(err))
		}
		body, _ = json.Marshal(struct {
			OperatorError
			Report *Report `json:"report,omitempty"`
		}{OperatorError{Error: msg, Kind: quarantine.ErrorKind(err)}, rep})
	}
	return events.LambdaFunctionURLResponse{StatusCode: status, Headers: map[string]string{"content-type": "application/json"}, Body: string(body)}
}

func isConfig(err error) bool {
	var cfe *ConfigError
	return errors.As(err, &cfe)
}

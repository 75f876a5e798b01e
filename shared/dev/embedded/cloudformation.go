package embedded

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/xml"
	"fmt"
	"github.com/dlqquarantine/dlqq/shared/runtime/stackoutputs"
	"maps"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/dlqquarantine/dlqq/shared/dev/template"
)

// The dev kit's CloudFormation endpoint. kumo's CloudFormation stores no
// outputs (and knows nothing of a stack created resource by resource), so
// the embedded stack answers DescribeStacks for itself, as the API
// reference describes it (awsQuery protocol, version 2010-05-15): the
// stack's outputs are the template's Outputs resolved to the physical
// names the stack created. One endpoint serves every stack of the process;
// the SDK reaches it through its own configuration (the profile's
// services section, AWS_ENDPOINT_URL_CLOUDFORMATION for a child process).

const cfnNamespace = "http://cloudformation.amazonaws.com/doc/2010-05-15/"

// cfnStack is what DescribeStacks says of a registered stack.
type cfnStack struct {
	name, id string
	created  time.Time
	// outputs are read at each DescribeStacks: a runner sets the operator
	// endpoint's after the stack starts (SetOperatorURL).
	outputs func() [][2]string
}

type cfnEndpoint struct {
	url string
	mu  sync.Mutex
	// stacks by name, in registration order.
	stacks []*cfnStack
}

var (
	cfnOnce sync.Once
	cfnEP   *cfnEndpoint
	cfnErr  error
)

// cloudFormation returns the process's CloudFormation endpoint, started
// on first use on a loopback port; it lives as long as the process.
func cloudFormation() (*cfnEndpoint, error) {
	cfnOnce.Do(func() {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			cfnErr = fmt.Errorf("start the CloudFormation endpoint: %w", err)
			return
		}
		cfnEP = &cfnEndpoint{url: "http://" + l.Addr().String()}
		srv := &http.Server{Handler: cfnEP, ReadHeaderTimeout: 10 * time.Second}
		go func() { _ = srv.Serve(l) }()
	})
	return cfnEP, cfnErr
}

// register makes DescribeStacks answer for the stack; the returned func
// withdraws it.
func (e *cfnEndpoint) register(s *cfnStack) func() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.stacks = slices.DeleteFunc(e.stacks, func(o *cfnStack) bool { return o.name == s.name })
	e.stacks = append(e.stacks, s)
	return func() {
		e.mu.Lock()
		defer e.mu.Unlock()
		e.stacks = slices.DeleteFunc(e.stacks, func(o *cfnStack) bool { return o == s })
	}
}

// find returns the stack a StackName parameter names (its name or its
// id), or every stack when it is empty.
func (e *cfnEndpoint) find(name string) []*cfnStack {
	e.mu.Lock()
	defer e.mu.Unlock()
	if name == "" {
		return slices.Clone(e.stacks)
	}
	for _, s := range e.stacks {
		if s.name == name || s.id == name {
			return []*cfnStack{s}
		}
	}
	return nil
}

type cfnOutput struct {
	OutputKey   string `xml:"OutputKey"`
	OutputValue string `xml:"OutputValue"`
}

type cfnMember struct {
	StackName    string      `xml:"StackName"`
	StackID      string      `xml:"StackId"`
	CreationTime string      `xml:"CreationTime"`
	StackStatus  string      `xml:"StackStatus"`
	Outputs      []cfnOutput `xml:"Outputs>member"`
}

type describeStacksResponse struct {
	XMLName   xml.Name    `xml:"DescribeStacksResponse"`
	Xmlns     string      `xml:"xmlns,attr"`
	Stacks    []cfnMember `xml:"DescribeStacksResult>Stacks>member"`
	RequestID string      `xml:"ResponseMetadata>RequestId"`
}

type cfnErrorResponse struct {
	XMLName   xml.Name `xml:"ErrorResponse"`
	Xmlns     string   `xml:"xmlns,attr"`
	Type      string   `xml:"Error>Type"`
	Code      string   `xml:"Error>Code"`
	Message   string   `xml:"Error>Message"`
	RequestID string   `xml:"RequestId"`
}

func (e *cfnEndpoint) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	id := requestID()
	if r.Method != http.MethodPost {
		writeCFNError(w, id, http.StatusMethodNotAllowed, "InvalidAction", "only POST is served")
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 1<<20)
	if err := r.ParseForm(); err != nil {
		writeCFNError(w, id, http.StatusBadRequest, "MalformedQueryString", "the request body is not a form")
		return
	}
	action, version := r.PostForm.Get("Action"), r.PostForm.Get("Version")
	switch {
	case action != "DescribeStacks":
		writeCFNError(w, id, http.StatusBadRequest, "InvalidAction", fmt.Sprintf("the dev kit's CloudFormation endpoint serves DescribeStacks only, not %q", action))
		return
	case version != "2010-05-15":
		writeCFNError(w, id, http.StatusBadRequest, "InvalidParameterValue", fmt.Sprintf("Version %q: want 2010-05-15", version))
		return
	}
	name := r.PostForm.Get("StackName")
	found := e.find(name)
	if name != "" && len(found) == 0 {
		writeCFNError(w, id, http.StatusBadRequest, "ValidationError", "Stack with id "+name+" does not exist")
		return
	}
	resp := describeStacksResponse{Xmlns: cfnNamespace, RequestID: id, Stacks: []cfnMember{}}
	for _, s := range found {
		m := cfnMember{StackName: s.name, StackID: s.id, CreationTime: s.created.UTC().Format("2006-01-02T15:04:05.000Z"), StackStatus: "CREATE_COMPLETE"}
		for _, o := range s.outputs() {
			m.Outputs = append(m.Outputs, cfnOutput{OutputKey: o[0], OutputValue: o[1]})
		}
		resp.Stacks = append(resp.Stacks, m)
	}
	writeXML(w, http.StatusOK, resp)
}

func writeCFNError(w http.ResponseWriter, id string, status int, code, msg string) {
	writeXML(w, status, cfnErrorResponse{Xmlns: cfnNamespace, Type: "Sender", Code: code, Message: msg, RequestID: id})
}

func writeXML(w http.ResponseWriter, status int, v any) {
	body, err := xml.Marshal(v)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/xml")
	w.WriteHeader(status)
	_, _ = w.Write([]byte(xml.Header))
	_, _ = w.Write(body)
}

func requestID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	h := hex.EncodeToString(b)
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// Outputs returns the template's Outputs resolved to what the stack
// created: queue URLs as the emulator gave them, key ARNs for
// !GetAtt Key.Arn, the tables' real stream ARNs. An output whose
// condition is false is left out, as CloudFormation leaves it out.
func (s *Stack) Outputs() map[string]string {
	real := map[string]string{}
	for id, url := range s.QueueURLs {
		real[strings.TrimRight(s.Env.Endpoint, "/")+"/"+s.Env.Account+"/"+s.Names[id]] = url
	}
	for id, arn := range s.KeyARNs {
		real[fmt.Sprintf("arn:aws:kms:%s:%s:%s", s.Env.Region, s.Env.Account, s.Names[id])] = arn
	}
	for id, arn := range s.StreamARNs {
		real[template.StreamARN(s.Env.Region, s.Env.Account, s.Names[id])] = arn
	}
	out := map[string]string{}
	for name, o := range s.Template.Outputs {
		if c := aws.ToString(o.Condition); c != "" {
			if v, ok := s.Template.Conditions[c].(bool); ok && !v {
				continue
			}
		}
		v := fmt.Sprint(o.Value)
		if r, ok := real[v]; ok {
			v = r
		}
		out[name] = v
	}
	// The operator endpoint is the local one a runner serves
	// (SetOperatorURL), or none: the URL the template would have AWS give
	// leads nowhere here.
	if u := s.operatorURL.Load(); u != nil {
		out[stackoutputs.OperatorEndpoint] = *u
	} else {
		delete(out, stackoutputs.OperatorEndpoint)
	}
	return out
}

// SetOperatorURL makes url the stack's OperatorEndpointUrl output: the
// local operator endpoint a runner serves (localrunner).
func (s *Stack) SetOperatorURL(url string) { s.operatorURL.Store(&url) }

// registerOutputs makes the process's CloudFormation endpoint answer
// DescribeStacks for the stack with its Outputs.
func (s *Stack) registerOutputs(ep *cfnEndpoint) {
	reg := &cfnStack{name: s.Env.StackName, created: time.Now(),
		id: fmt.Sprintf("arn:aws:cloudformation:%s:%s:stack/%s/%s", s.Env.Region, s.Env.Account, s.Env.StackName, requestID()),
		outputs: func() [][2]string {
			outs := s.Outputs()
			keys := slices.Sorted(maps.Keys(outs))
			pairs := make([][2]string, 0, len(keys))
			for _, k := range keys {
				pairs = append(pairs, [2]string{k, outs[k]})
			}
			return pairs
		}}
	s.closers = append(s.closers, ep.register(reg))
}

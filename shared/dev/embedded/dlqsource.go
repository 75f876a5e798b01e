package embedded

import (
	"bytes"
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
)

// kumo moves a message that outlived its source queue's maxReceiveCount to
// the dead-letter queue with its message id, body and attributes, but
// without the system attribute SQS adds there, DeadLetterQueueSourceArn
// (the ARN of the queue the message was moved from). Ingest routes a
// message of a DLQ that several sources share by it, so the dev kit adds
// it, in front of kumo's handler, as SQS does: it remembers which queue
// each message was sent to (the queues with a redrive policy only: no
// other message can be moved), and a message received from a queue other
// than the one it was sent to carries that queue's ARN, when the receive
// asks for it (All or DeadLetterQueueSourceArn). A message sent to the DLQ
// directly (a consumer dead-lettering on purpose) carries none, as on AWS.
// kumo also gives no FIFO message its MessageGroupId and
// MessageDeduplicationId attributes (in the source queue or, where it
// drops the group, in the DLQ): the front adds the ones it was sent with,
// when the receive asks for them. A persistent stack keeps what it
// remembered next to kumo's snapshots.

// dlqSourceFileName is the front's memory, next to kumo's snapshots.
const dlqSourceFileName = "devkit-sqs-dlq-sources.json"

// dlqSourceAttr is the system attribute the front adds.
const dlqSourceAttr = "DeadLetterQueueSourceArn"

// dlqSourceFront is the handler in front of kumo's SQS.
type dlqSourceFront struct {
	next http.Handler
	file string

	mu    sync.Mutex
	state dlqSourceState
	dirty bool
}

type dlqSourceState struct {
	// Redriven maps the name of each queue that has a redrive policy to
	// its ARN (derived from its DLQ's ARN: one region and account).
	Redriven map[string]string `json:"redriven"`
	// SentTo maps the id of each message sent to such a queue to where
	// it was sent.
	SentTo map[string]sentMessage `json:"sent_to"`
}

// sentMessage is where a message was sent, and its FIFO ids.
type sentMessage struct {
	Queue string `json:"q"` // the queue's ARN
	Group string `json:"g,omitempty"`
	Dedup string `json:"d,omitempty"`
}

func newDLQSourceFront(next http.Handler, dir string) (*dlqSourceFront, error) {
	f := &dlqSourceFront{next: next, state: dlqSourceState{Redriven: map[string]string{}, SentTo: map[string]sentMessage{}}}
	if dir == "" {
		return f, nil
	}
	f.file = filepath.Join(dir, dlqSourceFileName)
	var st dlqSourceState
	if err := loadState(f.file, "dev kit DLQ sources", &st); err != nil {
		return nil, err
	}
	if st.Redriven != nil {
		f.state.Redriven = st.Redriven
	}
	if st.SentTo != nil {
		f.state.SentTo = st.SentTo
	}
	return f, nil
}

// save writes what the front remembers (a persistent stack's flush).
func (f *dlqSourceFront) save() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.file == "" || !f.dirty {
		return nil
	}
	b, err := json.Marshal(f.state)
	if err != nil {
		return err
	}
	if err := writeFileAtomic(f.file, b); err != nil {
		return err
	}
	f.dirty = false
	return nil
}

func (f *dlqSourceFront) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	op, ok := strings.CutPrefix(r.Header.Get("X-Amz-Target"), "AmazonSQS.")
	switch {
	case !ok:
	case op == "CreateQueue", op == "SetQueueAttributes", op == "DeleteQueue",
		op == "SendMessage", op == "SendMessageBatch", op == "ReceiveMessage":
		f.serve(w, r, op)
		return
	}
	f.next.ServeHTTP(w, r)
}

// sqsRequest is what the front reads of the requests it follows.
type sqsRequest struct {
	QueueName                   string            `json:"QueueName"`
	QueueURL                    string            `json:"QueueUrl"`
	Attributes                  map[string]string `json:"Attributes"`
	AttributeNames              []string          `json:"AttributeNames"`
	MessageSystemAttributeNames []string          `json:"MessageSystemAttributeNames"`
	MessageGroupID              string            `json:"MessageGroupId"`
	MessageDeduplicationID      string            `json:"MessageDeduplicationId"`
	Entries                     []struct {
		ID                     string `json:"Id"`
		MessageGroupID         string `json:"MessageGroupId"`
		MessageDeduplicationID string `json:"MessageDeduplicationId"`
	} `json:"Entries"`
}

func (f *dlqSourceFront) serve(w http.ResponseWriter, r *http.Request, op string) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, "read the request body: "+err.Error(), http.StatusBadRequest)
		return
	}
	r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
	rec := httptest.NewRecorder()
	f.next.ServeHTTP(rec, r)
	out := rec.Body.Bytes()
	var in sqsRequest
	if rec.Code == http.StatusOK && json.Unmarshal(body, &in) == nil {
		if changed := f.follow(op, in, out); changed != nil {
			out = changed
		}
	}
	maps.Copy(w.Header(), rec.Header())
	w.Header().Del("Content-Length")
	w.WriteHeader(rec.Code)
	_, _ = w.Write(out)
}

// queueName is the queue a request names (its URL's last segment).
func queueName(in sqsRequest) string {
	if in.QueueName != "" {
		return in.QueueName
	}
	u := strings.TrimRight(in.QueueURL, "/")
	return u[strings.LastIndexByte(u, '/')+1:]
}

// follow learns from an answered request and returns the answer to give
// instead, or nil for kumo's.
func (f *dlqSourceFront) follow(op string, in sqsRequest, answer []byte) []byte {
	name := queueName(in)
	f.mu.Lock()
	defer f.mu.Unlock()
	switch op {
	case "CreateQueue", "SetQueueAttributes":
		rp, ok := in.Attributes["RedrivePolicy"]
		if !ok {
			return nil
		}
		var p struct {
			DeadLetterTargetArn string `json:"deadLetterTargetArn"`
		}
		if err := json.Unmarshal([]byte(rp), &p); err != nil || p.DeadLetterTargetArn == "" {
			delete(f.state.Redriven, name) // RedrivePolicy "" removes it
		} else {
			f.state.Redriven[name] = p.DeadLetterTargetArn[:strings.LastIndexByte(p.DeadLetterTargetArn, ':')+1] + name
		}
		f.dirty = true
	case "DeleteQueue":
		delete(f.state.Redriven, name)
		f.dirty = true
	case "SendMessage", "SendMessageBatch":
		arn, ok := f.state.Redriven[name]
		if !ok {
			return nil
		}
		var a struct {
			MessageID  string `json:"MessageId"`
			Successful []struct {
				ID        string `json:"Id"`
				MessageID string `json:"MessageId"`
			} `json:"Successful"`
		}
		if json.Unmarshal(answer, &a) != nil {
			return nil
		}
		if a.MessageID != "" {
			f.state.SentTo[a.MessageID] = sentMessage{arn, in.MessageGroupID, in.MessageDeduplicationID}
		}
		for _, s := range a.Successful {
			for _, e := range in.Entries {
				if e.ID == s.ID {
					f.state.SentTo[s.MessageID] = sentMessage{arn, e.MessageGroupID, e.MessageDeduplicationID}
				}
			}
		}
		f.dirty = true
	case "ReceiveMessage":
		return f.withSources(name, in, answer)
	}
	return nil
}

// asksFor says whether a ReceiveMessage request asks for a system attribute.
func asksFor(in sqsRequest, attr string) bool {
	for _, names := range [][]string{in.AttributeNames, in.MessageSystemAttributeNames} {
		for _, n := range names {
			if n == "All" || n == attr {
				return true
			}
		}
	}
	return false
}

// withSources adds DeadLetterQueueSourceArn to each message of a
// ReceiveMessage answer from queue name that was sent to another queue,
// and its FIFO ids to each message sent with them, as far as in asks for
// them; nil when there is none to add. Called with f.mu held.
func (f *dlqSourceFront) withSources(name string, in sqsRequest, answer []byte) []byte {
	want := map[string]bool{}
	for _, attr := range []string{dlqSourceAttr, "MessageGroupId", "MessageDeduplicationId"} {
		want[attr] = asksFor(in, attr)
	}
	if !want[dlqSourceAttr] && !want["MessageGroupId"] && !want["MessageDeduplicationId"] {
		return nil
	}
	var a map[string]json.RawMessage
	if json.Unmarshal(answer, &a) != nil {
		return nil
	}
	var msgs []map[string]json.RawMessage
	if json.Unmarshal(a["Messages"], &msgs) != nil {
		return nil
	}
	added := false
	for _, m := range msgs {
		var id string
		if json.Unmarshal(m["MessageId"], &id) != nil {
			continue
		}
		sent, ok := f.state.SentTo[id]
		if !ok {
			continue
		}
		attrs := map[string]string{}
		if raw, ok := m["Attributes"]; ok && json.Unmarshal(raw, &attrs) != nil {
			continue
		}
		n := len(attrs)
		for attr, v := range map[string]string{dlqSourceAttr: sent.Queue, "MessageGroupId": sent.Group, "MessageDeduplicationId": sent.Dedup} {
			if attr == dlqSourceAttr && sent.Queue[strings.LastIndexByte(sent.Queue, ':')+1:] == name {
				continue // received from the queue it was sent to
			}
			if _, has := attrs[attr]; !has && want[attr] && v != "" {
				attrs[attr] = v
			}
		}
		if len(attrs) == n {
			continue
		}
		m["Attributes"], _ = json.Marshal(attrs)
		added = true
	}
	if !added {
		return nil
	}
	a["Messages"], _ = json.Marshal(msgs)
	out, err := json.Marshal(a)
	if err != nil {
		return nil
	}
	return out
}

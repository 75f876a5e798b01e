// Package quarantine is the core of DLQ Quarantine: the quarantine record, its
// lifecycle, the seal, idempotency key derivation, classification and the
// validation gate. It imports no AWS SDK package; adapters live beside it.
package quarantine

// Status is a record's lifecycle state.
type Status string

// Lifecycle states, in the order a record usually moves through them.
const (
	StatusQuarantined Status = "QUARANTINED"
	StatusRedriving   Status = "REDRIVING"
	StatusRedriven    Status = "REDRIVEN"
	StatusResolved    Status = "RESOLVED"
	StatusParked      Status = "PARKED"
	StatusArchived    Status = "ARCHIVED"
)

// Valid reports whether s is one of the known states.
func (s Status) Valid() bool {
	switch s {
	case StatusQuarantined, StatusRedriving, StatusRedriven, StatusResolved, StatusParked, StatusArchived:
		return true
	}
	return false
}

// Class is the failure class, the first triage decision about a record.
type Class string

// Failure classes.
const (
	// ClassValidation is a deterministic failure: the payload must be fixed first.
	ClassValidation Class = "validation"
	// ClassExhausted is a transient failure that outlived its retries: a redrive may succeed.
	ClassExhausted Class = "exhausted"
	// ClassPoison marks a record whose redrive cap was reached: isolated for a human.
	ClassPoison Class = "poison"
)

// Encoding says how Record.Body holds the original bytes.
type Encoding string

// Body encodings.
const (
	EncodingUTF8   Encoding = "utf8"
	EncodingBase64 Encoding = "base64"
)

// KeyOrigin says where an idempotency key came from.
type KeyOrigin string

// Key origins, in the order they are tried.
const (
	KeyFromAttribute KeyOrigin = "attribute"
	KeyFromPointer   KeyOrigin = "pointer"
	KeyFromBodyHash  KeyOrigin = "body_hash"
)

// Attribute is an SQS message attribute, kept verbatim.
type Attribute struct {
	DataType    string `json:"data_type"`
	StringValue string `json:"string_value,omitempty"`
	BinaryValue []byte `json:"binary_value,omitempty"`
}

// Attempt is one entry of a record's failure and action history.
type Attempt struct {
	At           Time   `json:"at"`
	Stage        string `json:"stage"`
	Reason       string `json:"reason"`
	MessageID    string `json:"message_id,omitempty"`
	Actor        string `json:"actor"`
	ReceiveCount int    `json:"receive_count,omitempty"`
	BodySHA256   string `json:"body_sha256,omitempty"`
	Note         string `json:"note,omitempty"`
	// Kind is AttemptArrival on arrivals from the DLQ (older records leave
	// it empty; see IsArrival).
	Kind string `json:"kind,omitempty"`
	// Approval names the four-eyes approval the action ran under (its id),
	// or FourEyesOff when the source's four_eyes leaves its risk out.
	Approval string `json:"approval,omitempty"`
	// Target names the registered source a redrive to another queue sent
	// (or claimed to send) the record to, instead of its own source
	// (RiskRetarget). Absent on every other entry, so that older seals
	// verify unchanged.
	Target string `json:"target,omitempty"`
}

// Read is one recorded read of a record's payload: an audit entry, kept
// apart from the failure history so that reads never evict it.
type Read struct {
	At    Time   `json:"at"`
	Actor string `json:"actor"`
}

// ObjectRef points at an object in S3 that holds part of a record (a claim check).
type ObjectRef struct {
	Bucket    string `json:"bucket"`
	Key       string `json:"key"`
	VersionID string `json:"version_id,omitempty"`
	SHA256    string `json:"sha256"`
	Size      int64  `json:"size"`
}

// Record is one quarantined event: one per idempotency key and source queue.
//
// Every field except Seal is covered by the seal. The JSON field names are
// also the DynamoDB attribute names.
type Record struct {
	DLQID          string    `json:"dlq_id"`
	Source         string    `json:"source"`
	SourceARN      string    `json:"source_arn,omitempty"`
	DLQARN         string    `json:"dlq_arn,omitempty"`
	IdempotencyKey string    `json:"idempotency_key"`
	KeyOrigin      KeyOrigin `json:"key_origin"`

	Status      Status `json:"status"`
	StatusSince Time   `json:"status_since"`

	FailureClass     Class  `json:"failure_class"`
	FailureSignature string `json:"failure_signature"`
	FailureStage     string `json:"failure_stage"`
	FailureReason    string `json:"failure_reason"`
	FailureDetail    string `json:"failure_detail,omitempty"`
	SchemaVersion    string `json:"schema_version,omitempty"`

	// Body is the original body verbatim (EncodingUTF8) or base64 of its bytes
	// (EncodingBase64). It is empty when BodyRef holds the body instead.
	Body         string     `json:"body,omitempty"`
	BodyEncoding Encoding   `json:"body_encoding"`
	BodySHA256   string     `json:"body_sha256"`
	BodySize     int64      `json:"body_size"`
	BodyRef      *ObjectRef `json:"body_ref,omitempty"`

	// Attributes are the original message attributes; AttributesRef holds
	// them instead when they are too large to keep in the item.
	Attributes    map[string]Attribute `json:"message_attributes,omitempty"`
	AttributesRef *ObjectRef           `json:"message_attributes_ref,omitempty"`

	SentTimestamp  int64  `json:"sent_timestamp,omitempty"`
	ReceiveCount   int    `json:"receive_count,omitempty"`
	TraceHeader    string `json:"aws_trace_header,omitempty"`
	MessageGroupID string `json:"message_group_id,omitempty"`
	// SequenceNumber is the SQS sequence number of the first arrival (FIFO
	// queues only): with MessageGroupID, the order replays keep (see
	// CompareSequence).
	SequenceNumber string `json:"sequence_number,omitempty"`

	Attempts     []Attempt `json:"attempts"`
	AttemptCount int       `json:"attempt_count"`
	FirstSeen    Time      `json:"first_seen"`
	LastSeen     Time      `json:"last_seen"`

	// Reads are the newest payload reads (at most DefaultMaxReads) and
	// ReadCount their total; reads are not attempts.
	Reads     []Read `json:"reads,omitempty"`
	ReadCount int    `json:"read_count,omitempty"`

	RedriveCount int   `json:"redrive_count"`
	RedriveCap   int   `json:"redrive_cap"`
	Version      int64 `json:"version"`
	LeaseUntil   *Time `json:"lease_until,omitempty"`
	// LeaseReclaimed is true while a claim holds a round taken over from an
	// expired lease: that round may already have been sent.
	LeaseReclaimed bool `json:"lease_reclaimed,omitempty"`
	// ParkedCap, while a claim holds an operator-approved replay of a
	// PARKED record, is the cap the record had when parked: a claim given
	// back returns it to PARKED under that cap, never to automatic replay.
	ParkedCap int `json:"parked_cap,omitempty"`
	// RedrivenBy is who claimed the latest replay (a person, or
	// "policy:<id>" for a standing policy, whose breaker counts it).
	RedrivenBy string `json:"redriven_by,omitempty"`
	// LastSentMessageID is the SQS message id of the latest replay.
	LastSentMessageID string `json:"last_sent_message_id,omitempty"`

	// Corrections are operator fixes of the payload, oldest first; a replay
	// sends the latest. The original body above never changes.
	Corrections []Correction `json:"corrections,omitempty"`

	// Archive says where the sweeper archived the record; set on ARCHIVED
	// stubs, whose payload then lives only in the archive.
	Archive *ArchiveRef `json:"archive,omitempty"`

	// Predecessor is set on a record opened for an arrival that the record
	// at its id could not take: archived, or failing its seal. It names that
	// record and the seal it had.
	Predecessor *RecordLink `json:"predecessor,omitempty"`

	Seal     string `json:"seal,omitempty"`
	PrevSeal string `json:"prev_seal,omitempty"`
	// WriteID is a random token of the write that stored this version, so
	// that a writer whose answer was lost (a timeout, a retried request
	// whose first try was applied) recognizes its own write instead of
	// taking it for another writer's.
	WriteID string `json:"write_id,omitempty"`

	// undecodable is set on a stand-in for a stored item that does not
	// decode as a record (written outside the system): it never verifies.
	undecodable string
}

// ArchiveRef locates the write-once archive object of a record version.
type ArchiveRef struct {
	Bucket      string `json:"bucket"`
	Key         string `json:"key"`
	VersionID   string `json:"version_id,omitempty"`
	RetainUntil Time   `json:"retain_until"`
	// SHA256 is the hex SHA-256 of the archive object's bytes.
	SHA256 string `json:"sha256"`
	// Seal is the seal of the archived record version; the stub's
	// prev_seal equals it.
	Seal       string `json:"seal"`
	ArchivedAt Time   `json:"archived_at"`
}

// RecordLink names another record version: its id and seal, and why it is
// linked.
type RecordLink struct {
	ID     string `json:"id"`
	Seal   string `json:"seal"`
	Reason string `json:"reason"`
}

// Reasons a successor record was opened (RecordLink.Reason).
const (
	LinkArchived     = "archived"
	LinkSealMismatch = "seal mismatch"
)

// Clone returns a deep copy of r, so a transition never aliases the record it
// started from.
func (r *Record) Clone() *Record {
	c := *r
	c.BodyRef, c.AttributesRef = clonePtr(r.BodyRef), clonePtr(r.AttributesRef)
	c.LeaseUntil, c.Archive, c.Predecessor = clonePtr(r.LeaseUntil), clonePtr(r.Archive), clonePtr(r.Predecessor)
	if r.Attributes != nil {
		c.Attributes = make(map[string]Attribute, len(r.Attributes))
		for k, v := range r.Attributes {
			v.BinaryValue = append([]byte(nil), v.BinaryValue...)
			if len(v.BinaryValue) == 0 {
				v.BinaryValue = nil
			}
			c.Attributes[k] = v
		}
	}
	c.Attempts = append([]Attempt(nil), r.Attempts...)
	if r.Reads != nil {
		c.Reads = append([]Read(nil), r.Reads...)
	}
	if r.Corrections != nil {
		c.Corrections = append([]Correction(nil), r.Corrections...)
		for i := range c.Corrections {
			c.Corrections[i].BodyRef = clonePtr(c.Corrections[i].BodyRef)
		}
	}
	return &c
}

// clonePtr returns a copy of *p, or nil.
func clonePtr[T any](p *T) *T {
	if p == nil {
		return nil
	}
	c := *p
	return &c
}

// HasMessage reports whether the retained history already holds an arrival
// of the given SQS message id. Only arrivals count: a replayed message that
// fails again reaches the DLQ with the id redrive's send was given.
func (r *Record) HasMessage(messageID string) bool {
	if messageID == "" {
		return false
	}
	messageID = Clip(messageID, MaxMessageIDBytes) // as stored
	for _, a := range r.Attempts {
		if a.MessageID == messageID && a.IsArrival() {
			return true
		}
	}
	return false
}

// Undecodable returns a stand-in for the stored item of id that does not
// decode as a record (an attribute of the wrong type, written outside the
// system), with what could be read of it (version -1 when unknown). It
// never verifies, so every transition refuses it and it is set aside like
// any record that fails verification: an arrival for it opens a successor,
// a run holds it instead of failing on it every time.
func Undecodable(id, source string, status Status, seal string, version int64, why string) *Record {
	return &Record{DLQID: id, Source: source, Status: status, Seal: seal, Version: version, undecodable: Clip(why, 256)}
}

// IsUndecodable reports whether r is a stand-in for an item that does not
// decode (Undecodable).
func (r *Record) IsUndecodable() bool { return r.undecodable != "" }

// SentTo reports whether r's history holds a send into target, a
// registered source other than its own (a redrive to another queue): an
// entry of stage redrive naming target that recorded a message id, or a
// send whose outcome is unknown (possibly sent).
func (r *Record) SentTo(target string) bool {
	for i := range r.Attempts {
		a := &r.Attempts[i]
		if target != "" && a.Target == target && a.Stage == StageRedrive && !a.IsArrival() && (a.MessageID != "" || a.IsPossiblySent()) {
			return true
		}
	}
	return false
}

// LastTarget is the target of r's newest send ("" when it went to its own
// source, or r was never sent).
func (r *Record) LastTarget() string {
	for i := len(r.Attempts) - 1; i >= 0; i-- {
		a := &r.Attempts[i]
		if a.Stage == StageRedrive && !a.IsArrival() && (a.MessageID != "" || a.IsPossiblySent()) {
			return a.Target
		}
	}
	return ""
}

package quarantine

import (
	"strings"
	"unicode"
)

// Attribute names a consumer sets when it dead-letters a message on purpose,
// and the ones redrive adds to replayed messages.
const (
	AttrFailureReason = "dlq-failure-reason"
	AttrFailureStage  = "dlq-failure-stage"
	AttrFailureType   = "dlq-failure-type"
	// AttrFailureSource names the source queue (its name) of a message a
	// consumer dead-letters on purpose into a DLQ that several sources
	// share: SQS sets DeadLetterQueueSourceArn only on the messages it
	// moves. Ingest takes it only from a message without that attribute,
	// and only when it names a source configured with that DLQ.
	AttrFailureSource = "dlq-failure-source"
	AttrRecordID      = "dlq-record-id"
	AttrRedriveCount  = "dlq-redrive-count"
)

// Default stage and reason for a message that passed the gate and carries no
// explanation from its consumer: it simply ran out of receives.
const (
	StageConsumer   = "consumer"
	ReasonExhausted = "retries exhausted"
)

// maxSignaturePart bounds each part of a failure signature.
const maxSignaturePart = 64

// Classification is the triage decision for one arrival.
type Classification struct {
	Class     Class
	Stage     string
	Reason    string
	Detail    string
	Signature string
}

// Classify decides a message's failure class. Failure attributes set by a
// consumer that dead-lettered the message on purpose win; otherwise the gate
// verdict decides: invalid → validation, valid → exhausted.
func Classify(src *Source, attrs map[string]Attribute, v Verdict) Classification {
	schemaVersion := ""
	if src != nil {
		schemaVersion = src.SchemaVersion
	}
	reason := stringAttr(attrs, AttrFailureReason)
	typ := stringAttr(attrs, AttrFailureType)
	if reason != "" || typ != "" {
		stage := stringAttr(attrs, AttrFailureStage)
		if stage == "" {
			stage = StageConsumer
		}
		if reason == "" {
			reason = typ
		}
		class := ClassExhausted
		switch strings.ToLower(strings.TrimSpace(typ)) {
		case "validation", "permanent", "invalid", "schema":
			class = ClassValidation
		}
		c := Classification{Class: class, Stage: Clip(stage, MaxStageBytes), Reason: Clip(reason, MaxReasonBytes)}
		c.Signature = Signature(c.Stage, c.Reason, schemaVersion)
		return c
	}
	if !v.Valid {
		c := Classification{Class: ClassValidation, Stage: Clip(v.Stage, MaxStageBytes), Reason: Clip(v.Reason, MaxReasonBytes), Detail: Clip(v.Detail, MaxDetailBytes)}
		c.Signature = Signature(c.Stage, c.Reason, schemaVersion)
		return c
	}
	c := Classification{Class: ClassExhausted, Stage: StageConsumer, Reason: ReasonExhausted}
	c.Signature = Signature(c.Stage, c.Reason, schemaVersion)
	return c
}

func stringAttr(attrs map[string]Attribute, name string) string {
	a, ok := attrs[name]
	if !ok || !strings.HasPrefix(a.DataType, "String") {
		return ""
	}
	return strings.TrimSpace(a.StringValue)
}

// Signature normalizes (stage, reason, schema version) into the unit of
// triage: each part trimmed, lower-cased, whitespace collapsed, runs of digits
// replaced by '#' (so ids and counts do not multiply signatures) and clipped
// to 64 bytes; the parts are joined with '|'.
func Signature(stage, reason, schemaVersion string) string {
	return normalizePart(stage) + "|" + normalizePart(reason) + "|" + normalizePart(schemaVersion)
}

func normalizePart(s string) string {
	var b strings.Builder
	space, digit := false, false
	for _, r := range strings.ToLower(strings.TrimSpace(s)) {
		switch {
		case unicode.IsSpace(r) || r == '|':
			if !space {
				b.WriteByte(' ')
			}
			space, digit = true, false
		case unicode.IsDigit(r):
			if !digit {
				b.WriteByte('#')
			}
			space, digit = false, true
		case unicode.IsPrint(r):
			b.WriteRune(r)
			space, digit = false, false
		}
	}
	return Clip(b.String(), maxSignaturePart)
}

// Clip shortens s to at most n bytes without splitting a UTF-8 sequence.
func Clip(s string, n int) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

func utf8RuneStart(b byte) bool { return b&0xC0 != 0x80 }

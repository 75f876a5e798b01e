package quarantine

import (
	"encoding/json"
	"fmt"
	"reflect"
)

// edges are the status changes some transition function makes (lifecycle.go,
// correction.go); every status may also stay as it is (an arrival, a
// reclaim, a send noted while the record changed, a payload read). An
// ARCHIVED stub never leaves ARCHIVED: ingest opens a successor record at
// another id instead.
var edges = map[Status][]Status{
	StatusQuarantined: {StatusRedriving, StatusParked},
	StatusRedriving:   {StatusQuarantined, StatusParked, StatusRedriven},
	StatusRedriven:    {StatusQuarantined, StatusResolved},
	StatusResolved:    {StatusQuarantined, StatusArchived},
	StatusParked:      {StatusRedriving, StatusQuarantined, StatusArchived},
}

// CheckTransition reports why next is not a version a legitimate writer
// could have produced from prev (nil when next is a record's first
// version): next's seal and inline bodies verify; next is version
// prev+1 chained to prev's seal; what no transition changes is unchanged;
// the attempt history and the payload reads only grow; corrections are
// only appended; the status moves along an edge a transition makes; and
// only the archive transition drops the payload. It cannot tell who wrote
// next: a writer who knows these rules can still forge a version.
func CheckTransition(prev, next *Record) error {
	if err := Verify(next); err != nil {
		return fmt.Errorf("its seal does not verify: %w", err)
	}
	if prev == nil {
		if next.Version != 1 || next.PrevSeal != "" {
			return fmt.Errorf("a first version is version %d with a prev_seal", next.Version)
		}
		return nil
	}
	if next.Version != prev.Version+1 {
		return fmt.Errorf("version %d follows version %d", next.Version, prev.Version)
	}
	if next.PrevSeal != prev.Seal {
		return fmt.Errorf("its prev_seal is not version %d's seal", prev.Version)
	}
	if err := sameIdentity(prev, next); err != nil {
		return err
	}
	if next.Status != prev.Status && !canMove(prev.Status, next.Status) {
		return fmt.Errorf("status %s to %s is no transition", prev.Status, next.Status)
	}
	reads := next.ReadCount - prev.ReadCount
	attempts := next.AttemptCount - prev.AttemptCount
	switch {
	case reads == 1 && attempts == 0:
		return checkRead(prev, next)
	case reads == 0 && attempts == 1:
		if len(prev.Reads) != len(next.Reads) || !isSuffix(prev.Reads, next.Reads) {
			return fmt.Errorf("payload reads changed")
		}
		return checkAction(prev, next)
	}
	return fmt.Errorf("attempt count %d to %d and read count %d to %d: a transition adds one attempt or one read", prev.AttemptCount, next.AttemptCount, prev.ReadCount, next.ReadCount)
}

func canMove(from, to Status) bool {
	for _, s := range edges[from] {
		if s == to {
			return true
		}
	}
	return false
}

// sameIdentity checks the fields that no transition changes.
func sameIdentity(prev, next *Record) error {
	type fixed struct {
		DLQID, Source, SourceARN, DLQARN, IdempotencyKey string
		KeyOrigin                                        KeyOrigin
		BodyEncoding                                     Encoding
		BodySHA256                                       string
		BodySize, SentTimestamp                          int64
		ReceiveCount                                     int
		TraceHeader, MessageGroupID, SequenceNumber      string
		FirstSeen                                        string
		Predecessor                                      *RecordLink
	}
	of := func(r *Record) fixed {
		return fixed{r.DLQID, r.Source, r.SourceARN, r.DLQARN, r.IdempotencyKey, r.KeyOrigin, r.BodyEncoding, r.BodySHA256,
			r.BodySize, r.SentTimestamp, r.ReceiveCount, r.TraceHeader, r.MessageGroupID, r.SequenceNumber, r.FirstSeen.String(), r.Predecessor}
	}
	a, b := of(prev), of(next)
	if !reflect.DeepEqual(a, b) {
		av, bv := reflect.ValueOf(a), reflect.ValueOf(b)
		for i := range av.NumField() {
			if !reflect.DeepEqual(av.Field(i).Interface(), bv.Field(i).Interface()) {
				return fmt.Errorf("%s changed (no transition changes it)", av.Type().Field(i).Name)
			}
		}
	}
	return nil
}

// checkRead checks a payload read (NotePayloadRead): the read appended to
// the bounded list, nothing else changed.
func checkRead(prev, next *Record) error {
	if len(next.Reads) == 0 || len(next.Reads) != min(len(prev.Reads)+1, DefaultMaxReads) ||
		!isSuffix(prev.Reads, next.Reads[:len(next.Reads)-1]) {
		return fmt.Errorf("payload reads are not the previous ones with one appended")
	}
	want := prev.Clone()
	want.Reads, want.ReadCount = next.Reads, next.ReadCount
	want.Version, want.PrevSeal, want.Seal, want.WriteID = next.Version, next.PrevSeal, next.Seal, next.WriteID
	if !sameJSON(want, next) {
		return fmt.Errorf("a payload read changed more than the reads")
	}
	return nil
}

// checkAction checks a transition that appends one attempt.
func checkAction(prev, next *Record) error {
	if len(next.Attempts) == 0 {
		return fmt.Errorf("attempt history is empty")
	}
	last := next.Attempts[len(next.Attempts)-1]
	kept := next.Attempts[:len(next.Attempts)-1]
	if !isSuffix(prev.Attempts, kept) && !(len(kept) > 0 && firstArrival(prev.Attempts) != nil &&
		sameJSON(kept[0], *firstArrival(prev.Attempts)) && isSuffix(prev.Attempts, kept[1:])) {
		return fmt.Errorf("attempt history is not the previous one with one appended (kept entries changed or removed)")
	}
	if fa := firstArrival(prev.Attempts); fa != nil && len(next.Attempts) > 1 {
		if got := firstArrival(next.Attempts); got == nil || !sameJSON(*got, *fa) {
			return fmt.Errorf("attempt history lost its first arrival")
		}
	}
	// The window only shrinks to a bound: the default one, or a smaller
	// one ingest is configured with (arrivals only).
	if !last.IsArrival() && len(next.Attempts) < min(len(prev.Attempts)+1, DefaultMaxAttempts) {
		return fmt.Errorf("attempt history shrank from %d to %d entries", len(prev.Attempts), len(next.Attempts))
	}
	archiving := prev.Status != StatusArchived && next.Status == StatusArchived
	if err := checkCorrections(prev, next, archiving); err != nil {
		return err
	}
	if archiving {
		switch {
		case next.Archive == nil || next.Archive.Seal != prev.Seal:
			return fmt.Errorf("archived without a reference to the archived version")
		case next.Body != "" || next.Attributes != nil || next.BodyRef != nil || next.AttributesRef != nil:
			return fmt.Errorf("an archived stub still holds a payload")
		}
		return nil
	}
	if !sameJSON(prev.Archive, next.Archive) {
		return fmt.Errorf("archive reference changed")
	}
	if prev.Body != next.Body || !sameJSON(prev.BodyRef, next.BodyRef) || !sameJSON(prev.Attributes, next.Attributes) ||
		!sameJSON(prev.AttributesRef, next.AttributesRef) {
		return fmt.Errorf("the original payload or its attributes changed")
	}
	return nil
}

// checkCorrections: corrections are only appended (one at a time, to a
// QUARANTINED record); archiving drops their bodies only.
func checkCorrections(prev, next *Record, archiving bool) error {
	was := prev.Corrections
	if archiving {
		was = append([]Correction(nil), was...)
		for i := range was {
			was[i].Body, was[i].BodyRef = "", nil
		}
	}
	switch len(next.Corrections) {
	case len(was):
		if !sameJSON(was, next.Corrections) {
			return fmt.Errorf("corrections changed")
		}
	case len(was) + 1:
		c := next.Corrections[len(was)]
		if archiving || prev.Status != StatusQuarantined || c.N != len(was)+1 || !isSuffix(was, next.Corrections[:len(was)]) {
			return fmt.Errorf("corrections changed (a correction is appended, numbered, to a QUARANTINED record)")
		}
	default:
		return fmt.Errorf("corrections went from %d to %d", len(prev.Corrections), len(next.Corrections))
	}
	return nil
}

func firstArrival(list []Attempt) *Attempt {
	for i := range list {
		if list[i].IsArrival() {
			return &list[i]
		}
	}
	return nil
}

// isSuffix reports whether tail is the end of list.
func isSuffix[E any](list, tail []E) bool {
	return len(tail) == 0 || len(tail) <= len(list) && sameJSON(list[len(list)-len(tail):], tail)
}

func sameJSON(a, b any) bool {
	ra, ea := json.Marshal(a)
	rb, eb := json.Marshal(b)
	return ea == nil && eb == nil && string(ra) == string(rb)
}

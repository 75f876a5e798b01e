package quarantine

import (
	"bytes"
	"fmt"
	"time"
)

// TimeLayout is fixed-width RFC 3339 in UTC with nanoseconds: its text sorts
// as the instants do, which the status index's sort key and range queries
// rely on (time.RFC3339Nano drops trailing zeros and does not sort).
const TimeLayout = "2006-01-02T15:04:05.000000000Z"

// Time is an instant stored in TimeLayout, in JSON and in DynamoDB alike.
type Time struct{ time.Time }

// At converts t to a Time in UTC.
func At(t time.Time) Time { return Time{t.UTC()} }

// String returns the stored form.
func (t Time) String() string { return t.UTC().Format(TimeLayout) }

// MarshalText implements encoding.TextMarshaler.
func (t Time) MarshalText() ([]byte, error) { return []byte(t.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler; it accepts any RFC 3339 time.
func (t *Time) UnmarshalText(b []byte) error {
	v, err := time.Parse(time.RFC3339Nano, string(b))
	if err != nil {
		return fmt.Errorf("time %q: %w", b, err)
	}
	t.Time = v.UTC()
	return nil
}

// MarshalJSON overrides time.Time's variable-width form.
func (t Time) MarshalJSON() ([]byte, error) { return []byte(`"` + t.String() + `"`), nil }

// UnmarshalJSON reads a JSON string in RFC 3339.
func (t *Time) UnmarshalJSON(b []byte) error {
	if bytes.Equal(b, []byte("null")) {
		return nil
	}
	if len(b) < 2 || b[0] != '"' || b[len(b)-1] != '"' {
		return fmt.Errorf("time %s: not a JSON string", b)
	}
	return t.UnmarshalText(b[1 : len(b)-1])
}

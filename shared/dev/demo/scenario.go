// Package demo plays the demo scenario on the embedded stack: a seeded
// stream of controlled-substance inventory events through a source queue
// whose consumer rejects malformed events, dead-letters recalled lots on
// purpose and suffers a transient outage. The real ingest handler, fed by
// the local runner, quarantines what the redrive policy dead-letters. The
// scenario then checks the invariants and reports.
package demo

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
)

// Event is one inventory movement as the producer sends it.
type Event struct {
	EventID       string `json:"event_id,omitempty"`
	NDC           string `json:"ndc,omitempty"`
	Lot           string `json:"lot,omitempty"`
	QuantityDelta int    `json:"quantity_delta"`
	Schedule      string `json:"schedule,omitempty"`
	Facility      string `json:"facility,omitempty"`
	OccurredAt    string `json:"occurred_at,omitempty"`
}

// Kind says how the consumer will treat an event.
type Kind int

// Event kinds.
const (
	Good      Kind = iota // consumed
	Malformed             // rejected until the redrive policy dead-letters it
	Outage                // fails while the downstream outage lasts
	Recalled              // dead-lettered on purpose with failure attributes
)

func (k Kind) String() string {
	return [...]string{"good", "malformed", "outage", "recalled"}[k]
}

// Generated is one produced message and what should become of it.
type Generated struct {
	ID   string // event_id, or "" for bodies without one
	Body string
	Kind Kind
}

// OutageFacility is the facility whose downstream system is down.
const OutageFacility = "FAC-EAST-2"

var (
	facilities = []string{"FAC-WEST-1", "FAC-NORTH-4", OutageFacility, "FAC-SOUTH-3"}
	schedules  = []string{"CII", "CIII", "CIV", "CV"}
	recalled   = "LOT-RECALL-77"
)

// Generate returns n events from a seeded generator, with one facility's
// downstream system down.
func Generate(seed uint64, n int) []Generated { return generate(seed, n, 1) }

// generate returns n events with the downstream systems of outages
// facilities (1 to 4, OutageFacility first) down.
func generate(seed uint64, n, outages int) []Generated { return generateAs("inv", seed, n, outages) }

// generateAs is generate with event ids that start with prefix.
func generateAs(prefix string, seed uint64, n, outages int) []Generated {
	down := map[string]bool{}
	for i := range min(max(outages, 1), len(facilities)) {
		down[facilities[(2+i)%len(facilities)]] = true
	}
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	out := make([]Generated, 0, n)
	for i := range n {
		e := Event{
			EventID:       fmt.Sprintf("%s-%06d", prefix, i),
			NDC:           fmt.Sprintf("%05d-%03d-%02d", r.IntN(99999), r.IntN(999), r.IntN(99)),
			Lot:           fmt.Sprintf("LOT-%04d", r.IntN(5000)),
			QuantityDelta: r.IntN(200) - 100,
			Schedule:      schedules[r.IntN(len(schedules))],
			Facility:      facilities[r.IntN(len(facilities))],
			OccurredAt:    fmt.Sprintf("2026-11-29T%02d:%02d:%02dZ", r.IntN(24), r.IntN(60), r.IntN(60)),
		}
		if e.QuantityDelta == 0 {
			e.QuantityDelta = 1
		}
		kind := Good
		roll := r.Float64()
		switch {
		case roll < 0.03:
			e.NDC = "NDC?" + e.NDC // fails the NDC pattern
			kind = Malformed
		case roll < 0.05:
			e.Lot = "" // missing lot
			kind = Malformed
		case roll < 0.06:
			e.QuantityDelta = 0
			kind = Malformed
		case roll < 0.07:
			e.Lot = recalled
			kind = Recalled
		}
		if kind == Good && down[e.Facility] {
			kind = Outage
		}
		raw, _ := json.Marshal(e)
		body := string(raw)
		if kind == Malformed && r.IntN(4) == 0 {
			body = "inventory movement " + e.EventID + " (truncated" // not JSON at all
		}
		out = append(out, Generated{ID: e.EventID, Body: body, Kind: kind})
	}
	return out
}

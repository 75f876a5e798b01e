package dlqctl

import (
	"testing"

	"github.com/dlqquarantine/dlqq/shared/domain/policy"
)

// The breaker's reading says its minimum sample: at 9 of 9 come back it
// cannot trip yet, and says so.
func TestBreakerReadingSaysTheMinimumSample(t *testing.T) {
	t.Parallel()
	p := &policy.Policy{MinSample: 10, Threshold: 0.2}
	for _, c := range []struct {
		sent, back int64
		want       string
		judging    bool
	}{
		{9, 9, "cannot trip yet: 9 of 10 minimum sample sent", false},
		{0, 0, "cannot trip yet: 0 of 10 minimum sample sent", false},
		{10, 9, "tripped: over 20% came back", true},
		{10, 1, "judging: trips over 20% came back", true},
	} {
		b := readBreaker(p, p.Judge(c.sent, c.back))
		if got := b.text(p.Threshold); got != c.want || b.Judging != c.judging || b.MinSample != 10 {
			t.Errorf("%d sent, %d came back: %q (judging %v), want %q", c.sent, c.back, got, b.Judging, c.want)
		}
	}
}

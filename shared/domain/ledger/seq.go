package ledger

import (
	"fmt"
	"strings"
)

// SeqWidth is the width PadSeq pads a sequence number to: DynamoDB
// Streams' sequence numbers have 21 to 40 digits.
const SeqWidth = 40

// ValidSeq reports whether seq is a decimal sequence number of at most
// SeqWidth digits.
func ValidSeq(seq string) bool {
	if seq == "" || len(seq) > SeqWidth {
		return false
	}
	for i := 0; i < len(seq); i++ {
		if seq[i] < '0' || seq[i] > '9' {
			return false
		}
	}
	return true
}

// PadSeq returns seq zero-padded to SeqWidth digits, so that padded
// sequence numbers compare as strings the way they compare as numbers.
func PadSeq(seq string) (string, error) {
	if !ValidSeq(seq) {
		return "", fmt.Errorf("sequence number %q is not 1..%d decimal digits", seq, SeqWidth)
	}
	return strings.Repeat("0", SeqWidth-len(seq)) + seq, nil
}

// MustPadSeq is PadSeq for a sequence number already validated.
func mustPadSeq(seq string) string {
	p, err := PadSeq(seq)
	if err != nil {
		return seq
	}
	return p
}

// SeqLess reports whether sequence number a is below b as numbers
// (padded or not). Invalid numbers compare as strings.
func SeqLess(a, b string) bool {
	a, b = strings.TrimLeft(a, "0"), strings.TrimLeft(b, "0")
	if len(a) != len(b) {
		return len(a) < len(b)
	}
	return a < b
}

// SeqCompare is SeqLess as a three-way comparison.
func SeqCompare(a, b string) int {
	switch {
	case SeqLess(a, b):
		return -1
	case SeqLess(b, a):
		return 1
	}
	return 0
}

package s3store

import (
	"errors"
	"fmt"
	"io"
)

// maxPrealloc bounds the buffer readBody sizes from a Content-Length: a
// larger object is read growing as it comes (the answer's header is not
// trusted with more).
const maxPrealloc = 64 << 20

// readBody reads an object's body whole into a buffer of its
// Content-Length (n, when given): io.ReadAll grows its buffer by doubling,
// and a 1 MiB payload would then hold up to 2 MiB until it is freed, for
// each of the payloads a run has in hand (TestPeakMemoryFitsTheTemplate).
// A body longer or shorter than its Content-Length is an error.
func readBody(body io.Reader, n *int64) ([]byte, error) {
	if n == nil || *n < 0 || *n > maxPrealloc {
		return io.ReadAll(body)
	}
	buf := make([]byte, *n)
	if _, err := io.ReadFull(body, buf); err != nil {
		return nil, fmt.Errorf("body shorter than its Content-Length %d: %w", *n, err)
	}
	var one [1]byte
	switch k, err := body.Read(one[:]); {
	case k > 0:
		return nil, fmt.Errorf("body longer than its Content-Length %d", *n)
	case err != nil && !errors.Is(err, io.EOF):
		return nil, err
	}
	return buf, nil
}

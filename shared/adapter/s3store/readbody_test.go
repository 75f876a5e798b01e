package s3store

import (
	"bytes"
	"strings"
	"testing"
	"testing/iotest"
)

// A body is read into a buffer of its Content-Length, exactly: one
// shorter or longer than it says is an error; without one, or one too
// large to trust, it is read as it comes.
func TestReadBodyTakesItsContentLength(t *testing.T) {
	n := func(v int64) *int64 { return &v }
	body := bytes.Repeat([]byte("x"), 3000)
	got, err := readBody(iotest.OneByteReader(bytes.NewReader(body)), n(3000))
	if err != nil || !bytes.Equal(got, body) || cap(got) != 3000 {
		t.Fatalf("read %d bytes (capacity %d): %v", len(got), cap(got), err)
	}
	for _, c := range []struct {
		length int64
		want   string
	}{{2999, "longer"}, {3001, "shorter"}} {
		if _, err := readBody(bytes.NewReader(body), n(c.length)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Content-Length %d: %v, want %q", c.length, err, c.want)
		}
	}
	for _, length := range []*int64{nil, n(-1), n(maxPrealloc + 1)} {
		if got, err := readBody(bytes.NewReader(body), length); err != nil || !bytes.Equal(got, body) {
			t.Errorf("Content-Length %v: %d bytes, %v", length, len(got), err)
		}
	}
}

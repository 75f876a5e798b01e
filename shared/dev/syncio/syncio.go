// Package syncio holds the writers that concurrent invocations share in the
// development kit: their log and metric lines go through one writer, and a
// test reads what a process printed while it still runs.
package syncio

import (
	"bytes"
	"io"
	"sync"
)

// Writer serializes writes to the writer it wraps.
type Writer struct {
	mu sync.Mutex
	w  io.Writer
}

// NewWriter returns a Writer on w.
func NewWriter(w io.Writer) *Writer { return &Writer{w: w} }

func (s *Writer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

// Buffer is a bytes.Buffer that may be written and read concurrently.
type Buffer struct {
	Writer
	buf bytes.Buffer
}

// NewBuffer returns an empty Buffer.
func NewBuffer() *Buffer {
	b := &Buffer{}
	b.w = &b.buf
	return b
}

// String is what was written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

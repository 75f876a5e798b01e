package ledger

import (
	"errors"
	"slices"
	"strings"
	"sync"

	dl "github.com/dlqquarantine/dlqq/shared/domain/ledger"
)

// provenCacheSize bounds the chain nodes a Service remembers as proven.
const provenCacheSize = 4096

// provenNode is a segment this process proved to be on its shard's chain
// (a walk that passed, or a segment it wrote or adopted after a proven
// tip): its hash, its place in the chain (count: 1 for the first) and the
// chain's last seq up to it (padded).
type provenNode struct {
	sha     string
	count   int64
	lastSeq string
	prev    dl.Ref // the zero Ref: the shard's first segment
}

// provenCache holds the proven nodes by segment key (segments are
// immutable: a node proven once stays proven); a walk stops at the first
// one it meets (walkChain).
type provenCache struct {
	mu    sync.Mutex
	nodes map[string]provenNode
	order []string
}

func (s *Service) markProven(key string, n provenNode) {
	c := &s.proven
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.nodes == nil {
		c.nodes = map[string]provenNode{}
	}
	if _, ok := c.nodes[key]; ok {
		return
	}
	c.nodes[key] = n
	c.order = append(c.order, key)
	if len(c.order) > provenCacheSize {
		delete(c.nodes, c.order[0])
		c.order = c.order[1:]
	}
}

// provenAt reports whether key with hash sha is a proven node.
func (s *Service) provenAt(key, sha string) (provenNode, bool) {
	s.proven.mu.Lock()
	defer s.proven.mu.Unlock()
	n, ok := s.proven.nodes[key]
	return n, ok && n.sha == sha
}

// provenOf returns the proven nodes of shard.
func (s *Service) provenOf(shard string) map[string]provenNode {
	prefix := dl.SegmentPrefix + shard + "/"
	s.proven.mu.Lock()
	defer s.proven.mu.Unlock()
	out := map[string]provenNode{}
	for k, n := range s.proven.nodes {
		if strings.HasPrefix(k, prefix) {
			out[k] = n
		}
	}
	return out
}

// forgetProven drops the proven nodes of shard (a fork was found).
func (s *Service) forgetProven(shard string) {
	prefix := dl.SegmentPrefix + shard + "/"
	s.proven.mu.Lock()
	defer s.proven.mu.Unlock()
	for k := range s.proven.nodes {
		if strings.HasPrefix(k, prefix) {
			delete(s.proven.nodes, k)
		}
	}
	s.proven.order = slices.DeleteFunc(s.proven.order, func(k string) bool { return strings.HasPrefix(k, prefix) })
}

// markHeadProven marks a head's segment, which follows prev, proven.
func (s *Service) markHeadProven(h Head, prev *dl.Ref) {
	if h.SegmentKey == "" {
		return
	}
	n := provenNode{sha: h.SegmentSHA256, count: h.Segments, lastSeq: h.LastSeq}
	if prev != nil {
		n.prev = *prev
	}
	s.markProven(h.SegmentKey, n)
}

// readError is a failure to read the bucket (a 503 SlowDown, a timeout):
// it proves nothing about a head, so it fails the batch or the run (both
// retried) and never makes a head unproven or rebuilt.
type readError struct{ err error }

func (e readError) Error() string { return e.err.Error() }
func (e readError) Unwrap() error { return e.err }

// asRead wraps a bucket error that is not dl.ErrNotFound as a readError.
func asRead(err error) error {
	if err == nil || errors.Is(err, dl.ErrNotFound) {
		return err
	}
	var re readError
	if errors.As(err, &re) {
		return err
	}
	return readError{err}
}

func isRead(err error) bool {
	var re readError
	return errors.As(err, &re)
}

// maxStored caps a table-supplied string recorded in a digest or a log.
const maxStored = 512

// capped returns v cut to maxStored bytes, marked when cut.
func capped(v string) string {
	if len(v) <= maxStored {
		return v
	}
	return v[:maxStored] + "…(truncated)"
}

package quarantine

import "context"

// Announcer is a Store that proves its writes (dynamostore.Store with a
// writer key): Announce proves, with one MAC, the versions a batch is
// about to write, so that each write does not cost a KMS call of its own.
// A version announced and not written costs nothing more; one written
// without being announced is proved on its own.
type Announcer interface {
	Announce(ctx context.Context, recs []*Record) error
}

// Announce announces recs to s when s is an Announcer. A failure is
// returned for the caller to log, never to stop on: each write then
// proves itself.
func Announce(ctx context.Context, s Store, recs []*Record) error {
	if a, ok := s.(Announcer); ok && len(recs) > 0 {
		return a.Announce(ctx, recs)
	}
	return nil
}

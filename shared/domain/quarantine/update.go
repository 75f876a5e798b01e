package quarantine

import (
	"context"
	"errors"
	"time"
)

// UpdateTries bounds the tries of one Update: a record that changes under
// it this many times in a row is left to the caller (ErrVersionConflict).
// (Redrive marks a sent record through it: a mark that gives up leaves the
// record to its lease, so the bound is generous.)
const UpdateTries = 12

// Update backoff: the first pause is at most updateFirstPause, doubling
// up to updateMostPause (Backoff adds the jitter).
const (
	updateFirstPause = 2 * time.Millisecond
	updateMostPause  = 100 * time.Millisecond
)

// Replacer is the part of a Store that Update needs.
type Replacer interface {
	Get(ctx context.Context, id string) (*Record, error)
	Replace(ctx context.Context, prev, next *Record) error
}

// Update implements Store.Update over s's Get and Replace, for every
// adapter. It reads id with a strongly consistent read, lets fn compute
// the next version from it and replaces the record conditionally on the
// version read. When another writer got there first (ErrVersionConflict)
// it reads the record again and calls fn again with it, up to UpdateTries
// reads with a jittered Backoff between them, then returns
// ErrVersionConflict. fn returning (nil, nil) makes no write: Update
// returns the record read. fn's errors, ErrNotFound and ErrHeld (and any
// other store error) end it at once, unretried. It returns the version
// stored.
//
// fn may run more than once, so it must have no side effect a second run
// would repeat (a message sent, an object written): compute, do not act.
// A wrapper of a Store that changes Replace must implement Update with
// this function over itself, or its Replace is bypassed.
func Update(ctx context.Context, s Replacer, id string, fn func(cur *Record) (*Record, error)) (*Record, error) {
	return update(ctx, s, id, nil, fn)
}

// UpdateFrom is Update starting from cur, a version of the record the
// caller already holds (read, or just written by it): the first try makes
// no read, and a conflict reads the record again as Update does. A caller
// that writes a record it has just written saves a read per write.
func UpdateFrom(ctx context.Context, s Replacer, cur *Record, fn func(cur *Record) (*Record, error)) (*Record, error) {
	return update(ctx, s, cur.DLQID, cur, fn)
}

func update(ctx context.Context, s Replacer, id string, cur *Record, fn func(cur *Record) (*Record, error)) (*Record, error) {
	var tried *Record // the version the last try wrote, if it was refused
	for attempt := 0; ; attempt++ {
		if cur == nil {
			var err error
			if cur, err = s.Get(ctx, id); err != nil {
				return nil, err
			}
			if SameVersion(cur, tried) {
				// The refused write was applied after all (its answer and
				// the store's own read-back were both lost): done, and
				// fn must not apply its change a second time.
				return tried, nil
			}
		}
		next, err := fn(cur)
		if err != nil {
			return nil, err
		}
		if next == nil {
			return cur, nil
		}
		err = s.Replace(ctx, cur, next)
		if err == nil {
			return next, nil
		}
		if !errors.Is(err, ErrVersionConflict) || attempt+1 >= UpdateTries {
			return nil, err
		}
		tried = next
		if err := Backoff(ctx, attempt, updateFirstPause, updateMostPause); err != nil {
			return nil, err
		}
		cur = nil // another writer got there first: read what it wrote
	}
}

package ledger

import (
	"context"
	"fmt"

	dl "github.com/dlqquarantine/dlqq/shared/domain/ledger"
)

// adoptable refuses to adopt an object the ledger did not see itself
// write unless its key holds exactly one version and no delete marker
// newer than it (an older one, a delete of the key before it was
// written, hides nothing; dlqctl verify still names it):
// on a versioned bucket a second version or a marker over a locked key
// hides the bytes that were there first (GET and LIST show only the
// newest), so what a GET returns is not necessarily what was written
// first under the key.
func (s *Service) adoptable(ctx context.Context, key string) error {
	n, markers, err := s.Objects.Versions(ctx, key)
	if err != nil {
		return fmt.Errorf("versions of %s: %w", key, err)
	}
	if n != 1 || markers != 0 {
		return fmt.Errorf("%w: %s has %d versions and %d delete markers in the bucket (only a key with one version and no marker after it is adopted): not adopted", dl.ErrChainBroken, key, n, markers)
	}
	return nil
}

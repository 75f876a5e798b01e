package wire_test

import (
	"strings"
	"testing"
)

// The domain is pure: no AWS SDK, and nothing of the outer layers (use
// cases, adapters, wiring, the development folder).
func TestDomainImportsNoSDKAndNoOuterLayer(t *testing.T) {
	t.Parallel()
	for _, p := range goList(t, "-deps", "./shared/domain/...") {
		for _, outer := range []string{"github.com/aws/", module + "/shared/usecase/", module + "/shared/adapter/", module + "/shared/wire", module + "/shared/dev/"} {
			if strings.HasPrefix(p, outer) {
				t.Errorf("the domain links %s", p)
			}
		}
	}
}

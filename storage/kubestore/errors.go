package kubestore

import (
	"fmt"

	"github.com/itemops/itemops/operations"
)

// corrupt returns an error wrapping operations.ErrCorrupt that names the object of
// resource (itemopsruns, itemopschunks) called name in namespace ns and says what is
// wrong with it.
func corrupt(resource, ns, name, format string, args ...any) error {
	return fmt.Errorf("kubestore: %s %s/%s: %s: %w", resource, ns, name, fmt.Sprintf(format, args...), operations.ErrCorrupt)
}

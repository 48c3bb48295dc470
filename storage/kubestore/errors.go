package kubestore

import (
	"fmt"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/storage/kv"
)

// corrupt returns an error wrapping operations.ErrCorrupt that names the object of
// resource (itemopsruns, itemopschunks) called name in namespace ns and says what is
// wrong with it.
func corrupt(resource, ns, name, format string, args ...any) error {
	return fmt.Errorf("kubestore: %s %s/%s: %s: %w", resource, ns, name, fmt.Sprintf(format, args...), operations.ErrCorrupt)
}

// ErrClosed is returned by the claims of a [Store] after [Store.Close], and by every
// method of the zero Store. It is kv.ErrClosed, which the engine returns for a Store
// without one.
var ErrClosed = kv.ErrClosed

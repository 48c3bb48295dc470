package kubestore

import (
	"errors"
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

// ErrForeignCRD is returned by [InstallCRDs] when the API server holds a
// CustomResourceDefinition of the name of one of the store's resources whose spec is not
// the one in [CRDs]: installed by hand, or by another version of this module.
var ErrForeignCRD = errors.New("a CustomResourceDefinition of the store's name is not the module's")

// ErrReadOnly is returned, wrapped, by every write of a [Store] opened with
// [Options.ReadOnly], before it sends any request that writes: the commits of
// operations.Store (CreateRun, PutOperations, UpdateRun, DeleteRun, CommitPass, ...),
// which fail where they would write, after the reads they plan on, and [Store.Sweep]
// and the claims ([Store.ClaimRun], [Store.KeepClaims], [Store.TakeOverClaims]), which
// fail before any request.
var ErrReadOnly = errors.New("store is opened read-only")

// readOnlyError returns the error of a write, called what, of a read-only Store of
// namespace ns: it wraps ErrReadOnly.
func readOnlyError(what, ns string) error {
	return fmt.Errorf("kubestore: %s in namespace %s: %w", what, ns, ErrReadOnly)
}

// ErrClosed is returned by the claims of a [Store] after [Store.Close], and by every
// method of the zero Store. It is kv.ErrClosed, which the engine returns for a Store
// without one.
var ErrClosed = kv.ErrClosed

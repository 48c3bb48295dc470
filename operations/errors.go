package operations

import (
	"errors"
	"fmt"
)

// ErrNotFound is returned when no run or operation has the requested owner or ID.
var ErrNotFound = errors.New("not found")

// ErrExists is returned when a run is created for an owner that already has one.
var ErrExists = errors.New("already exists")

// ErrConflict is returned when a write contradicts what is stored: an update that changes
// a run's owner or profile, a batch that moves a finished operation back to a running
// phase, or an atomic update that lost to concurrent writers more times than the store
// retries.
var ErrConflict = errors.New("conflicting write")

// ErrUIDMismatch is returned when a call names an owner whose UID is set and differs from
// the UID of the run stored under that kind and name: the object was deleted and created
// again, and the stored run belongs to the old one. It wraps [ErrConflict]. A controller
// that sees it deletes the stale run (or gives the new object another name) and starts
// again; an owner with an empty UID matches any stored run.
var ErrUIDMismatch = fmt.Errorf("owner UID differs from the stored run's: %w", ErrConflict)

// ErrRunEnded is returned when a cancel is requested for a run that has already reached a
// terminal phase: there is nothing left to cancel.
var ErrRunEnded = errors.New("run has ended")

// ErrInvalid is returned when a record fails validation before anything is written: an
// owner without a name or with an unknown kind, an operation without an ID, an unknown
// operation phase, two operations with one ID in a batch, or an operation whose owner is
// not the batch's. The codec of package operations/opsfile returns it too, for records
// it cannot write and for well-formed records it refuses to read (an unknown phase, a
// restore record in a backup file).
var ErrInvalid = errors.New("invalid record")

// ErrCorrupt is returned by a [Store] when what it holds cannot be read back: a record or
// index entry that does not decode or contradicts another, or a damaged file. The call
// that meets it writes nothing. Stores wrap it with what they found and where, and may
// define sentinels of their own that wrap it.
var ErrCorrupt = errors.New("corrupt store")

// ErrAsyncOperationsNotSupported is returned by a plugin's Progress when the plugin does
// not run asynchronous operations for the item, as Velero's AsyncOperationsNotSupportedError.
// [AsyncOperationsNotSupported] builds one that names the plugin and the operation.
var ErrAsyncOperationsNotSupported = errors.New("asynchronous operations not supported")

// ErrInvalidOperationID is returned by a plugin's Progress or Cancel when it should handle
// the operation but does not know its ID, as Velero's InvalidOperationIDError.
// [InvalidOperationID] builds one that names the operation.
var ErrInvalidOperationID = errors.New("invalid operation ID")

// ErrRetry marks a plugin's Progress error as transient: the plugin cannot answer now but
// expects to later (its backend restarts, a rate limit holds it back). Return it, wrap
// it, or wrap an error with [Retryable]; the client of a plugin that runs in another
// process marks so the transport errors it knows to be transient (integrations/velero
// marks gRPC's Unavailable). A Monitor with a retry policy (package
// operations/monitor, WithRetryPolicy) asks the plugin again later, after a backoff,
// rather than failing the operation; without one, the operation fails with the error's
// text, as Velero fails it. An error that also wraps [ErrInvalidOperationID] or
// [ErrAsyncOperationsNotSupported] is never retried: it cannot heal.
var ErrRetry = errors.New("transient: poll again later")

// Retryable returns an error with err's text that wraps both err and [ErrRetry], so
// that [errors.Is] and [errors.As] see both; it returns nil when err is nil. A plugin
// returns it from Progress to have the Monitor ask again later (see ErrRetry).
func Retryable(err error) error {
	if err == nil {
		return nil
	}
	return &retryable{err}
}

// retryable is the error Retryable returns.
type retryable struct{ err error }

func (e *retryable) Error() string   { return e.err.Error() }
func (e *retryable) Unwrap() []error { return []error{e.err, ErrRetry} }

// An OperationError is a plugin's error about one operation. Err is
// [ErrAsyncOperationsNotSupported] or [ErrInvalidOperationID], so [errors.Is] sees through it.
type OperationError struct {
	Action      string // the plugin's name; may be empty
	OperationID string
	Err         error
}

// Error describes the operation and what went wrong.
func (e *OperationError) Error() string {
	if e.Action == "" {
		return fmt.Sprintf("operation %q: %v", e.OperationID, e.Err)
	}
	return fmt.Sprintf("%s: operation %q: %v", e.Action, e.OperationID, e.Err)
}

// Unwrap returns the sentinel the error carries.
func (e *OperationError) Unwrap() error { return e.Err }

// AsyncOperationsNotSupported returns an [*OperationError] wrapping
// [ErrAsyncOperationsNotSupported] for plugin action and operation id.
func AsyncOperationsNotSupported(action, id string) error {
	return &OperationError{Action: action, OperationID: id, Err: ErrAsyncOperationsNotSupported}
}

// InvalidOperationID returns an [*OperationError] wrapping [ErrInvalidOperationID] for
// plugin action and operation id.
func InvalidOperationID(action, id string) error {
	return &OperationError{Action: action, OperationID: id, Err: ErrInvalidOperationID}
}

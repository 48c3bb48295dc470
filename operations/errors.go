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

// ErrInvalid is returned when a record fails validation before anything is written: an
// owner without a name or with an unknown kind, an operation without an ID, an unknown
// operation phase, two operations with one ID in a batch, or an operation whose owner is
// not the batch's.
var ErrInvalid = errors.New("invalid record")

// ErrAsyncOperationsNotSupported is returned by a plugin's Progress when the plugin does
// not run asynchronous operations for the item, as Velero's AsyncOperationsNotSupportedError.
// [AsyncOperationsNotSupported] builds one that names the plugin and the operation.
var ErrAsyncOperationsNotSupported = errors.New("asynchronous operations not supported")

// ErrInvalidOperationID is returned by a plugin's Progress or Cancel when it should handle
// the operation but does not know its ID, as Velero's InvalidOperationIDError.
// [InvalidOperationID] builds one that names the operation.
var ErrInvalidOperationID = errors.New("invalid operation ID")

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

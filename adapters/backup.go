package adapters

import (
	"context"

	"k8s.io/apimachinery/pkg/runtime"

	"github.com/itemops/itemops/operations"
)

// A BackupItemAction acts on items as they are backed up and may start a long-running
// operation for one (a data mover uploading a volume's contents, a snapshot being made
// durable), which the [github.com/itemops/itemops/operations/monitor.Monitor] then
// follows through Progress. It is the v2 interface of Velero's "Plugin Progress
// Monitoring" design; B is the type of the backup object the host passes along (a Velero
// fork's *Backup, an operator's own resource).
//
// Every method but Name may call into a plugin process and takes a context: a plugin
// should return ctx.Err() soon after ctx ends. Implementations must be safe for
// concurrent use.
type BackupItemAction[B any] interface {
	// Name returns the name the action is registered under, recorded as the Action of
	// the operations it starts. It is never empty.
	Name() string

	// AppliesTo returns the selector of the items the action acts on.
	AppliesTo(ctx context.Context) (ResourceSelector, error)

	// Execute acts on item, which belongs to backup, and returns the item to back up (the
	// same or changed), the additional items to back up now, and, when it started a
	// long-running operation, the operation's ID (unique within the backup) and the items
	// to back up again once the operation ends (because the operation changes them).
	// postOperationItems is ignored when operationID is empty. An error means the item
	// could not be handled; the other results are then ignored.
	Execute(ctx context.Context, item runtime.Unstructured, backup B) (updated runtime.Unstructured, additionalItems []operations.ResourceIdentifier, operationID string, postOperationItems []operations.ResourceIdentifier, err error)

	// Progress reports how the operation operationID of backup is doing. It returns an
	// error wrapping [operations.ErrInvalidOperationID] when the action does not know
	// the ID, one wrapping [operations.ErrAsyncOperationsNotSupported] when the action
	// runs no operations, and other errors when it cannot tell; an operation that failed
	// is reported with Progress.Completed set and Progress.Err saying why. Once an
	// operation has ended, Progress keeps reporting it ended.
	Progress(ctx context.Context, operationID string, backup B) (operations.Progress, error)

	// Cancel asks the action to stop operation operationID of backup. It has no effect
	// on an operation that has ended, and returns nil whether or not the operation could
	// be stopped; an error means something unexpected happened.
	Cancel(ctx context.Context, operationID string, backup B) error
}

// A BackupItemActionV1 is a backup item action of the first plugin API: it acts on items
// synchronously and starts no operations. Serve it to v2 callers with
// [BackupItemActionFromV1]. Its methods take no context, as in Velero's v1 API.
type BackupItemActionV1[B any] interface {
	// AppliesTo returns the selector of the items the action acts on.
	AppliesTo() (ResourceSelector, error)

	// Execute acts on item, which belongs to backup, and returns the item to back up (the
	// same or changed) and the additional items to back up now.
	Execute(item runtime.Unstructured, backup B) (updated runtime.Unstructured, additionalItems []operations.ResourceIdentifier, err error)
}

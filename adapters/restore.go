package adapters

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/runtime"

	"github.com/itemops/itemops/operations"
)

// A RestoreItemAction acts on items as they are restored, may start a long-running
// operation for one, and may ask the host to wait until the additional items it returned
// are ready before the item itself is restored. It is the v2 interface of Velero's
// "RestoreItemAction v2" design; R is the type of the restore object the host passes
// along.
//
// Every method but Name may call into a plugin process and takes a context: a plugin
// should return ctx.Err() soon after ctx ends. Implementations must be safe for
// concurrent use.
type RestoreItemAction[R any] interface {
	// Name returns the name the action is registered under, recorded as the Action of
	// the operations it starts. It is never empty.
	Name() string

	// AppliesTo returns the selector of the items the action acts on.
	AppliesTo(ctx context.Context) (ResourceSelector, error)

	// Execute acts on the item in, and says what to restore: see
	// [RestoreItemActionOutput]. An error means the item could not be handled; the
	// output is then ignored.
	Execute(ctx context.Context, in RestoreItemActionInput[R]) (RestoreItemActionOutput, error)

	// Progress reports how the operation operationID of restore is doing, with the
	// errors of [BackupItemAction.Progress].
	Progress(ctx context.Context, operationID string, restore R) (operations.Progress, error)

	// Cancel asks the action to stop operation operationID of restore, as
	// [BackupItemAction.Cancel] does.
	Cancel(ctx context.Context, operationID string, restore R) error

	// AreAdditionalItemsReady reports whether the additional items an Execute returned
	// (those that were restored) are ready for the item to be restored. The host asks
	// it only when Execute set WaitForAdditionalItems; see [WaitForAdditionalItems]. An
	// error stops the wait.
	AreAdditionalItemsReady(ctx context.Context, additionalItems []operations.ResourceIdentifier, restore R) (bool, error)
}

// A RestoreItemActionV1 is a restore item action of the first plugin API: it acts on
// items synchronously, starts no operations and never asks to wait. Serve it to v2
// callers with [RestoreItemActionFromV1]. Its methods take no context, as in Velero's v1
// API.
type RestoreItemActionV1[R any] interface {
	// AppliesTo returns the selector of the items the action acts on.
	AppliesTo() (ResourceSelector, error)

	// Execute acts on the item in, and says what to restore.
	Execute(in RestoreItemActionInput[R]) (RestoreItemActionOutputV1, error)
}

// RestoreItemActionInput is what a restore item action's Execute acts on, with the
// fields of Velero's RestoreItemActionExecuteInput. v1 and v2 actions take the same
// input.
type RestoreItemActionInput[R any] struct {
	// Item is the item being restored, as earlier actions and the host left it.
	Item runtime.Unstructured
	// ItemFromBackup is the item as the backup holds it, unchanged.
	ItemFromBackup runtime.Unstructured
	// Restore is the restore the item belongs to.
	Restore R
}

// RestoreItemActionOutput is what a v2 restore item action's Execute returns, with the
// fields of Velero's RestoreItemActionExecuteOutput. Its zero value restores nothing
// changed: set UpdatedItem.
type RestoreItemActionOutput struct {
	// UpdatedItem is the item to restore, the input's Item or a changed copy.
	UpdatedItem runtime.Unstructured
	// AdditionalItems are items to restore before this one.
	AdditionalItems []operations.ResourceIdentifier
	// SkipRestore asks the host not to restore the item nor run further actions on it;
	// AdditionalItems are then ignored.
	SkipRestore bool
	// OperationID, when not empty, identifies the long-running operation Execute started
	// (unique within the restore); the restore is not complete until it ends.
	OperationID string
	// WaitForAdditionalItems asks the host to restore AdditionalItems, then wait until
	// AreAdditionalItemsReady reports them ready (or AdditionalItemsReadyTimeout
	// passes) before restoring this item. When false AreAdditionalItemsReady is not
	// called.
	WaitForAdditionalItems bool
	// AdditionalItemsReadyTimeout bounds that wait; zero means the host's default
	// ([DefaultAdditionalItemsReadyTimeout] with [WaitForAdditionalItems]).
	AdditionalItemsReadyTimeout time.Duration
}

// RestoreItemActionOutputV1 is what a v1 restore item action's Execute returns: the
// fields of [RestoreItemActionOutput] the v1 API has.
type RestoreItemActionOutputV1 struct {
	// UpdatedItem is the item to restore, the input's Item or a changed copy.
	UpdatedItem runtime.Unstructured
	// AdditionalItems are items to restore before this one.
	AdditionalItems []operations.ResourceIdentifier
	// SkipRestore asks the host not to restore the item nor run further actions on it;
	// AdditionalItems are then ignored.
	SkipRestore bool
}

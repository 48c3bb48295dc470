package adapters

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"

	"github.com/itemops/itemops/operations"
)

// BackupItemActionFromV1 returns a [BackupItemAction] that serves v2 callers with the v1
// action a, registered under name:
//
//   - Name returns name;
//   - AppliesTo and Execute call a; Execute returns an empty operation ID and no
//     post-operation items;
//   - Progress returns an error wrapping [operations.ErrAsyncOperationsNotSupported]
//     that names the action and the operation, since a v1 action starts none;
//   - Cancel does nothing and returns nil.
//
// Every method but Name first returns ctx.Err() if ctx is done, without calling a; a call
// in progress is not interrupted, as a has no context. A nil a makes every method but Name
// return an error wrapping [ErrInvalidPlugin]. The result is safe for concurrent use if a
// is. A panic in a is not recovered.
func BackupItemActionFromV1[B any](name string, a BackupItemActionV1[B]) BackupItemAction[B] {
	return backupFromV1[B]{name: name, v1: a}
}

type backupFromV1[B any] struct {
	name string
	v1   BackupItemActionV1[B]
}

var _ BackupItemAction[struct{}] = backupFromV1[struct{}]{}

func (f backupFromV1[B]) adaptedFromV1() {}

func (f backupFromV1[B]) Name() string { return f.name }

func (f backupFromV1[B]) AppliesTo(ctx context.Context) (ResourceSelector, error) {
	if err := check(ctx, f.v1 == nil, f.name); err != nil {
		return ResourceSelector{}, err
	}
	return f.v1.AppliesTo()
}

func (f backupFromV1[B]) Execute(ctx context.Context, item runtime.Unstructured, backup B) (runtime.Unstructured, []operations.ResourceIdentifier, string, []operations.ResourceIdentifier, error) {
	if err := check(ctx, f.v1 == nil, f.name); err != nil {
		return nil, nil, "", nil, err
	}
	updated, additional, err := f.v1.Execute(item, backup)
	return updated, additional, "", nil, err
}

func (f backupFromV1[B]) Progress(ctx context.Context, operationID string, _ B) (operations.Progress, error) {
	if err := check(ctx, f.v1 == nil, f.name); err != nil {
		return operations.Progress{}, err
	}
	return operations.Progress{}, operations.AsyncOperationsNotSupported(f.name, operationID)
}

func (f backupFromV1[B]) Cancel(ctx context.Context, _ string, _ B) error {
	return check(ctx, f.v1 == nil, f.name)
}

// RestoreItemActionFromV1 returns a [RestoreItemAction] that serves v2 callers with the
// v1 action a, registered under name:
//
//   - Name returns name;
//   - AppliesTo and Execute call a; Execute's output carries a's UpdatedItem,
//     AdditionalItems and SkipRestore, with an empty OperationID and
//     WaitForAdditionalItems false;
//   - Progress returns an error wrapping [operations.ErrAsyncOperationsNotSupported]
//     that names the action and the operation;
//   - Cancel does nothing and returns nil;
//   - AreAdditionalItemsReady returns true.
//
// Contexts, a nil a, concurrency and panics are as for [BackupItemActionFromV1].
func RestoreItemActionFromV1[R any](name string, a RestoreItemActionV1[R]) RestoreItemAction[R] {
	return restoreFromV1[R]{name: name, v1: a}
}

type restoreFromV1[R any] struct {
	name string
	v1   RestoreItemActionV1[R]
}

var _ RestoreItemAction[struct{}] = restoreFromV1[struct{}]{}

func (f restoreFromV1[R]) adaptedFromV1() {}

func (f restoreFromV1[R]) Name() string { return f.name }

func (f restoreFromV1[R]) AppliesTo(ctx context.Context) (ResourceSelector, error) {
	if err := check(ctx, f.v1 == nil, f.name); err != nil {
		return ResourceSelector{}, err
	}
	return f.v1.AppliesTo()
}

func (f restoreFromV1[R]) Execute(ctx context.Context, in RestoreItemActionInput[R]) (RestoreItemActionOutput, error) {
	if err := check(ctx, f.v1 == nil, f.name); err != nil {
		return RestoreItemActionOutput{}, err
	}
	out, err := f.v1.Execute(in)
	return RestoreItemActionOutput{
		UpdatedItem:     out.UpdatedItem,
		AdditionalItems: out.AdditionalItems,
		SkipRestore:     out.SkipRestore,
	}, err
}

func (f restoreFromV1[R]) Progress(ctx context.Context, operationID string, _ R) (operations.Progress, error) {
	if err := check(ctx, f.v1 == nil, f.name); err != nil {
		return operations.Progress{}, err
	}
	return operations.Progress{}, operations.AsyncOperationsNotSupported(f.name, operationID)
}

func (f restoreFromV1[R]) Cancel(ctx context.Context, _ string, _ R) error {
	return check(ctx, f.v1 == nil, f.name)
}

func (f restoreFromV1[R]) AreAdditionalItemsReady(ctx context.Context, _ []operations.ResourceIdentifier, _ R) (bool, error) {
	if err := check(ctx, f.v1 == nil, f.name); err != nil {
		return false, err
	}
	return true, nil
}

// VolumeSnapshotterFromV1 returns a [VolumeSnapshotter] that serves v2 callers with the
// v1 snapshotter s, registered under name:
//
//   - Name returns name;
//   - Init, CreateVolumeFromSnapshot, GetVolumeID, SetVolumeID, GetVolumeInfo,
//     CreateSnapshot and DeleteSnapshot call s;
//   - Progress returns an error wrapping [operations.ErrAsyncOperationsNotSupported]
//     that names the snapshotter and the snapshot: a v1 snapshot is complete when
//     CreateSnapshot returns, so a host should not record it as an operation to wait
//     for ([IsV1] tells such snapshotters apart);
//   - Cancel does nothing and returns nil.
//
// Contexts, a nil s, concurrency and panics are as for [BackupItemActionFromV1].
func VolumeSnapshotterFromV1(name string, s VolumeSnapshotterV1) VolumeSnapshotter {
	return snapshotterFromV1{name: name, v1: s}
}

type snapshotterFromV1 struct {
	name string
	v1   VolumeSnapshotterV1
}

var _ VolumeSnapshotter = snapshotterFromV1{}

func (f snapshotterFromV1) adaptedFromV1() {}

func (f snapshotterFromV1) Name() string { return f.name }

func (f snapshotterFromV1) Init(ctx context.Context, config map[string]string) error {
	if err := check(ctx, f.v1 == nil, f.name); err != nil {
		return err
	}
	return f.v1.Init(config)
}

func (f snapshotterFromV1) CreateVolumeFromSnapshot(ctx context.Context, snapshotID, volumeType, volumeAZ string, iops *int64) (string, error) {
	if err := check(ctx, f.v1 == nil, f.name); err != nil {
		return "", err
	}
	return f.v1.CreateVolumeFromSnapshot(snapshotID, volumeType, volumeAZ, iops)
}

func (f snapshotterFromV1) GetVolumeID(ctx context.Context, pv runtime.Unstructured) (string, error) {
	if err := check(ctx, f.v1 == nil, f.name); err != nil {
		return "", err
	}
	return f.v1.GetVolumeID(pv)
}

func (f snapshotterFromV1) SetVolumeID(ctx context.Context, pv runtime.Unstructured, volumeID string) (runtime.Unstructured, error) {
	if err := check(ctx, f.v1 == nil, f.name); err != nil {
		return nil, err
	}
	return f.v1.SetVolumeID(pv, volumeID)
}

func (f snapshotterFromV1) GetVolumeInfo(ctx context.Context, volumeID, volumeAZ string) (string, *int64, error) {
	if err := check(ctx, f.v1 == nil, f.name); err != nil {
		return "", nil, err
	}
	return f.v1.GetVolumeInfo(volumeID, volumeAZ)
}

func (f snapshotterFromV1) CreateSnapshot(ctx context.Context, volumeID, volumeAZ string, tags map[string]string) (string, error) {
	if err := check(ctx, f.v1 == nil, f.name); err != nil {
		return "", err
	}
	return f.v1.CreateSnapshot(volumeID, volumeAZ, tags)
}

func (f snapshotterFromV1) DeleteSnapshot(ctx context.Context, snapshotID string) error {
	if err := check(ctx, f.v1 == nil, f.name); err != nil {
		return err
	}
	return f.v1.DeleteSnapshot(snapshotID)
}

func (f snapshotterFromV1) Progress(ctx context.Context, snapshotID string) (operations.Progress, error) {
	if err := check(ctx, f.v1 == nil, f.name); err != nil {
		return operations.Progress{}, err
	}
	return operations.Progress{}, operations.AsyncOperationsNotSupported(f.name, snapshotID)
}

func (f snapshotterFromV1) Cancel(ctx context.Context, _ string) error {
	return check(ctx, f.v1 == nil, f.name)
}

// check returns what an adapter method returns before it may call its v1 plugin: an
// error for a missing plugin, ctx.Err() for a done context, else nil.
func check(ctx context.Context, missing bool, name string) error {
	if missing {
		return fmt.Errorf("plugin %q: no v1 implementation: %w", name, ErrInvalidPlugin)
	}
	return ctx.Err()
}

// IsV1 reports whether plugin was made by [BackupItemActionFromV1],
// [RestoreItemActionFromV1] or [VolumeSnapshotterFromV1]: such a plugin never runs
// asynchronous operations, so its Execute never returns an operation ID, and the
// snapshots of such a snapshotter are complete when CreateSnapshot returns.
func IsV1(plugin any) bool {
	_, ok := plugin.(interface{ adaptedFromV1() })
	return ok
}

package adapters

import (
	"context"

	"k8s.io/apimachinery/pkg/runtime"

	"github.com/itemops/itemops/operations"
)

// A VolumeSnapshotter snapshots persistent volumes and makes volumes from snapshots. Its
// snapshots may take a while to become durable (uploaded, copied to stable storage): the
// snapshot ID is then the ID of a long-running operation that Progress reports on. It is
// the v2 interface of Velero's "VolumeSnapshotter v2" design. Snapshots belong to a
// backup, but the interface needs no backup object.
//
// Every method but Name may call into a plugin process and takes a context: a plugin
// should return ctx.Err() soon after ctx ends. Implementations must be safe for
// concurrent use once Init has returned.
type VolumeSnapshotter interface {
	// Name returns the name the snapshotter is registered under, recorded as the Action
	// of its operations. It is never empty.
	Name() string

	// Init prepares the snapshotter with its configuration; it is called once, before
	// any other method but Name.
	Init(ctx context.Context, config map[string]string) error

	// CreateVolumeFromSnapshot makes a volume of the given type, in availability zone
	// volumeAZ, from snapshot snapshotID, with iops provisioned IOPS if not nil, and
	// returns the volume's ID.
	CreateVolumeFromSnapshot(ctx context.Context, snapshotID, volumeType, volumeAZ string, iops *int64) (volumeID string, err error)

	// GetVolumeID returns the provider's ID of the volume of persistent volume pv, or ""
	// when the snapshotter does not handle pv.
	GetVolumeID(ctx context.Context, pv runtime.Unstructured) (string, error)

	// SetVolumeID returns pv changed to refer to volume volumeID.
	SetVolumeID(ctx context.Context, pv runtime.Unstructured, volumeID string) (runtime.Unstructured, error)

	// GetVolumeInfo returns the type of volume volumeID, in zone volumeAZ, and its
	// provisioned IOPS (nil when it has none).
	GetVolumeInfo(ctx context.Context, volumeID, volumeAZ string) (volumeType string, iops *int64, err error)

	// CreateSnapshot snapshots volume volumeID, in zone volumeAZ, tagging the snapshot
	// with tags, and returns the snapshot's ID. The ID is also the ID of the operation
	// that makes the snapshot durable; Progress reports on it.
	CreateSnapshot(ctx context.Context, volumeID, volumeAZ string, tags map[string]string) (snapshotID string, err error)

	// DeleteSnapshot deletes snapshot snapshotID, stopping whatever is still being done
	// with it.
	DeleteSnapshot(ctx context.Context, snapshotID string) error

	// Progress reports how the operation of snapshot snapshotID is doing, with the
	// errors of [BackupItemAction.Progress].
	Progress(ctx context.Context, snapshotID string) (operations.Progress, error)

	// Cancel asks the snapshotter to stop the operation of snapshot snapshotID, as
	// [BackupItemAction.Cancel] does. The snapshot itself is left: DeleteSnapshot
	// removes it.
	Cancel(ctx context.Context, snapshotID string) error
}

// A VolumeSnapshotterV1 is a volume snapshotter of the first plugin API: its snapshots
// are complete when CreateSnapshot returns. Serve it to v2 callers with
// [VolumeSnapshotterFromV1]. Its methods take no context, as in Velero's v1 API; their
// meaning is that of the [VolumeSnapshotter] methods of the same names.
type VolumeSnapshotterV1 interface {
	Init(config map[string]string) error
	CreateVolumeFromSnapshot(snapshotID, volumeType, volumeAZ string, iops *int64) (volumeID string, err error)
	GetVolumeID(pv runtime.Unstructured) (string, error)
	SetVolumeID(pv runtime.Unstructured, volumeID string) (runtime.Unstructured, error)
	GetVolumeInfo(volumeID, volumeAZ string) (volumeType string, iops *int64, err error)
	CreateSnapshot(volumeID, volumeAZ string, tags map[string]string) (snapshotID string, err error)
	DeleteSnapshot(snapshotID string) error
}

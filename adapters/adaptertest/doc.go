// Package adaptertest helps test plugins and the code that hosts them.
//
// # Conformance
//
// [RunBackupItemAction], [RunRestoreItemAction] and [RunVolumeSnapshotter] check a v2
// plugin against the contract the Monitor relies on: its name is set; Progress of an
// unknown operation returns [operations.ErrInvalidOperationID]; an operation, once
// finished, keeps reporting completion the same way; Cancel of a finished operation
// changes nothing. Each runs one subtest per rule on a fresh plugin from the harness's
// New, which also returns the [FinishFunc] that makes an operation end, so the suite
// can see an operation through without waiting. A plugin without operations (an adapted
// v1 plugin) has no FinishFunc; the suite then checks that it starts none and that its
// Progress returns [operations.ErrAsyncOperationsNotSupported]. Each subtest logs first
// how it starts operations (Execute of which item, CreateSnapshot of which volume), so
// a failure shows what the plugin was given; each failure is a sentence that says which
// call returned what.
//
// # Fakes
//
// [DataMover] is a v2 data mover whose operations move data at a steady rate by an
// injected clock (the Clock of package clock/clocktest moves only when told), serving as
// backup item action, restore item action and volume snapshotter. [BackupItemActionV1],
// [RestoreItemActionV1] and [VolumeSnapshotterV1] are v1 plugins with a hook per method
// that count their calls, for testing adapters and hosts.
package adaptertest

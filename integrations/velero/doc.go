// Package velero connects itemops to Velero's own types, plugins and backup storage, so
// that a Velero fork replaces its operations controllers with a
// [github.com/itemops/itemops/operations/monitor.Monitor] without writing the glue (see
// docs/velero-fork.md).
//
// It is a module of its own, github.com/itemops/itemops/integrations/velero, that
// requires github.com/vmware-tanzu/velero (v1.16.0 at least; CI also builds and tests
// it against the newest release), so that the itemops library's module graph never
// sees Velero. Its name clashes with Velero's pkg/plugin/velero: code that uses both
// imports one under another name.
//
// # Conversions
//
// [FromBackupOperation], [ToBackupOperation], [FromRestoreOperation] and
// [ToRestoreOperation] convert Velero's itemoperation records to [operations.Operation]
// and back; [FromStatus], [ToStatus], [FromProgress], [ToProgress],
// [FromResourceIdentifier] and [ToResourceIdentifier] convert their parts. Every field
// survives a round trip, times to the nanosecond and in their zone, with one exception:
// Velero's status holds times as pointers, and a pointer to the zero time comes back
// as nil (Velero writes both as null).
//
// The module's tests hold the codec of package operations/opsfile to Velero's own code: the
// file Velero's item-operations map uploads through its object-store BackupStore is,
// compressed byte for byte, what [opsfile.Encode] writes for the converted records;
// [opsfile.Decode] reads what Velero's encode.ToJSONGzip writes; and Velero's
// BackupStore reads what [Save] uploads. The hand-written copies of Velero's types in
// operations/opsfile/velero_test.go stay, as a second check: the library's module cannot
// import Velero, and they keep the codec's own tests (escapes, limits, large files)
// next to the codec.
//
// # Plugins
//
// A [Resolver] is an [operations.Resolver] over Velero's plugin manager ([Plugins],
// which clientmgmt.Manager satisfies) and a way to fetch the Backup or Restore an
// operation belongs to ([Objects]). Its Trackers call the v2 item action's Progress and
// Cancel and map Velero's AsyncOperationsNotSupportedError and InvalidOperationIDError,
// which Velero's plugins report by their text alone, to
// [operations.ErrAsyncOperationsNotSupported] and [operations.ErrInvalidOperationID]
// (a [*PluginError] that keeps the plugin's text).
//
// # The bucket
//
// [LoadBackup] and [LoadRestore] record a run and its operations, read through a
// Velero persistence.BackupStore ([BackupStore]), in any [operations.Store]: what a
// fork does at start-up for the runs still waiting. [Save] uploads a run's
// itemoperations file through the same BackupStore after a pass.
//
// # Velero's operations-controller cases
//
// The cases of Velero's TestBackupOperationsReconcile and
// TestRestoreOperationsReconcile, and the rules of its getBackupItemOperationProgress
// that those cases do not reach (time-out and Cancel, a reported start, a Progress
// error, a missing plugin), run through LoadBackup or LoadRestore, a Monitor with a
// Resolver over Velero's mocked plugin manager and actions, and Save. Each gives
// Velero's phase, operation phase and error count. These differences are intended:
//
//   - The error an operation records for a failed Progress call is the plugin's text
//     after "progress: " (the Monitor says which call failed; Velero records the text
//     alone), and a failed Cancel after a time-out adds "; " and its error to
//     [github.com/itemops/itemops/operations/monitor.TimedOut] (Velero ignores it).
//   - Velero also appends each error, as "<error>, plugin: <name>", to the backup's or
//     restore's error list; the Monitor counts errors on the run (Run.Errors) and keeps
//     each message on its operation.
//   - An operation without a creation time gets the time of its first poll (Velero
//     would dereference a nil pointer), and reported times are stored in UTC.
//   - Velero uploads the file only after a reconcile that found errors or an end; the
//     Monitor writes every change to the store, and the fork calls Save when it wants
//     the bucket updated (after each pass that changed the run, for instance).
//   - Velero's restore cases are named "... is Completed" and "... is PartiallyFailed"
//     but expect Finalizing and FinalizingPartiallyFailed, as restores finalize since
//     Velero 1.12; LoadRestore gives restores that profile, and the cases expect what
//     Velero's do.
package velero

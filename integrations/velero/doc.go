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
// operation belongs to ([Objects]). Its Trackers call the v2 item action's Progress,
// and Cancel on the action Progress got, and map Velero's
// AsyncOperationsNotSupportedError and InvalidOperationIDError, which Velero's plugins
// report by their text alone, to [operations.ErrAsyncOperationsNotSupported] and
// [operations.ErrInvalidOperationID] (a [*PluginError] that keeps the plugin's text).
//
// # The bucket
//
// [LoadBackup] and [LoadRestore] record a run and its operations, read through a
// Velero persistence.BackupStore ([BackupStore]), in any [operations.Store]; they are
// idempotent (a second call finds the run), and a run whose operations could not be
// written stays New, where no Monitor polls or finalizes it, until a later call writes
// them. [Save] uploads a run's itemoperations file through the same BackupStore.
//
// # The drop-in
//
// [BackupOperations] and [RestoreOperations] are the logic of Velero's backup and
// restore operations controllers: their Reconcile methods do what Velero's do, with an
// in-memory store in place of Velero's item-operations maps and a
// [github.com/itemops/itemops/operations/monitor.Monitor] polling the run at each
// reconcile; UpdateForBackup and UpdateForRestore are what the download-request
// controller calls; [BackupItemOperationProgress] and [RestoreItemOperationProgress] are
// what the main-run controllers call at the end of a backup or restore. The command
// integrations/velero/dropin/apply installs them in a Velero source tree, leaving thin
// shims in its controllers and maps (see docs/velero-fork.md). [Logger] gives the
// Monitor Velero's logrus logger as a *slog.Logger.
//
// The tests in integrations/velero/parity run Velero's own, unpatched controllers and
// these side by side on a waiting backup and restore whose operations complete, fail by
// error, fail by the plugin's report, time out and keep running, with download requests
// in between, and on Velero's early ways out; the bucket's bytes and the objects'
// statuses are the same after every step: phases, error counts, operation totals, when
// the file and the backup's JSON are uploaded, and the operations' error texts; and so
// are the plugin calls of each pass, as multisets. What cannot be
// the same, because Velero's behaviour there is a crash, a hang or a report no plugin
// makes:
//
//   - A Progress or Cancel call that does not return within the Monitor's call timeout
//     (30 seconds) fails its own operation ("progress: no answer within 30s"), and a
//     plugin that panics fails its operation ("progress: plugin panicked: ..."); Velero's
//     reconcile would hang or the panic would reach controller-runtime.
//   - An operation without a creation time gets the time of its first check (Velero
//     would dereference a nil pointer).
//   - A report of negative counts, or of a start or update time outside years 0000 to
//     9999 in UTC, fails the operation ("progress: plugin reported ..."); Velero
//     records the numbers, and records such a time and writes an itemoperations file
//     that it cannot read back. More completed than total is recorded, as Velero
//     records it.
//   - A reported start or update time of the Unix epoch counts as unknown, as the zero
//     time does in Velero; and once a start time is known, a report without one keeps
//     it (Velero writes it as null).
//   - An itemOperationTimeout of zero means the Monitor's default, four hours; Velero
//     would time out every operation at once (its controllers set the default
//     themselves, so a backup or restore never has zero).
//   - An operation list itemops cannot hold (an empty or repeated operation ID, which
//     Velero's item backupper and restorer never record) fails its unfinished
//     operations, with the reason, in the main run, and keeps the reconcile failing
//     with it.
//
// The Monitor checks up to 16 operations of a run at once (monitor.DefaultWorkers),
// where Velero checks them one after another: a plugin's Progress may be called
// concurrently for different operations, as Velero's gRPC plugin clients allow, and the
// calls of a pass come in another order. What is recorded does not depend on the order,
// and the calls of a pass are Velero's as a set: for each unfinished operation, one
// lookup of its action in the plugin manager, Progress on that action, and Cancel on the
// same action when the operation timed out.
//
// The progress of operations between uploads lives in memory, as in Velero: a restart
// of the server loses it, and the next reconcile starts again from the bucket.
//
// # Velero's operations-controller cases
//
// The cases of Velero's TestBackupOperationsReconcile and
// TestRestoreOperationsReconcile, and the rules of its getBackupItemOperationProgress
// that those cases do not reach (time-out and Cancel, a reported start, a Progress
// error, a missing plugin), also run through LoadBackup or LoadRestore, a Monitor with a
// Resolver over Velero's mocked plugin manager and actions, and Save. Each gives
// Velero's phase, operation phase, error text and error count. Velero's restore cases
// are named "... is Completed" and "... is PartiallyFailed" but expect Finalizing and
// FinalizingPartiallyFailed, as restores finalize since Velero 1.12; LoadRestore gives
// restores that profile, and the cases expect what Velero's do.
package velero

// Package operations keeps the records of backups and restores ("runs") and of the
// long-running operations their plugins start, defines the [Store] every backend
// implements, and runs the [Monitor] that polls those operations to their end.
//
// # Records
//
// A [Run] holds one backup's or restore's phase, the profile of its phase machine, its
// counters and its phase history; [Run.SetPhase] is how its phase changes. An [Operation]
// is one plugin operation of a run: the plugin's name, the item, the operation ID, and
// its [Status], which is updated from the [Progress] the plugin reports.
//
// # Storage
//
// A [Store] is context-first and safe for concurrent use. It checks every write with the
// exported validators ([Run.Validate], [ValidateRunUpdate], [ValidateBatch],
// [ValidateOperationUpdate]), so that backends agree on what is refused: a terminal run
// never moves back, a finished operation is never revived, and a batch is written whole
// or not at all.
//
// # Itemoperations files
//
// Velero keeps a backup's or a restore's operations in the object store as a gzip'd JSON
// array, under [BackupOperationsKey] or [RestoreOperationsKey]. [Encode] and [Decode]
// read and write these files whole; [Encoder] and [Decoder] do it one record at a time,
// in memory that does not grow with the number of records.
//
// The encoder writes what Velero writes: the decompressed text is, byte for byte, what
// encoding/json's Encoder writes for Velero's slice of BackupOperation or
// RestoreOperation (an array of {"spec":{…},"status":{…}} objects, then a newline), and
// it is compressed as Velero compresses it, by compress/gzip's writer at its default
// level with no name and no time stamp (so, built with the same Go release, even the
// compressed bytes are Velero's). A backup's spec has the keys backupName, backupUID,
// backupItemAction, resourceIdentifier (with the keys Group, Resource, Namespace and
// Name), operationID and postOperationItems, which is null for a nil list and [] for an
// empty one; a restore's has restoreName, restoreUID, restoreItemAction,
// resourceIdentifier and operationID. The status keys phase, error, nCompleted, nTotal,
// operationUnits, description, created, started and updated are left out when empty;
// times are written in UTC, in RFC 3339 to the second. Strings are escaped as
// encoding/json escapes them by default: <, > and & as \u003c, \u003e and \u0026,
// U+2028 and U+2029 as \u2028 and \u2029, and invalid UTF-8 as \ufffd, which
// therefore does not survive a round trip. That is what encoding/json wrote up to Go
// 1.26, with which Velero v1.16 to v1.18 are built; from Go 1.27 it writes invalid UTF-8
// as the character U+FFFD itself, which decodes to the same string. The codec keeps the
// escape, so its bytes do not depend on the Go it is built with.
//
// The decoder reads Velero's files and anything encoding/json would read into Velero's
// types. Records in the form the encoders write (keys in order, no white space, no
// escapes) are read by a fast path that avoids reflection and shares strings that repeat
// from record to record; any other record goes through encoding/json, with the same
// result. These decisions apply to both:
//
//   - The kind of a record is told by its keys: backup keys (a backup name, UID or
//     plugin, or a postOperationItems list) or restore keys, never both. The kind of the
//     file is that of its first record, unless [ExpectKind] names it, and every record
//     must have it. Unknown keys are ignored, and keys match case-insensitively, as
//     encoding/json matches them.
//   - Each record must pass [Operation.Validate]: an owner name, an operation ID, and
//     one of the four operation phases. Times must be RFC 3339 (or null, for unset) and
//     are returned in UTC with fractions of a second dropped, so that decoding what was
//     encoded gives the same records.
//   - Input is refused beyond a decompressed size ([WithSizeLimit], [DefaultSizeLimit])
//     and beyond a record size ([WithRecordSizeLimit], [DefaultRecordSizeLimit]), so a
//     gzip bomb costs at most the limit in reading and a small multiple of the record
//     limit in memory.
//   - The whole file is checked: one JSON array, nothing but white space after it, and
//     a gzip stream that ends with a good checksum (concatenated gzip members are read
//     as one stream, as gzip -d reads them). A failure is a [*DecodeError] that
//     names the record and the offset in the decompressed JSON text, and wraps
//     [ErrMalformed], [ErrTooLarge], [ErrInvalid] or the reader's own error.
//
// # Monitoring
//
// A [Monitor] does what Velero's backup and restore operations controllers do, without
// their limits. [Monitor.Poll] checks every unfinished operation of one waiting run
// through its plugin's [Tracker] (found by a [Resolver]), many at once within a bound
// ([WithWorkers]), each call within a timeout ([WithCallTimeout]); it writes what changed
// in one batch and moves the run along with the rules of package phase. [Monitor.Run]
// does that for every waiting run once per interval and finalizes the runs whose
// operations have all ended ([WithFinalizer], each call bounded by [WithFinalizeTimeout]),
// working on a bounded number of runs at once ([WithStoreConcurrency]). A plugin that
// errors, hangs or panics fails only its own operation. After a restart, [Recover] fails
// the runs that were InProgress, as Velero does ([Monitor.Recover] cancels their
// operations first), and the Monitor resumes the rest where they were.
//
// # Cancelling a run
//
// [RequestCancel] (or [Run.RequestCancel] in an update) records a one-way request to
// cancel a run, with who asked and why; it survives restarts with the run, shows in its
// History ([EventCancelRequested]), and cannot be withdrawn. A controller whose main run
// is still going learns it from [Run.CancelRequested] and stops it. On its next pass the
// Monitor cancels every unfinished operation of a waiting run through its plugin, bounded
// like any plugin call (a plugin that does not support cancelling, errors or hangs does
// not hold it up), writes them Failed with an error that begins with [CancelledPrefix]
// (Velero's operations have no Canceled phase, so its files stay as Velero reads them),
// and moves the run to Failed with the request's reason; a finalizing run is failed the
// same way. A run that has ended refuses the request with [ErrRunEnded].
// [Monitor.Recover] likewise cancels the operations of each run it fails after a
// restart, so that no data mover keeps running for a failed run.
//
// [StartRun] starts a run: it records it, the operations its plugins started, and the
// phase the main run leads to, in one atomic write when the store is a [RunStarter].
// [Monitor.RunOnce] makes one pass of Run, for tests on a fake clock; [WithRunChanges]
// sends the runs each pass changed to a channel, without ever blocking the pass, and
// [WithObserver] and [WithHooks] report passes, plugin calls, timeouts and finalizer
// calls, for metrics.
//
// Several Monitors, in one process or in several replicas, may share a store. Its atomic
// updates keep a run from being advanced twice whatever they do; when the store is also a
// [RunClaimer] (storage/etcdstore is), each run is polled and finalized by one Monitor at
// a time, and the runs of a replica that died are taken over once its claims expire.
//
// Time comes from a [clock.Clock] ([WithClock]), so tests can move it by hand with the
// fake of package clock/clocktest.
package operations

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

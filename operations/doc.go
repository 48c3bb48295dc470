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
// operations have all ended ([WithFinalizer]). A plugin that errors, hangs or panics fails
// only its own operation. After a restart, [Recover] fails the runs that were InProgress,
// as Velero does, and the Monitor resumes the rest where they were.
//
// Time comes from a [Clock] ([WithClock]), so tests can move it by hand with the fake in
// package operationstest.
package operations

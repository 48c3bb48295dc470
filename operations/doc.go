// Package operations keeps the records of backups and restores ("runs") and of the
// long-running operations their plugins start, and defines the [Store] every backend
// implements and the [Tracker] through which a plugin is asked about its operations. It
// is what every store and every plugin needs, and nothing more.
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
// or not at all. The engine of storage/kv applies them for each of its drivers; they are
// exported for a Store written without it, which storage/storetest holds to the same
// rules. A store may have optional abilities, found by type assertion: a
// [RunStarter] creates a run with its first operations in one atomic write, a
// [RunClaimer] lets the Monitors of several processes share its runs, a [ClaimKeeper]
// keeps a Monitor's claims from pass to pass in a [ClaimSession], and a [ClaimTaker]
// frees at once the runs of the other replicas for a Monitor newly elected.
//
// # Plugins
//
// A [Tracker] asks one plugin for the progress of its operations and cancels them; a
// [Resolver] (or a [ResolverFunc]) finds the Tracker of a plugin by its registered name.
// A plugin that cannot help reports [ErrAsyncOperationsNotSupported] or
// [ErrInvalidOperationID], in an [*OperationError] that names the operation.
//
// # Starting and cancelling a run
//
// [StartRun] starts a run: it records it InProgress, runs its main run (the plugins)
// once, even when several replicas start it at once, and records the operations the
// plugins started and the phase the main run leads to.
//
// [RequestCancel] (or [Run.RequestCancel] in an update) records a one-way request to
// cancel a run, with who asked and why; it survives restarts with the run, shows in its
// History ([EventCancelRequested]), and cannot be withdrawn. A run that has ended refuses
// the request with [ErrRunEnded]. A controller whose main run is still going learns it
// from [Run.CancelRequested] and stops it; the Monitor cancels the run's unfinished
// operations through their plugins and moves the run to Failed.
//
// # The packages beside it
//
// Two packages in its subdirectories build on these records, and operations imports
// neither: operations/monitor holds the Monitor, which polls the operations of waiting
// runs through their Trackers, moves the runs along with the rules of package phase, and
// applies the restart rules (Recover); operations/opsfile reads and writes the records as
// Velero's itemoperations.json.gz files. operations/operationstest holds a scriptable
// Tracker for tests.
package operations

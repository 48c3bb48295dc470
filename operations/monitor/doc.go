// Package monitor runs the [Monitor], which polls the unfinished plugin operations of
// waiting runs to their end and moves the runs along, as Velero's backup and restore
// operations controllers do, without their limits. It builds on the records and the
// [operations.Store] contract of package operations, which never imports it.
//
// # Monitoring
//
// [Monitor.Poll] checks every unfinished operation of one waiting run through its
// plugin's [operations.Tracker] (found by an [operations.Resolver]), many at once within
// a bound ([WithWorkers]), each call within a timeout ([WithCallTimeout]); it writes what
// changed in one batch and moves the run along with the rules of package phase.
// [Monitor.Run] does that for every waiting run once per interval and finalizes the runs
// whose operations have all ended ([WithFinalizer], each call bounded by
// [WithFinalizeTimeout]), working on at most as many runs at once as it has workers, so
// that a pass over many runs makes at most that many store calls at a time. A plugin that
// errors, hangs or panics fails only its own operation; one that hangs past its context
// is not called again for that operation until it returns, so it holds one goroutine per
// operation (see [WithCallTimeout] and [CallHung]). After a restart, [Monitor.Recover]
// fails the runs that were InProgress, as Velero does, cancelling their operations first,
// and the Monitor resumes the rest where they were.
//
// # Stalls and retries
//
// Beyond Velero's rules, which are the default, a Monitor can fail an operation whose
// progress has stopped ([WithStallTimeout], per plugin [WithActionStallTimeout]), and
// retry the transient errors of a plugin's Progress with backoff rather than fail the
// operation at the first one ([WithRetryPolicy], [WithActionRetryPolicy], [RetryPolicy],
// [Transient]). An operation that waits for its next poll costs a pass no plugin call and
// no write, though the pass still lists and decodes it; [Monitor.Run] wakes when the
// earliest wait ends, but no sooner than a tenth of its interval, nor than
// [MinInterval], after its last pass. What these need between checks (the time of the last move and the highest count, the errors in
// a row, the next poll) is kept with the operation in the store
// ([operations.MonitorState]), so it goes on across a restart of the Monitor, a handover
// of the run to another Monitor, and a new Monitor per reconcile; an itemoperations file
// does not hold it, so a run loaded again from one starts its windows over. Records
// that hold it are written in a format that builds without it cannot read: before going
// back to such a build, turn the options off and let the operations that waited end (a
// check under no option writes an operation without its state). The times are the
// Monitor's clock's: replicas whose clocks differ shift each other's windows and waits by
// the difference.
//
// Of the deadlines of one operation, the operation timeout is judged after it (a check
// strictly after Created plus the timeout), the stall window at it (a check at the end
// of the window fails the operation). A report of completion wins over both, and the
// timeout over the stall; each is judged when the operation is checked, at a pass.
//
// # Cancelling a run
//
// A run whose cancel was requested (see [operations.RequestCancel]) is cancelled on the
// Monitor's next pass: it cancels every unfinished operation of the run through its
// plugin, bounded like any plugin call (a plugin that does not support cancelling, errors
// or hangs does not hold it up), writes them Failed with an error that begins with
// [CanceledPrefix] (Velero's operations have no Canceled phase, so its files stay as
// Velero reads them), and moves the run to Failed with the request's reason; a
// finalizing run is failed the same way. [Monitor.Recover] likewise cancels the
// operations of each run it fails after a restart, so that no data mover keeps running
// for a failed run.
//
// # Watching a Monitor
//
// [Monitor.RunOnce] makes one pass of Run, for tests on a fake clock and for programs
// that schedule the passes themselves (see "Several Monitors" for their claims). Two things watch a
// Monitor: its logger ([WithLogger]), and an [Observer] ([WithObserver]), whose
// functions it calls with each pass, each run a pass changed (to wake a controller's
// reconcile), each plugin call, each operation that timed out and each finalizer call,
// for metrics and event sources. A [Tracer] ([WithTracer]) wraps the same work in a
// start and an end, each start returning the context the work runs under: a pass,
// each run it polls or finalizes, each plugin call and each finalizer call, so that a
// span started for a call is in the context its plugin receives (integrations/otel
// does this with OpenTelemetry). Neither costs anything when unset.
//
// # Several Monitors
//
// Several Monitors, in one process or in several replicas, may share a store. Its atomic
// updates keep a run from being advanced twice whatever they do; when the store is also
// an [operations.RunClaimer] (storage/etcdstore and storage/kubestore are), each run is polled and finalized by
// one Monitor at a time, and the runs of a replica that died are taken over once its
// claims expire. When the store is also an [operations.ClaimKeeper] (storage/etcdstore
// and storage/kubestore are), [Monitor.Run] keeps its claims in an [operations.ClaimSession] and holds the runs
// it claimed until it returns, and the store balances them among the replicas after each
// pass and as soon as one joins (it may start a pass early, as [Monitor.Wake] does, when
// a run handed over to its replica becomes free); Poll and Finalize claim a run for the
// call only, and so does [Monitor.RunOnce] by default. A program that drives a Monitor
// by calling RunOnce in a loop, rather than by Run, gives it [WithKeptClaims]: its
// RunOnce then keeps the claims in a session of its own from one call to the next, as
// Run does (a pass over runs no other replica wants makes no claim requests, where it
// would claim and give up each run), until [Monitor.Close] ends the session and gives
// the claims up.
//
// While its passes (Run's or RunOnce's) skip runs that other Monitors' claims hold, a
// Monitor logs at Info how many runs wait and since when: when that number changes, at
// most once a minute while it stays the same, and once when no run waits any more. A
// pass that skips nothing after one that skipped nothing logs and locks nothing. A
// leader newly elected need not wait for a dead leader's claims at all when its store is
// an [operations.ClaimTaker]: see integrations/controllerruntime.
//
// The Monitor's time comes from a [clock.Clock] ([WithClock]): the stamps of records,
// operation timeouts, stall windows, retries and the pace of Run, so tests can move it
// by hand with the fake of package clock/clocktest. Two bounds are measured in real time
// instead, as they guard against a plugin or finalizer that hangs: the call timeout
// ([WithCallTimeout]) and the finalize timeout ([WithFinalizeTimeout]); so are the
// durations of calls and finalizers that the Observer is told.
package monitor

// Package controllerruntime runs itemops in a controller-runtime operator: the Monitor of
// operations/monitor as a manager runnable, an event source that reconciles the objects
// whose runs changed, status and event helpers, and owner names for namespaced objects.
//
// It lives in a module of its own, so that controller-runtime, client-go and Prometheus
// never enter the module graph of a program that imports only the itemops library.
//
// # Setup
//
// [New] builds the [Monitor] and adds it to the manager. It runs only on the elected
// leader (see "Replica models" for the other way). When it starts it applies the restart rules ([monitor.Monitor.Recover]) before
// anything else, and the reconcilers wrapped with [Gate] wait for that, so that Recover
// never fails a run a reconcile has just started. Then the Monitor polls until the
// manager stops, and [Monitor.Source] enqueues the objects whose runs it changed. The
// operator declares the [Kind] of its runs once and gives it to every call that names
// them (Velero's kinds are Kind{Name: phase.Backup} and Kind{Name: phase.Restore}):
//
//	snapshots, err := controllerruntime.DeclareKind("DatabaseSnapshot", phase.Backup)
//	...
//	m, err := controllerruntime.New(mgr, store, plugins)
//	...
//	err = ctrl.NewControllerManagedBy(mgr).For(&corev1.ConfigMap{}).
//		WatchesRawSource(m.Source(snapshots)).
//		Complete(controllerruntime.Gate(m, reconciler))
//
// The Monitor logs through the manager's logger (named "itemops") and records its
// metrics, from package prommetrics, on controller-runtime's metrics registry, which the
// manager serves, under the label monitor="default" ([WithName] and [WithRegistry]
// change both). A manager takes one Monitor per store, and one per name
// ([ErrDuplicateMonitor]).
//
// # Replica models
//
// Several replicas of an operator share its runs in one of two ways, over a store that
// they all open (storage/kubestore or storage/etcdstore):
//
//   - Leader election, the default: the Monitor runs on the elected leader alone, like
//     the controllers. As it starts, before Recover, it takes over the claims of every
//     other replica when the store is an [operations.ClaimTaker] (both stores are):
//     their sessions end, and its first pass polls the runs that a dead leader held
//     instead of skipping them until their claims expire. It logs at Info how many
//     sessions it ended. From the kill of a leader to the next poll, the runs then wait
//     for the leader election alone: the manager's LeaseDuration (15 s by default) and
//     a few RetryPeriods (2 s, jittered), 17 to 20 s in all at controller-runtime's
//     defaults in storage/kubestore's TestLeaderKilled (without the takeover, 46 to 50
//     s: kubestore's ClaimTTL of 30 s more). Shorter leader-election timings lower it.
//   - Shared claims, with [WithSharedClaims]: the Monitor runs on every replica, elected
//     or not, and the replicas share the runs through the store's claims, balanced
//     among them. No Monitor takes over: the runs of a replica that dies wait until its
//     claims expire (kubestore's Options.ClaimTTL, 30 s by default, after the others
//     last saw its session renewed).
//
// While a Monitor's passes skip runs that other replicas' claims hold, it logs at Info
// how many wait, and since when (see package operations/monitor).
//
// # Reconciling
//
// A reconcile calls [Monitor.HandleDeletion], with the Kind, first: it keeps [Finalizer]
// on the object, and when the object is deleted it cancels the run's operations through
// their plugins, deletes the run and lets the object go. Then [Monitor.StartRun] starts the run, stamped
// by the Monitor's clock, and wakes the Monitor so that the run's operations are polled
// at once; it refuses an owner without a UID, and cancels the stale run of a deleted
// object of the same name before starting the new object's.
// A claim on the run held by a pass of the operator's own Monitor is no error:
// HandleDeletion and StartRun wait for the pass to end; only a claim another Monitor
// holds gives an error wrapping [ErrClaimed].
//
// # Names
//
// A run is named by its owner's kind and name. [OwnerOf] names the run of a namespaced
// object "namespace/name" (a cluster-scoped object's run is named after the object),
// with the object's UID, so that a run is never handed to a new object created under the
// name of a deleted one (the store refuses with [operations.ErrUIDMismatch]); [ObjectKey]
// is its inverse.
//
// # Status
//
// [RunStatus] is the part of an object's status that mirrors its run: phase, counts, the
// conditions Ready, Progressing and Degraded, the slowest and the failed operation
// ([OperationStatus], each text cut to 1,024 bytes) and when the run last moved.
// [RunStatus.Set] fills it from a run and its operations; [RunStatus.SetFromStore] reads
// them, and on a store that counts operations ([operations.OperationCounter]) decodes
// only the unfinished and failed ones. docs/operators.md gives the CRD schema of the
// status. [Monitor.Source] enqueues an object at once when its run's phase moves or
// some of its operations end, and when its operations only progressed at most once
// every [WithProgressInterval] (30 s by default), which bounds how often a reconcile
// writes progress to the status.
//
// [RecordPhaseChanges] emits a Kubernetes Event for each phase change the status has
// not shown yet, through the events.EventRecorder of a manager's GetEventRecorder (in
// controller-runtime v0.24 and later); [RecordPhaseChangesFor] does the same through the
// record.EventRecorder of GetEventRecorderFor, which the managers of v0.19 to v0.21 give.
//
// # Blocked runs
//
// An error of the store, or of the Monitor's claims, that keeps a run from moving (the
// operator lacks the update right on the store's objects, its backend does not answer)
// is shown on the user's resource, not only in the operator's log.
// [Monitor.RunBlocked] returns it, a [BlockedError] that errors.Is and errors.As see
// through to the store's error; the Monitor records it for each run its calls name,
// forgets it when its calls for the run succeed again, and asks a reconcile of the
// object (through [Monitor.Source]) each time. [RunStatus.SetBlocked] shows it as the
// condition [ConditionBlocked]: True with reason [ReasonStoreError] or
// [ReasonClaimError] and the error's text, cut to 1,024 bytes, as message; False with
// reason [ReasonNotBlocked] once the run is blocked no more; absent on an object whose
// run never was. [RecordBlocked] and [RecordBlockedFor] emit a Warning Event when the
// run becomes blocked or its error changes, and a Normal Event when it heals.
package controllerruntime

// Package itemops is the root of a library that gives backup and restore controllers the
// machinery of asynchronous plugin operations, as Velero's "Plugin Progress Monitoring"
// design describes them. This package holds no code; the work is done by its packages
// (docs/architecture.md draws them, with their imports):
//
//   - [github.com/itemops/itemops/phase]: the phase state machine of a backup or restore
//     (New → InProgress → WaitingForPluginOperations → Finalizing → Completed, with the
//     PartiallyFailed and Failed branches), the rules that pick the next phase, and
//     diagrams. It imports nothing of itemops.
//   - [github.com/itemops/itemops/clock]: the Clock that everything that stamps, times
//     out or sleeps takes, and the system clock; clock/clocktest holds the one fake clock,
//     which tests move by hand. It imports nothing of itemops.
//   - [github.com/itemops/itemops/operations]: the durable records of runs and of the
//     operations their plugins start, the Store contract every backend implements with
//     its validators and errors, the Tracker and Resolver a plugin is asked through,
//     StartRun and RequestCancel: what every store and plugin needs. It builds on phase;
//     operations/operationstest holds a scriptable Tracker for tests.
//   - [github.com/itemops/itemops/operations/monitor]: the Monitor that polls operations
//     through their plugins' Trackers and moves runs along, and Recover, the restart
//     rules. It builds on operations. operations/monitor/monitormetrics defines its
//     metrics once, for every exporter (Prometheus, OpenTelemetry).
//   - [github.com/itemops/itemops/operations/opsfile]: the codec of Velero's
//     itemoperations.json.gz files. It builds on operations.
//   - [github.com/itemops/itemops/progress]: restore and backup item counters with
//     Velero's arithmetic, and a Reporter that hands their snapshots to a sink without
//     ever blocking the counting loop. It imports only clock.
//   - [github.com/itemops/itemops/restoreorder]: pass one of a two-pass restore: a
//     backup's contents (extracted or .tar.gz), Velero's priorities and restore filters,
//     and the ordered collection pass two walks. It imports nothing of itemops.
//   - [github.com/itemops/itemops/adapters]: the v1 and v2 plugin interfaces (backup and
//     restore item actions, volume snapshotters), v1→v2 adapters, and a Registry that
//     resolves plugin names to the Monitor's Trackers; adapters/adaptertest checks a v2
//     plugin against the contract. It builds on operations.
//   - storage/kv: the storage engine, the Store contract written once over a small
//     transactional key-value Backend; storage/kv/kvtest checks a Backend driver.
//   - storage/memstore and storage/boltstore: drivers of the engine, in memory and in
//     one bbolt file; storage/etcdstore and storage/kubestore, modules of their own, on
//     etcd and on the Kubernetes API; storage/storetest: the conformance suite every
//     Store passes.
//   - [github.com/itemops/itemops/webview]: a web view of any Store, an http.Handler
//     to mount on a mux of one's own (runs, a run's history and operations, as pages
//     and as JSON, with live refresh). It builds on operations.
//   - [github.com/itemops/itemops/visible]: the escapes that make a stored text safe to
//     show, shared by the web view and the command. It imports nothing of itemops.
//   - cmd/itemops, a module of its own (it opens etcd and Kubernetes stores): a command
//     that shows the library at work and inspects, checks, cancels, watches and serves
//     the web view of the runs of any store: a bolt file, etcd or a namespace.
//   - integrations/controllerruntime, a module of its own: the Monitor in a
//     controller-runtime manager (gated by Recover, with an event source, status and
//     Event helpers), and Prometheus metrics in integrations/controllerruntime/prommetrics.
//   - integrations/velero, a module of its own: a Velero fork's records, plugins and
//     bucket through itemops.
//
// Packages import one way only: phase, clock, restoreorder and visible are leaves, progress
// builds on clock, operations builds on phase, the Monitor, the file codec, the adapters
// and the stores build on operations (the stores through storage/kv, and never on the
// Monitor), and the Monitor and the codec never import each other. deps_test.go holds
// the packages to it.
package itemops

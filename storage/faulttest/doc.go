// Package faulttest is a fault-injection harness for the stores that share a server
// (storage/etcdstore, storage/kubestore): several replicas of a store and their Monitors
// run a seeded random workload through a channel that loses, refuses, delays and resets
// requests, and the history of every call is checked for linearizability against a
// model of the operations.Store contract, with
// [github.com/anishathalye/porcupine], and by invariants read back by a store without
// faults.
//
// # The workload
//
// [Run] opens Config.Replicas stores with Config.Open, each wrapped in a recorder and
// given a Monitor (package operations/monitor) whose plugin moves each operation one step
// of three at each Progress. Config.Workers goroutines then call them at random, over a
// few owners (Config.Owners, backups and restores) so that the calls collide:
// operations.StartRun with a batch of new operations, GetRun, UpdateRun (a phase change
// to a phase drawn at random, which the machine may refuse, or a cancel request),
// PutOperations (new operations and replacements of known ones, some of which the
// contract refuses as they change a finished operation), GetOperation, ListOperations,
// ListRuns, DeleteRun, and a pass of a Monitor (Monitor.RunOnce, whose calls are
// recorded too, claims included where the store has them), until the history holds
// Config.Calls calls.
//
// # The faults
//
// A [Faults] schedule, seeded, decides what happens to each request that a replica
// sends: about 85% pass, 4% are delayed 1 to 20 ms, 4% reach the server and lose their
// answer (a transport error, or a 500 or 504, after the server applied them), 4% are
// refused before the server sees them (409, 429, 500, 503 or 504; Unavailable or
// ResourceExhausted on etcd) and 3% fail as a connection reset before they are sent.
// [Faults.RoundTripper] does so for an HTTP client (Kubernetes' rest.Config.WrapTransport);
// storage/etcdstore's tests do the same with a gRPC interceptor. Watches are not
// faulted. One call in 30 is given a deadline of less than 20 ms, which may end it
// between any two of its requests or during one. When Config.Server is set, the
// harness also pauses the server's process (SIGSTOP, 50 to 500 ms) and kills and
// restarts the process that holds its data, every 300 to 700 ms of the workload (see
// [Server]): storage/etcdstore's tests pause and restart etcd; storage/kubestore's
// pause kube-apiserver and restart the etcd under it.
//
// # The checks
//
// Every call a replica's store makes is recorded with its invocation and its response.
// A call whose error is not a definite answer (operations.ErrNotFound, ErrExists,
// ErrConflict, ErrInvalid, a phase error, or the error of an UpdateRun's update
// function) has an unknown outcome: the model lets it take effect or not, at any time
// after it started, as porcupine's documentation advises for a call that timed out. A
// read that failed is left out. An UpdateRun is recorded with every call the store
// made of its update function, the run given and the run made: a write must be the
// work of the call given the run as the model holds it. The model is partitioned by
// owner; a ListRuns is projected onto each owner, as a read of whether and how it lists
// that owner's run. The projection is a necessary condition of a linearizable read of
// several runs, not a sufficient one.
//
// After the workload, with faults off, a fresh store (Config.Fresh) reads every run
// and every operation, and these reads are part of the history checked, so that every
// acknowledged write must be read back. The invariants are checked as well, each with a
// message of its own:
//
//   - the new operations of a batch are all present in the final read, or none;
//   - an acknowledged batch is present, unless a DeleteRun of its run may have come
//     after it;
//   - ListRuns and GetRun agree on which runs exist (no run lost or hidden), and no
//     ListRuns lists a run twice, out of order, or outside its filter;
//   - no call fails with operations.ErrCorrupt: the harness damages nothing.
//
// # Replaying a failure
//
// A failure prints its seed. The environment variable ITEMOPS_FAULT_SEED sets the seed
// (else it is drawn from the clock), and ITEMOPS_FAULT_OPS the number of calls (the long
// form: ITEMOPS_FAULT_OPS=20000). The seed fixes each worker's workload and the
// sequence of fault decisions; which request gets which decision depends on how the
// goroutines interleave, which no seed fixes, so a replay reproduces the workload and
// the mix of faults, and a failure most of the time rather than always. A history that
// is not linearizable is also drawn by porcupine into an HTML file whose name the
// failure gives.
package faulttest

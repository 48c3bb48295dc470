// Package storetest checks an [operations.Store] against the storage contract written on
// that interface. It is public so that the author of any backend runs the same checks as
// the backends of itemops (storage/memstore, storage/boltstore, storage/etcdstore and
// storage/kubestore run it).
//
// # Usage
//
// Call [Run] from a test in the backend's package, with a function that returns a new,
// empty store and registers whatever cleanup the store needs:
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) operations.Store {
//			s, err := mystore.Open(filepath.Join(t.TempDir(), "db"))
//			if err != nil {
//				t.Fatalf("Open: %v", err)
//			}
//			t.Cleanup(func() { s.Close() })
//			return s
//		})
//	}
//
// Run it under the race detector (go test -race): several subtests write from many
// goroutines at once. Every check is a named subtest, grouped as Runs, Operations,
// Isolation, Context, Concurrency, Scale and Pass, so a failure reads as, for example,
// TestConformance/Operations/InvalidBatchWritesNothing/500th_operation_invalid, and
// go test -run with that name reruns it alone. Its message is a sentence that says which
// call returned what and what the contract wants instead, with a go-cmp diff (-want +got)
// for values.
//
// # Decorators and optional abilities
//
// A decorator (metrics, tracing, a cache) is checked like a backend: give Run a function
// that wraps a new store. Run expects an [operations.RunStarter], the ability that
// creates a run with its first batch in one write: Runs/AtomicStart fails for a store without it, and in
// particular for a decorator type that embeds the operations.Store it wraps, which hides
// that method of the store. [decorate.Store] builds decorators that keep it (and
// [operations.RunClaimer], [operations.ClaimKeeper] and [operations.PassReader]). Run
// expects an operations.PassReader too: the group Pass checks its contract, and fails
// for a store without it unless [WithoutPassReader] says it is not meant to have it. [RunClaims] checks the claim
// sessions of a ClaimKeeper, and fails every check for a store that is not one.
// [RunReplicas] checks a store that several replicas share, through the Monitors of
// several replicas at once: the runs are shared evenly, a replica that stops leaves no
// claim, one that dies loses its runs to the others, and no run is polled by two at once. A backend that cannot start a run atomically passes
// [WithoutRunStarter]; Runs/AtomicStart is then replaced by Runs/StartWithoutRunStarter,
// which checks [operations.StartRun] on such a store, and the suite logs so.
//
// # Testing the suite
//
// Run, [RunCancel] and [RunClosed] take any [TB], a testing.TB that runs subtests of its
// own type, as *testing.T does, so a test can hand them a TB of its own that records
// failures instead of reporting them, and check that a store broken on purpose fails
// the subtest named for what it broke.
//
// # What is checked
//
// Only the public methods of [operations.Store] are used, and only through their
// documented results:
//
//   - Identity and errors: a run is found by kind and name whatever the UID; missing
//     records give [operations.ErrNotFound], a second CreateRun [operations.ErrExists],
//     invalid records [operations.ErrInvalid] or phase.ErrUnknownPhase, all seen through
//     [errors.Is].
//   - UpdateRun: its result is what GetRun returns; an update that fails, or that
//     [operations.ValidateRunUpdate] refuses, writes nothing, so a terminal run stays
//     terminal (phase.ErrInvalidTransition) and a phase never changes without a history
//     entry; a missing run never reaches the update function. While an update
//     function runs, the reads of every run and the writes of other runs go on
//     (Runs/UpdateHoldsBackNoOtherCall).
//   - Batches: PutOperations writes all of a batch or none of it: a batch refused by
//     [operations.ValidateBatch] or [operations.ValidateOperationUpdate] (its 500th
//     operation invalid, a finished operation moved back) leaves even its valid
//     operations unwritten. Operations need their run, and go with it on DeleteRun.
//   - Order and filters: runs by kind (Backup, Restore, then kinds of one's own by name)
//     then name (byte order), operations in the order their IDs were first put, also
//     after replacements and through every filter.
//   - Kinds of one's own (Runs/OwnKinds): runs of kinds declared with phase.Declare,
//     beside Backup and Restore runs of the same names and with kinds whose names are
//     each other's prefixes, are stored with their profile, listed by kind and by
//     phase, moved along their base's machine, and deleted, each alone with its
//     operations; a kind without its profile is refused (operations.ErrInvalid).
//   - Isolation: changing a value, or the slices inside it, after passing it to the
//     store or receiving it from the store changes nothing stored.
//   - Context: every method returns an error wrapping the context's error when called
//     with a done context, and writes nothing.
//   - Reads follow writes: GetOperation after a replacement returns the replacement
//     (Operations/ReplaceThenGet), and GetRun and GetOperation, while another goroutine
//     writes, never return less than the last acknowledged write, nor go back
//     (Concurrency/GetRunFollowsWrites, Concurrency/GetOperationFollowsWrites).
//   - Concurrency: concurrent UpdateRun calls lose no write and let only one of two
//     contradicting phase changes win; concurrent batches to one run or many are all
//     stored, each batch contiguous in the order; readers never see part of a batch.
//   - Atomic start: the store is an [operations.RunStarter] whose
//     CreateRunWithOperations writes a run and its first batch together or not at all
//     (see above), and StartRun whose main run fails leaves nothing.
//   - Main runs once (Runs/StartRunOnce): [operations.StartRun] called for one owner by
//     several goroutines at once runs main once, on CreateRun's ErrExists and
//     UpdateRun's atomicity; the other calls return the run InProgress.
//   - Scale: one batch of 100,000 operations (Scale/LargeBatch) is stored, listed back
//     in order, counted and spot-checked.
//
// [RunCancel] checks, beside the contract, that a [monitor.Monitor] on the store
// honours cancel requests: every unfinished operation of a cancelled run is cancelled
// once and written Failed with the request's reason, whether its plugin cancels at once,
// hangs or refuses, and the run fails; Recover does the same for a run it fails; a request
// made during a pass is honoured by the next. memstore, boltstore, etcdstore and kubestore
// run both.
//
// # Equality
//
// A value read back must equal the value written, compared with go-cmp: times as
// instants with [time.Time.Equal] (a backend need not keep a time's location or monotonic
// reading, but must keep it to the nanosecond), and a nil slice equal to an empty one.
//
// # Cost
//
// The suite stores about 110,000 operations in all, most of them in the one large batch.
// Against storage/memstore it takes a few seconds, and several times that under the
// race detector. With -short ([testing.Short]) the large batch holds 2,000 operations,
// which still spans many writes of a backend that splits batches, and each writer of the
// Concurrency checks makes 10 writes instead of 50.
package storetest

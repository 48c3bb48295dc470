// Package storetest checks an [operations.Store] against the storage contract written on
// that interface. It is public so that the author of any backend runs the same checks as
// the backends of itemops (storage/memstore, storage/boltstore and storage/etcdstore run
// it).
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
// Isolation, Context, Concurrency and Scale, so a failure reads as, for example,
// TestConformance/Operations/InvalidBatchWritesNothing/500th_operation_invalid, and
// go test -run with that name reruns it alone.
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
//     entry; a missing run never reaches the update function.
//   - Batches: PutOperations writes all of a batch or none of it: a batch refused by
//     [operations.ValidateBatch] or [operations.ValidateOperationUpdate] (its 500th
//     operation invalid, a finished operation moved back) leaves even its valid
//     operations unwritten. Operations need their run, and go with it on DeleteRun.
//   - Order and filters: runs by kind then name (byte order), operations in the order
//     their IDs were first put, also after replacements and through every filter.
//   - Isolation: changing a value, or the slices inside it, after passing it to the
//     store or receiving it from the store changes nothing stored.
//   - Context: every method returns an error wrapping the context's error when called
//     with a done context, and writes nothing.
//   - Concurrency: concurrent UpdateRun calls lose no write and let only one of two
//     contradicting phase changes win; concurrent batches to one run or many are all
//     stored, each batch contiguous in the order; readers never see part of a batch.
//   - Scale: one batch of 100,000 operations is stored, listed back in order, counted
//     and spot-checked.
//
// [RunCancel] checks, beside the contract, that a [monitor.Monitor] on the store
// honours cancel requests: every unfinished operation of a cancelled run is cancelled
// once and written Failed with the request's reason, whether its plugin cancels at once,
// hangs or refuses, and the run fails; Recover does the same for a run it fails; a request
// made during a pass is honoured by the next. memstore, boltstore and etcdstore run both.
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
// Against storage/memstore it takes about a second, and several times that under the
// race detector.
package storetest

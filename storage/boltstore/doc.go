// Package boltstore keeps itemops runs and operations in one bbolt file: an
// [operations.Store] that survives restarts and a kill -9 at any instant.
//
//	s, err := boltstore.Open("/var/lib/itemops/store.db", nil)
//	if err != nil {
//		return err // errors.Is(err, boltstore.ErrLocked) when another process has it open
//	}
//	defer s.Close()
//
// # Durability and transactions
//
// Every Store call is one bbolt transaction: reads run in parallel, writes one at a time.
// A write is acknowledged (the method returns nil) only after its transaction has
// committed and, unless [Options.NoSync] is set, been synced to disk, so a process killed
// at any instant loses no acknowledged write and leaves no part of an unacknowledged one.
// PutOperations validates the whole batch, first on its own and then against what is
// stored, before it writes anything, and writes it in its one transaction.
//
// A new file is built under a temporary name beside its path and linked into place once
// it is a whole, synced store, so a process killed while creating it leaves no half-made
// file behind to be refused later.
//
// The file is locked while a Store has it open. Another [Open] of the same file, in this
// process or another, waits at most [Options.Timeout] (one second by default) and then
// fails with [ErrLocked]; it never hangs.
//
// A context is checked before each transaction begins, after a write has waited for the
// write lock, and every 1024 records within long loops; a write whose context is done
// before it commits writes nothing. Waiting for the write lock itself cannot be cut short.
//
// # Layout
//
// The file holds four top-level buckets:
//
//	meta          "format" → "itemops.boltstore"; "version" → 8-byte big-endian schema version (1)
//	runs          <run key> → run record
//	run-phases    <phase> 0x00 <run key> → empty       (index of runs by phase)
//	operations    <run key> → bucket of the run's operations, whose sequence numbers them:
//	                  unfinished  <seq> → record of a New or InProgress operation
//	                  finished    <seq> → record of a Completed or Failed operation
//	                  ids         <operation ID> → <seq> and the operation's phase code
//
// A run key is one byte for the kind ('B' for Backup, 'R' for Restore) followed by the
// run's name, so the runs bucket is ordered by kind, then name, as ListRuns returns them.
// Listing runs by phase reads only the run-phases entries of those phases. A run's
// operations bucket is created by its first non-empty PutOperations and deleted with the
// run.
//
// <seq> is the 8-byte big-endian number the run's operations bucket gave an operation ID
// when it was first put, so both record buckets are in first-put order and ListOperations
// merges them. An operation's record moves from unfinished to finished once, when it
// finishes (a finished operation never changes phase again). Listing only unfinished
// phases, as the Monitor does, reads only the unfinished bucket, however many finished
// operations the run holds; a status update of an unfinished operation rewrites one record
// in that small bucket and, when the phase changes, its ID index entry. The ID index lets
// PutOperations validate a batch without reading the records it replaces.
//
// Records are a compact binary encoding whose first byte is a format version (1). Owner
// kind and name come from the key, not the record. Times keep their instant; a time in
// UTC or [time.Local] comes back in that location, any other in a fixed zone of the same
// name and offset, and monotonic clock readings are dropped. Open checks the meta bucket:
// a bbolt file without it (but with other buckets), or a file that is not bbolt, fails
// with [ErrNotStore]; another schema version fails with [ErrSchemaVersion]; either way the
// file is left as it was. A file of zero bytes, or a bbolt file without buckets, becomes a
// new store.
//
// # Limits
//
// Run names and operation IDs may be up to 16 KiB; longer ones are refused with
// [operations.ErrInvalid]. A record or index entry that cannot be decoded, or that
// contradicts its index, gives an error wrapping [ErrCorrupt], never a panic.
package boltstore

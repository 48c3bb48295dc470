// Package boltstore keeps itemops runs and operations in one bbolt file: an
// [operations.Store] that survives restarts and a kill -9 at any instant.
//
//	s, err := boltstore.Open("/var/lib/itemops/store.db", nil)
//	if err != nil {
//		return err // errors.Is(err, boltstore.ErrLocked) when another process has it open
//	}
//	defer s.Close()
//
// A Store is the storage engine of storage/kv, which keeps every rule of the
// operations.Store contract, over a small driver: one bbolt transaction per read of the
// engine, and one per write or per group of writes made at the same time (the driver is
// a kv.GroupCommitter; see "Group commit" in storage/kv). It is also an
// [operations.RunStarter].
//
// # Durability and transactions
//
// A write is acknowledged (the method returns nil) only after its transaction has
// committed and, unless [Options.NoSync] is set, been synced to disk, so a process killed
// at any instant loses no acknowledged write and leaves no part of an unacknowledged one.
// Every write of the engine (a run update, a whole batch of operations, a deletion with
// all its operations) is in one transaction, which it may share with writes that other
// goroutines make at the same time, so that they share one sync; reads run in parallel,
// transactions that write one at a time.
//
// A new file is built under a temporary name beside its path and linked into place once
// it is a whole, synced store, so a process killed while creating it leaves no half-made
// file behind to be refused later.
//
// The file is locked while a Store has it open. Another [Open] of the same file, in this
// process or another, waits at most [Options.Timeout] (one second by default) and then
// fails with [ErrLocked]; it never hangs. One process at a time, so one controller
// replica: use storage/etcdstore for several. (Read-only Stores share the lock among
// themselves; see "Reading without writing".)
//
// A context is checked before each transaction begins, after a write has waited for the
// write lock, and every 1024 keys within long scans; a write whose context is done
// before it commits writes nothing. Waiting for the write lock itself cannot be cut short.
//
// # Layout and migration
//
// The file holds two buckets: meta ("format" → "itemops.boltstore", "version" → 8-byte
// big-endian schema version, 2) and kv, which holds the engine's keys (see storage/kv);
// each value is the 8-byte big-endian version it was written at, then the engine's
// value. The kv bucket's sequence numbers the writes.
//
// Files of schema 1, written by earlier releases (a bucket per run's operations), are
// migrated by Open in one transaction: a process killed during the migration leaves the
// file as it was, and the next Open migrates it again. Open checks the meta bucket: a
// bbolt file without it (but with other buckets), or a file that is not bbolt, fails with
// [ErrNotStore]; another schema version fails with [ErrSchemaVersion]; either way the
// file is left as it was. A file of zero bytes, or a bbolt file without buckets, becomes
// a new store.
//
// # Reading without writing
//
// [Options.ReadOnly] opens a file that is only to be read, as the itemops command's
// inspect and check do: the lock is shared with other readers, the file is never
// created, migrated or written, and every write fails with [ErrReadOnly]. A file of
// schema 1 is then read through a copy migrated in the temporary directory, which Close
// removes.
//
// # Damage
//
// bbolt panics when it meets a page that fails its checks, and a file cut short faults
// when read through its memory map. A Store turns both, and records that do not decode,
// into an error wrapping [ErrCorrupt] (which is operations.ErrCorrupt) that names the
// file and what was found: no panic escapes a Store. From the first such error on, the
// Store writes nothing more to the file (every write fails with that error), so nothing
// is written on top of damage; reads go on, so that what can still be read can be saved.
// [Options.Check] checks every page when the file is opened, and [Store.Check] does on
// demand. One kind of damage only the check catches: page numbers changed so that the
// pages form a cycle, which bbolt would follow forever. Open a file that may be damaged
// with Options.Check.
//
// # Limits
//
// Run names and operation IDs may be up to 8 KiB (bbolt keys hold at most 32 KiB, and a
// key may hold both); longer ones are refused with [operations.ErrInvalid].
package boltstore

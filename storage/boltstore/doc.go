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
// replica: use storage/etcdstore or storage/kubestore for several. (Read-only Stores share the lock among
// themselves; see "Reading without writing".)
//
// A context is checked before each transaction begins, after a write has waited for the
// write lock, and every 1024 keys within long scans; a write whose context is done
// before it commits writes nothing. Waiting for the write lock itself cannot be cut short.
//
// # Layout and migration
//
// The file holds two buckets: meta ("format" → "itemops.boltstore", "version" → 8-byte
// big-endian schema version, 3, "sequence" → a copy of the kv bucket's sequence) and kv,
// which holds the engine's keys (see storage/kv); each value is the 8-byte big-endian
// version it was written at, then the engine's value, then a 4-byte CRC-32C of the
// entry (of the key, the version and the engine's value, seeded with the key's length). The kv
// bucket's sequence numbers the writes; every commit writes its copy too.
//
// Files of earlier schemas are migrated by Open in one transaction: schema 1, written
// by earlier releases (a bucket per run's operations), is rewritten in the engine's
// layout; schema 2 (the same layout without checksums) has a checksum added to every
// entry. A process killed during the migration leaves the file as it was, and the next
// Open migrates it again. The checksums of a migrated file cover what the migration
// read: Open checks its pages first (unless [Options.SkipCheck] is set). Builds
// before schema 3 refuse a file of schema 3 with ErrSchemaVersion. Open checks the meta
// bucket: a bbolt file without it (but with other buckets), or a file that is not
// bbolt, fails with [ErrNotStore]; another schema version fails with
// [ErrSchemaVersion]; either way the file is left as it was. A file of zero bytes, or a
// bbolt file without buckets, becomes a new store.
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
// bbolt keeps no checksums of its pages, only of its two meta pages, and panics when it
// meets a page that fails its few checks; a file cut short faults when read through its
// memory map. A Store turns both, and records that do not decode, into an error
// wrapping [ErrCorrupt] (which is operations.ErrCorrupt) that names the file and what
// was found: no panic escapes a Store. From the first such error on, the Store writes
// nothing more to the file (every write fails with that error), so nothing is written
// on top of damage; reads go on, so that what can still be read can be saved.
//
// Open checks the whole file first, by default ([Store.Check]; [Options.SkipCheck]
// turns it off): both meta pages (a meta page that fails its checksum makes bbolt read
// the transaction before it, a silent rollback, which the check reports), every page of
// the tree (reached once, its elements laid out as bbolt writes them, keys in order,
// each branch key the first key of its child), every entry of the kv bucket against its
// checksum, the kv bucket's sequence against its copy, the freelist, and that every
// page of the file is either in the tree or free. Together they find any change of one
// byte of the data bbolt reads for the last transaction, so a file damaged before Open
// fails Open with ErrCorrupt, unchanged. The test TestDefaultOpenOnEveryChangedLiveByte
// changes each such byte of a Monitor's store, opens it with the default options and
// uses it as a controller and its Monitor do; TestCheckFindsEveryChangedLiveByte holds
// the check alone to the same bytes (a changed byte of the meta bucket's format or
// version fails Open with ErrNotStore or ErrSchemaVersion). A larger change within one
// entry's key and value goes unseen with a chance of one in 2^32; larger changes
// elsewhere are found unless they happen to leave every page laid out as bbolt writes
// it and every page accounted for. What no check of one file can find: a write that the
// disk lost whole (a page, or the last meta page, left as it was before, consistent in
// itself), and damage in free pages or in the unused end of a page, which hold nothing.
//
// Damage that comes after Open, or in a file opened with SkipCheck, is met by the reads.
// Every entry of the kv bucket carries its checksum, which every read checks, so no read
// returns a record read wrong. bbolt finds a key by a binary search of each page it
// passes, and trusts the page's keys to be in order, so a changed key or leaf element
// that the search compares against can send it anywhere in that leaf page, away from
// the entry it looks for. A search that finds its key is right whatever the other keys
// hold. A read whose search does not find its key checks every entry of the leaf page
// the search ended in (it walks from there each way as many entries as a leaf page
// holds at most): each entry against its checksum, and that the keys ascend. When they
// pass, the search was right; else the read fails with ErrCorrupt. A scan also checks
// the entry it stops at. So a changed byte of a leaf element, key or value of the kv
// bucket is ErrCorrupt at the first read that meets it or misses because of it, never
// an entry read as absent (but for a leaf that a group of commits has grown, within
// one write transaction, past what a page holds: the walk checks only a page's worth
// of it each way): TestMonitorOnEveryChangedKVByte changes each byte of the kv
// bucket's leaf pages after their headers with three masks, opens the file with
// SkipCheck and uses it as a controller and its Monitor do, and FuzzChangedLiveByte
// does so with fuzzed bytes and masks. A read that misses its key pays for those
// checks (docs/BENCHMARKS.md, "boltstore: the cost of checking every entry of the leaf
// page where a read misses"). What the reads alone do not see: a changed page header
// (an element count cut short hides the page's last entries from every read), or a
// change to a branch page, the freelist or a meta page; and a page reached twice, which
// may be a cycle that bbolt would follow forever at the first read that meets it. Only
// the check finds those: skip it only for a file known to be sound.
//
// # Salvage
//
// [Salvage] reads what remains of a damaged or cut store without bbolt, page by page,
// keeping each entry whose checksum passes, and reads the records one by one (see
// [SalvagedRun] and [Loss]), so that one lost record costs only itself and each lost
// operation is named; [Build] writes what was read to a new file that shows at its path only whole.
// The itemops command's salvage is the two together.
//
// bbolt writes each page that a transaction changes anew, on a page it takes fresh,
// often at the end of the file. A run's record and its copy in the phase index change
// at each change of the run's phase, so a file cut short has often lost both, while
// most of its operations' records remain on pages written earlier. Salvage then
// rebuilds the run from those records, Failed, with a FailureReason that says its
// record was lost, and marks it Rebuilt, so that every operation record read is saved.
//
// # Limits
//
// Run names and operation IDs may be up to 8 KiB (bbolt keys hold at most 32 KiB, and a
// key may hold both); longer ones are refused with [operations.ErrInvalid].
package boltstore

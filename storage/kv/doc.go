// Package kv is the storage engine of itemops: [Store] implements every rule of the
// operations.Store contract once, over a small transactional key-value [Backend] that a
// driver provides. storage/memstore (an ordered map in memory), storage/boltstore (a bbolt
// file) and storage/etcdstore (etcd) are such drivers; a new backend (an SQL database,
// say) needs only a Backend: versioned reads of a consistent snapshot, and a commit of
// several writes at once, on condition that some keys are still at the versions read. A
// backend that makes only one object at a time atomic implements a [PartitionedBackend]
// instead (see "Partitioned backends"), as storage/kubestore does on the Kubernetes API.
//
//	s, err := kv.Open(ctx, backend) // what boltstore.Open and memstore.New do
//
// # What the engine does
//
// The engine validates every record before it writes it, runs UpdateRun as a
// read-then-conditional-commit loop (an update function may therefore be called more
// than once, and is never called with a lock of the backend held), keeps each run's
// phase history through [operations.ValidateRunUpdate], encodes records in one compact
// binary format (package storage/internal/record, which boltstore's migration of
// schema-1 files also reads them with), and keeps the indexes that let a controller's passes cost in proportion
// to what is unfinished: runs by phase, and each run's operations split into unfinished
// and finished ones. Owners are checked by UID: a call that names an owner whose UID
// differs from its stored run's fails with operations.ErrUIDMismatch.
//
// A time is read back as the same instant in the same zone by every process, whatever
// its time.Local: a time in UTC comes back in UTC, and any other, one in time.Local
// too, in a fixed zone (time.FixedZone) of the name and offset its zone had at that
// instant. Times that earlier builds stored for time.Local, without their zone, come
// back in UTC.
//
// # Layout
//
//	format                                      "itemops.kv/1"
//	r <kind> <name>                             run record
//	p <kind> <phase> 0x00 <name>                a copy of the run record, by phase
//	o <kind> <len(name)> <name> m               the run's operations metadata
//	o <kind> <len(name)> <name> u <seq>         a New or InProgress operation's record
//	o <kind> <len(name)> <name> f <seq>         a Completed or Failed operation's record
//	o <kind> <len(name)> <name> i <id>          <seq> and phase code of operation id
//	o <kind> <len(name)> <name> t <batch> <n>   chunk n of a staged batch
//
// <kind> is 'B' or 'R' for Backup and Restore, and for a kind of one's own (see
// phase.Declare) 'X', the kind's name, and a zero byte, so runs list by kind (Backup,
// Restore, then kinds of one's own by name), then name; a kind's name is letters and
// digits, so the zero byte ends it. The phase index of a kind of one's own puts the
// phase first, so that one scan lists a phase's runs of every such kind:
//
//	p X <phase> 0x00 <kind name> 0x00 <name>    a copy of the run record, by phase
//
// The kind of one's own's machine is named by the profile in the run record. <seq> is the
// 8-byte big-endian number an operation ID got when it was first put, so records list in
// first-put order. An operation's record moves from u to f once, when it finishes.
// Listing the unfinished operations of a run reads only its u keys; listing runs by
// phase reads only the p keys of those phases. The keys, and the values other than
// records, are written and parsed in one place, the internal package
// storage/internal/layout, with which storage/boltstore's Salvage also reads back what a
// damaged file still holds.
//
// # Partitioned backends
//
// No commit of the engine spans two runs: each touches the keys of one run (its record,
// its operations, their indexes and staged chunks) or the global format key, and every
// read reads one of them, but the listing of runs and Open's check that a backend
// without a format key holds no key at all. A driver whose unit of atomicity is one
// object therefore implements a [PartitionedBackend] and opens the engine with
// [OpenPartitioned]: each commit names its [Partition] and carries a [RunChange] that
// says what it does to the run's record and phase (with the run's phase history, and
// how many operations it adds and finishes, for a driver that shows a summary of each
// run), and ListRuns is one call,
// [PartitionedBackend.ScanRuns], that the driver may answer from an index of its own.
// [Open] gives a [Backend] the same view: a read of a partition is a Read, a commit is
// a Commit, and the phase index above (the p keys) is what the Backend's view writes
// for each RunChange and scans for ScanRuns. The keys, values and calls a Backend sees
// are therefore those of the layout above.
//
// # Group commit
//
// A backend whose commits each cost a sync to disk can take several commits in one
// transaction: it implements [GroupCommitter] (boltstore does). The engine then sends it
// the commits that concurrent writers make together (the batches of a Monitor's
// concurrent polls, the runs of a concurrent load): while one transaction is being
// written, the commits that arrive queue up, and the oldest of them then writes them all
// in the next transaction, with one sync. A commit that arrives when none is being
// written goes at once, under its caller's context, so a lone writer waits for nobody.
// Each commit of a group keeps its own conditions: one whose conditions fail fails
// alone, and when the transaction fails as a whole, each commit of the group is tried
// again alone, so only those that must fail do. A queued commit is written whatever
// happens to its caller's context afterwards, since others share its transaction.
//
// # Batches larger than one commit
//
// A batch of operations is one Commit when it fits the backend's [Limits] (bbolt and
// memory have none; etcd takes 128 operations and 1.5 MiB by default). A larger batch is
// staged: its writes are stored in chunks under the run's t keys, each chunk a Commit of
// its own that no reader looks at; then one Commit, on condition that the run's
// operations metadata is still what the batch was planned against, writes the metadata
// naming the batch. That Commit is the batch's commit point: before it nothing of the
// batch counts, after it all of it does. The chunks are then applied, each by a Commit
// that also deletes it, on condition that the metadata has not changed; a reader, or the
// next writer, that finds a batch named in the metadata applies what is left of it before
// it reads, so no reader ever sees part of a batch, and a batch whose writer died after
// its commit point is completed by whoever comes next. The contract therefore has no
// maximum batch: the engine splits, and every backend keeps all-or-nothing. Chunks of a
// batch that never reached its commit point are deleted with the run's next staged batch,
// or with the run.
//
// # Concurrency
//
// A Store is safe for concurrent use, and several Stores, in several processes, may
// share one backend (etcd): every write is a conditional Commit, and a write that loses
// a race reads again and retries, up to [DefaultRetries] times ([WithRetries]), after
// which it fails with operations.ErrConflict.
//
// The writes of one Store to one run (UpdateRun, PutOperations, DeleteRun) take turns,
// in the order they are called, so that goroutines of one process do not make each
// other retry; writers in other processes still race. A write waiting for its turn ends
// with ctx.Err() when ctx is done. UpdateRun holds its turn while it calls its update
// function, so every other write of that run waits until update has returned and its
// result is committed. Reads take no turn, and writes of other runs wait only for their
// own. An update function therefore must not call the Store, as the operations.Store
// contract says: a write of its own run would wait for the UpdateRun that calls it,
// until the write's ctx ends, and two update functions that wrote each other's runs
// would wait for each other.
package kv

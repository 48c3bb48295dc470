// Package etcdstore keeps itemops runs and operations in etcd: an [operations.Store] that
// several controller replicas share, and an [operations.RunClaimer] through which their
// Monitors divide the runs among them, one Monitor per run at a time, taking over the runs
// of a replica that dies.
//
//	// The client is yours: endpoints, TLS and credentials as your cluster needs.
//	client, err := clientv3.New(clientv3.Config{Endpoints: endpoints, TLS: tlsConfig})
//	if err != nil {
//		return err
//	}
//	defer client.Close()
//	s, err := etcdstore.Open(ctx, client, "itemops/", nil)
//	if err != nil {
//		return err
//	}
//	defer s.Close()
//	m := operations.NewMonitor(s, resolver) // claims each run it polls
//
// The package is a Go module of its own, so that programs that do not import it never
// have etcd in their module graph. It requires the etcd v3.6 client (v3.6.4, the newest
// v3.6 release whose go line is 1.23, like itemops'; a program may use any later one) and
// is tested against an etcd v3.6 server.
//
// # Limits
//
//   - The store never dials etcd: it uses the caller's *clientv3.Client, and never opens
//     a connection, secure or not, of its own. It needs read and write access to its
//     prefix, readers included (see Batches).
//   - Set [Options.MaxTxnOps] and [Options.MaxRequestBytes] to the server's
//     --max-txn-ops and --max-request-bytes when they are not etcd's defaults (128 and
//     1.5 MiB). A batch larger than one transaction is written in several and still
//     becomes visible whole; it has no size limit but etcd's database quota.
//   - One record must fit in one request: an operation's record (its JSON, with the ID,
//     plugin, item, post-operation items and status) and its key may take up to
//     MaxRequestBytes less about 5 KiB and twice the key prefix, and a run's record up to
//     about half the request size. Larger records are refused with
//     [operations.ErrInvalid], as are times outside years 0 to 9999.
//   - Every request waits at most [Options.RequestTimeout] (10 s by default). A request
//     etcd does not answer in time, or cannot take (no leader, no connection), fails with
//     [ErrUnavailable]; a write that fails so may or may not have been made, but whole or
//     not at all.
//   - Writes to one run's operations go one at a time: two batches to one run from
//     different processes conflict, and the one that loses validates again and retries,
//     up to [Options.ConflictRetries] times, then fails with [operations.ErrConflict].
//     Calls on one Store wait for each other rather than conflict. Batches to
//     different runs, and run updates beside batches, never conflict. A batch too
//     large for one transaction takes longer to write, and against a busy writer of
//     the same run in another process it may lose every time; claims keep the
//     Monitors of several replicas from writing one run at once.
//   - Lists are read in pages ([Options.PageSize]) at one revision. When etcd compacts
//     that revision away before the last page is read, the list is read again. etcd
//     counts the rest of a range with every page it returns; operations are read in
//     windows of sequence numbers that avoid that cost, but a ListRuns of every run
//     (not one by phase) of n runs visits about n²/(2·PageSize) keys in etcd.
//   - Claims hold while their store keeps its lease alive; see Claims.
//
// # Layout
//
// Under the prefix (which gets a "/" if it lacks one; "" means the root of the key
// space) the store keeps:
//
//	format                         {"format":"itemops.etcdstore","version":1}
//	runs/<K><name>                 run record (JSON)
//	phases/<phase>/<K><name>       the same run record, indexed by phase
//	ops/<K><esc>/meta              the run's operation metadata: next sequence number,
//	                               count, and the batch being applied, if any
//	ops/<K><esc>/open/<seq>        record of a New or InProgress operation (JSON)
//	ops/<K><esc>/done/<seq>        record of a Completed or Failed operation (JSON)
//	ops/<K><esc>/ids/<ID>          <seq>:<phase code> (N, I, C, F)
//	ops/<K><esc>/staged/<b>/<n>    chunk n of batch b, while a large batch is written
//	claims/<K><esc>                the Identity of the store that holds the run's claim,
//	                               bound to that store's lease
//
// <K> is B for a backup, R for a restore; <name> is the run's name as it is, so run keys
// sort by kind, then name, as ListRuns returns them; <esc> is the name path-escaped
// (url.PathEscape), so that no run's keys are a prefix of another's. <seq> is the
// 16-digit hexadecimal number the run gave the operation ID when it was first put, so
// both record directories are in first-put order and ListOperations merges them.
//
// ListRuns with phases reads only the index entries of those phases; ListOperations of
// unfinished phases, as the Monitor asks, reads only open/, however many finished
// operations the run holds. A record moves from open/ to done/ once, when its operation
// finishes. Records carry a format version "v"; the owner's kind and name come from the
// key. Times are written in RFC 3339 with nanoseconds and come back in UTC or a fixed
// zone, the same instant. Open writes the format marker under an empty prefix, and
// refuses a prefix that holds other keys ([ErrNotStore]) or another schema version
// ([ErrSchemaVersion]).
//
// # Transactions
//
// CreateRun, UpdateRun and DeleteRun are one transaction each. CreateRun writes the run,
// its index entry and its operations metadata only where no run record exists.
// UpdateRun reads the run, applies the caller's function and
// [operations.ValidateRunUpdate], and writes the record and its index entry only if the
// record's revision is unchanged since, else it reads again and retries. DeleteRun
// removes the run, its index entry and every key under its ops/ directory at once, under
// the same compare. Every write of a run's operations rewrites its
// metadata key and happens only if that key is unchanged since the batch was validated
// (against the ID index, with [operations.ValidateBatch] and
// [operations.ValidateOperationUpdate]), so two batches never interleave.
//
// # Batches
//
// A batch that fits in one transaction is written in one. A larger one is written in
// three steps:
//
//  1. Its writes are encoded in chunks that each fit in one request, and all chunks
//     but the last are written under staged/. No reader looks there.
//  2. One transaction writes the last chunk and, if the metadata is unchanged, names the
//     batch in the metadata. That is the commit: before it nothing of the batch is part
//     of the run, after it all of it is.
//  3. The chunks are applied, in as many transactions as they need, each made only while
//     the metadata still names the batch; then one transaction clears the batch from the
//     metadata and deletes the chunks.
//
// A reader or writer that finds a batch named in the metadata applies it first (the
// writes are the same whoever makes them), so no reader ever sees part of a batch, and
// a writer that dies after its commit leaves a batch that the next call completes. A
// writer that dies before its commit leaves chunks that no one reads; the run's next
// batch deletes them, or its deletion does. A committed batch is acknowledged: once the
// commit is made, PutOperations returns nil even if it cannot finish applying.
//
// # Claims
//
// [Store.ClaimRun] makes a key under claims/ bound to a lease of [Options.ClaimTTL] (30 s
// by default) that the store keeps alive from the first claim until [Store.Close], which
// revokes it. A Monitor polls or finalizes a run only while it holds the run's claim and
// gives it up when it is done, so the replicas' Monitors share the runs pass by pass: in
// each pass a run goes to whichever Monitor claims it first, and with n replicas a run may
// be polled up to n times per interval. When a replica dies, or loses etcd for longer
// than the TTL, its lease expires and its claims go with it; until then the runs it was
// polling wait. A claim whose release could not reach etcd stays until then too, and the
// store's own next claim of that run adopts it. Claims make the work efficient, not
// correct: a Monitor that loses its claim mid-poll still writes, and the compares above
// keep its writes from undoing another's, as they keep a run from being advanced twice.
package etcdstore

// Package etcdstore keeps itemops runs and operations in etcd: an [operations.Store] that
// several controller replicas share, and an [operations.RunClaimer] through which their
// Monitors divide the runs among them, one Monitor per run at a time, taking over the runs
// of a replica that dies ([operations.ClaimKeeper] balances them; see "Claims" below).
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
//	m := monitor.New(s, resolver) // claims each run it polls
//
// The package is a Go module of its own, so that programs that do not import it never
// have etcd in their module graph. It requires the etcd v3.6 client (v3.6.4, the newest
// v3.6 release whose go line is 1.23, like itemops'; a program may use any later one) and
// is tested against an etcd v3.6 server.
//
// The rules of the contract (validation, run updates and their retries, filters and
// order, the phase index, the split of unfinished and finished operations, and batches
// larger than one transaction) are those of the engine in package storage/kv, which
// documents them; this package is its driver for etcd, and adds the claims. A write
// acknowledged by the store was committed by etcd's quorum, so it survives the crash
// of an etcd member, as TestCrashServer checks by killing the server (kill -9) at
// random moments while a client writes.
//
// # Limits
//
//   - The store never dials etcd: it uses the caller's *clientv3.Client, and never opens
//     a connection, secure or not, of its own. It needs read and write access to its
//     prefix.
//   - Set [Options.MaxTxnOps] and [Options.MaxRequestBytes] to the server's
//     --max-txn-ops and --max-request-bytes when they are not etcd's defaults (128 and
//     1.5 MiB): they are the largest commit the store makes. Open checks that the server
//     takes transactions of MaxTxnOps operations and fails, naming the options, when it
//     does not; a server that takes smaller requests than MaxRequestBytes refuses the
//     first commit that large with the same advice. A batch larger than one transaction
//     is staged by the engine and still becomes visible whole (see package
//     storage/kv).
//   - Every request waits at most [Options.RequestTimeout] (10 s by default). A request
//     etcd does not answer in time, or cannot take (no leader, no connection), fails with
//     [ErrUnavailable]; a write that fails so may or may not have been made, but whole or
//     not at all. The etcd client sends a request again, a write included, when an
//     attempt fails with DeadlineExceeded while the request's own deadline has not
//     passed. etcd itself never answers so, but a proxy between the client and etcd that
//     does, after etcd applied a write, makes the second sending find that write: the
//     store then takes it for a concurrent one, and the call may fail with an error
//     (its update function's, say) although its write was made. Give a proxy a
//     deadline longer than RequestTimeout, or none.
//   - A read (one call of the engine, such as a ListOperations) is made at one etcd
//     revision, that of its first request; lists are read in pages ([Options.PageSize])
//     at that revision. When etcd compacts that revision away before the last page is
//     read, the call fails with an error wrapping [operations.ErrConflict] and says so;
//     it is not retried, and calling again reads at a newer revision. Keep etcd's
//     auto-compaction retention well above the time a list takes.
//   - Run etcd with auto-compaction (for example --auto-compaction-mode=periodic
//     --auto-compaction-retention=5m): every pass of a Monitor rewrites the operations
//     it polls, and etcd keeps every revision until it is compacted. With it, the space
//     the database uses stays flat under a steady workload (TestDatabaseStaysFlat);
//     without it, it grows by every record written. The store never compacts: etcd's
//     history is the whole cluster's, and compaction is the operator's choice. etcd counts the rest
//     of a range with every page it returns, so a list of n keys visits about
//     n²/(2·PageSize) keys in etcd's index; the Monitor's lists (runs by phase, a run's
//     unfinished operations) cover only what they return.
//   - Claims hold while their store keeps its lease alive; see Claims.
//
// # Layout
//
// Under the prefix (which gets a "/" if it lacks one; "" means the root of the key
// space) the store keeps:
//
//	format           {"format":"itemops.etcdstore","version":2}
//	kv/<key>         the keys of the engine (package storage/kv), each as it is
//	claims/<kind>/<name>
//	                 the Identity of the store that holds the claim on the run of that
//	                 kind and name (whatever its UID), bound to that store's lease;
//	                 "handed over, free from <time> by <Identity>" while a replica hands
//	                 the run to another (see Claims)
//	replicas/<id>    the Identity of a store whose Monitor runs, one key per Run,
//	                 bound to that store's lease; <id> is the lease's ID and a number
//
// Each commit of the engine is one etcd transaction: its conditions compare the
// ModRevision of their keys, which is the version the engine sees of every key (0 for
// an absent key). Open writes the format marker under an empty prefix, and refuses a
// prefix that holds other keys ([ErrNotStore]) or another schema version
// ([ErrSchemaVersion]). The replicas that share a prefix run one version of this
// package: the names of the claims are part of the layout, and replicas that named them
// apart would not see one another's claims.
//
// # Schema 1
//
// The release before the kv engine kept runs and operations in a layout of its own,
// schema version 1. Open refuses it with [ErrSchemaVersion] and the way out: let that
// release finish the runs it holds, then delete the prefix (etcdctl del --prefix) or
// open this release's store under another prefix. There is no conversion because what
// the store holds is short-lived: the records of runs being polled, whose results a
// backup keeps elsewhere (Velero writes its item operations to object storage), and
// schema 1 was written by one release only; a converter would keep that release's
// record codec and key layout alive in this package for data that a drained store no
// longer needs.
//
// # Claims
//
// [Store.ClaimRun] makes a key under claims/ bound to a lease of [Options.ClaimTTL] (30 s
// by default) that the store keeps alive from the first claim until [Store.Close], which
// revokes it. A Monitor polls or finalizes a run only while it holds the run's claim.
// The Store is also an [operations.ClaimKeeper]: the Run of a Monitor keeps its claims
// from pass to pass in a claim session ([Store.KeepClaims]; Run finds it on its own, and
// through a store that [github.com/itemops/itemops/operations/decorate.Store] wraps). A
// replica holds the runs it claimed until its Run returns, when it gives them all up, or
// until balancing hands them to another replica, and a pass writes to etcd only what
// changed, one transaction for the operations of each run that changed and none for the
// claims. The replicas' Runs count one another by their keys under replicas/; after each
// pass, and as soon as a replica joins (each Run watches those keys), a replica that
// holds more than its share of the runs (their number divided by the replicas', one more
// for the first replicas by key when it does not divide evenly, so that the shares add
// up) hands the surplus over. Another may take a run handed over an interval after the
// last poll of it ended, so that no operation is polled by two replicas within one
// interval; a replica short of its share has its Run make a pass at that moment, so that
// one that joins holds its share about an interval after it starts. A run no one holds
// goes to whichever Monitor claims it first.
// Outside Run ([github.com/itemops/itemops/operations/monitor.Monitor.RunOnce], Poll,
// Finalize), a Monitor claims a run for the call and gives the claim up after it; a run
// that a Run of the same store keeps is lent to the call and goes back to the Run. A
// Monitor given [github.com/itemops/itemops/operations/monitor.WithKeptClaims] keeps the
// claims of its RunOnce passes in a session, as Run does, until its Close.
//
// When a replica dies, or loses etcd for longer than the TTL, its lease expires and its
// claims go with it; until then the runs it was polling wait, unless a Monitor that
// knows it is the only one at work (a leader newly elected) calls
// [Store.TakeOverClaims], which revokes the other stores' leases. A claim whose release
// could not reach etcd stays until its lease ends too, and the store's own next claim
// of that run adopts it. Claims make the work efficient, not correct: a Monitor that loses its claim
// mid-poll still writes, and the engine's conditional commits keep its writes from
// undoing another's, as they keep a run from being advanced twice.
package etcdstore

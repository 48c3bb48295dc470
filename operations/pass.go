package operations

import (
	"context"
	"fmt"
)

// A PassReader is an optional ability of a [Store]: it lets a Monitor's pass (package
// operations/monitor) read the runs it will poll, with their unfinished operations, in
// one read per page of runs, and write what a poll found without reading the run again,
// on condition that nothing the poll relied on changed since that read. Without it a
// pass reads each run and its operations with calls of their own, and a store that
// shares a server (etcd, the Kubernetes API) answers each with requests; with it, a pass
// over runs whose operations did not change makes no request beyond its reads of the
// pages, and a run whose operations changed takes one write.
//
// A Monitor finds the ability by a type assertion on its store. The stores of
// storage/kv's engine (memstore, boltstore, etcdstore, kubestore) have it, decorators
// made by package operations/decorate keep it, and storage/storetest holds every store
// that has it to the rules below.
//
// ReadPass calls fn with the runs that f selects, as ListRuns orders them, in pages of
// a size the store chooses, each page read from one consistent snapshot: a page shows
// every write that ended before its read began and none that began after it ended.
// Each [PassRun] holds the run, its unfinished operations (New and InProgress) in the
// order their IDs were first put, and what the store needs to write on condition that
// they are still as read. ReadPass stops at the first error fn returns and returns it
// as it is; it fails as ListRuns and ListOperations do (an error wrapping [ErrCorrupt]
// for a record it cannot read, ctx.Err() when ctx ends first). Pages read later may
// show writes made while fn ran, but ReadPass gives each run once at most: a run that
// moved, while fn ran, from a phase of f that a page read to another that a later page
// reads is not given again.
//
// CommitPass writes ops, a batch of replacements of operations of r (each ID one of
// r.Operations'), as PutOperations would, in one atomic write, if the run, the set of
// its operations and every operation the batch replaces are still as r shows them.
// Otherwise it writes nothing and fails with an error wrapping [ErrStale]: the caller
// reads that run again (GetRun, ListOperations) and decides anew. A store that sends a
// write again after its answer was lost (the Kubernetes client does) may find its own
// first sending applied and take it for another's: ErrStale then comes for a write
// that was made, which the caller's new read shows. It also fails,
// writing nothing, with the errors of [ValidateBatch] and [ValidateOperationUpdate], with
// an error wrapping [ErrInvalid] when an operation of ops is not one of r's unfinished
// operations or r was not given by this store's ReadPass, and with ctx.Err() or the
// backend's error. When the outcome of the write is unknown (its answer was lost), it
// returns the backend's error: the write may have been made, and a caller that tries
// again gets ErrStale if it was. An empty ops writes nothing and succeeds. A run's
// record changes only through UpdateRun, as ever.
//
// Both are safe for concurrent use, with every other method of the store.
type PassReader interface {
	ReadPass(ctx context.Context, f RunFilter, fn func(page []PassRun) error) error
	CommitPass(ctx context.Context, r PassRun, ops []Operation) error
}

// A PassRun is a run as [PassReader.ReadPass] read it.
type PassRun struct {
	// Run is the run's record.
	Run Run
	// Operations are the run's unfinished operations (New and InProgress), in the order
	// their IDs were first put.
	Operations []Operation
	// Snapshot is what the store needs to write on condition that the run is still as
	// read: give the PassRun to CommitPass as ReadPass made it. Its type is the store's
	// own, and it holds no reference to Run or Operations, which the caller may change.
	Snapshot any
}

// ErrStale is returned by [PassReader.CommitPass] when the run it would write changed
// since the pass read it (a write of another Monitor, a cancel request, new
// operations): nothing was written, unless the change was the call's own write sent
// twice (see PassReader). It wraps [ErrConflict].
var ErrStale = fmt.Errorf("run changed since it was read: %w", ErrConflict)

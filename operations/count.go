package operations

import "context"

// An OperationCounter is an optional ability of a [Store]: it counts a run's operations
// by phase without decoding them, and lists those a filter selects, in one read, so
// that a status that shows a run's counts and a few of its operations (the unfinished
// and the failed ones) need not decode every operation of a run of thousands. The
// stores built on storage/kv (memstore, boltstore, etcdstore, kubestore) have it; a
// caller finds it by a type assertion and falls back to [Store.ListOperations] without
// it. The decorators of package operations/decorate do not keep it.
//
// CountOperations returns the counts of the operations of o, and the operations that f
// selects, in the order their IDs were first put, as ListOperations returns them, both
// from one consistent read. It fails as ListOperations does: with [ErrNotFound] when o
// has no run, [ErrUIDMismatch], an error wrapping [ErrCorrupt] for a record it cannot
// read, and ctx.Err(). It is safe for concurrent use.
type OperationCounter interface {
	CountOperations(ctx context.Context, o Owner, f OperationFilter) (OperationCounts, []Operation, error)
}

// OperationCounts counts a run's operations by phase.
type OperationCounts struct {
	New, InProgress, Completed, Failed int
}

// Total returns the number of operations c counts.
func (c OperationCounts) Total() int { return c.New + c.InProgress + c.Completed + c.Failed }

// Count returns the counts of ops by phase; an operation of no known phase is not
// counted.
func Count(ops []Operation) OperationCounts {
	var c OperationCounts
	for _, op := range ops {
		c.Add(op.Status.Phase)
	}
	return c
}

// Add counts one more operation of phase p; a phase that is not one of the four is not
// counted.
func (c *OperationCounts) Add(p OperationPhase) {
	switch p {
	case OperationNew:
		c.New++
	case OperationInProgress:
		c.InProgress++
	case OperationCompleted:
		c.Completed++
	case OperationFailed:
		c.Failed++
	}
}

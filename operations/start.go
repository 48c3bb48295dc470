package operations

import "context"

// A RunStarter is an optional ability of a [Store]: it creates a run together with the
// first batch of its operations in one atomic write, so that a reader, or a process that
// restarts after a crash, sees the run with all those operations or sees neither.
// Stores built on storage/kv (memstore, boltstore, etcdstore) have it; find it by a type
// assertion.
//
// CreateRunWithOperations fails as CreateRun does on r ([ErrExists],
// [ErrUIDMismatch], the error of [Run.Validate]) and as PutOperations does on ops (the
// error of [ValidateBatch]), writing nothing.
type RunStarter interface {
	CreateRunWithOperations(ctx context.Context, r Run, ops []Operation) error
}

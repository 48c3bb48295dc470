package operations

import (
	"context"
	"time"
)

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

// RequestCancel asks that the run of o be cancelled, for reason (who asked and why), at
// time at: it stores [Run.RequestCancel]'s change through UpdateRun and returns the run
// as stored. The Monitor then cancels the run's unfinished operations and moves it to
// Failed; a controller whose main run is still going learns it from
// [Run.CancelRequested]. It fails as UpdateRun does, and with an error wrapping
// [ErrRunEnded] for a run already in a terminal phase. A second request keeps the first.
func RequestCancel(ctx context.Context, s Store, o Owner, reason string, at time.Time) (Run, error) {
	return s.UpdateRun(ctx, o, func(r *Run) error { return r.RequestCancel(reason, at) })
}

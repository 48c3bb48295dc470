package operations

import (
	"context"
	"fmt"
	"slices"

	"github.com/itemops/itemops/phase"
)

// A Store keeps runs and their operations durably. It is the contract every backend
// implements; the storage engine of storage/kv implements it once, for
// [github.com/itemops/itemops/storage/memstore],
// [github.com/itemops/itemops/storage/boltstore] and storage/etcdstore, and
// storage/storetest checks a backend against every rule below.
//
// Every method takes a context first and returns ctx.Err() (possibly wrapped) when it is
// done before the work is, without writing anything. Implementations are safe for
// concurrent use and keep these rules:
//
//   - A run is identified by its owner's Kind and Name, and belongs to the object of its
//     owner's UID. A call that names an owner whose UID is set and differs from the
//     stored run's UID (the object was deleted and created again) fails with
//     [ErrUIDMismatch], which wraps [ErrConflict], and changes nothing; CreateRun then
//     reports ErrUIDMismatch, not [ErrExists]. An owner with an empty UID, or a run
//     stored without one, matches any.
//   - Runs are listed by kind (Backup, then Restore, then kinds of one's own in the
//     byte order of their names), then name. ListRuns costs in proportion to
//     the runs it returns when the filter names phases, not to every run stored.
//   - A run changes only through UpdateRun, an atomic read-modify-write: update gets a
//     copy of the stored run and may be called more than once (the store retries after
//     a concurrent write of the run), so it must not have effects outside the run it is
//     given that a second call would repeat. update works on that copy alone and does
//     not call the Store: a store may hold the run's other writes back until update
//     returns (the engine of storage/kv does), so a write of the run from inside update
//     may wait for itself until its context ends. To write operations as well, call
//     PutOperations before or after UpdateRun; a run and its first operations are
//     created together by [RunStarter]. While update runs, the reads of every run and
//     the writes of other runs go on. A nil update fails with [ErrInvalid]. The result
//     is checked with [ValidateRunUpdate] before it is written, so a terminal run can
//     never be moved back; when update returns an error, nothing is written and
//     UpdateRun returns that error as it is. No write is lost to a concurrent one.
//   - Operations belong to a run: PutOperations on an owner without a run fails with
//     [ErrNotFound], and DeleteRun deletes the run's operations with it, atomically.
//   - PutOperations writes one batch atomically, whatever its size (there is no maximum:
//     a store splits what its backend cannot take in one write and still applies it
//     whole or not at all for every reader). It inserts new IDs and replaces existing
//     ones, after [ValidateBatch] and, for each replaced operation,
//     [ValidateOperationUpdate].
//   - ListOperations returns an owner's operations in the order their IDs were first
//     put, and costs in proportion to what it returns when the filter names only
//     unfinished phases (New, InProgress), not to every operation of the run.
//   - Values are copied on the way in and out: a store keeps no slice a caller passed
//     (a Run's History, an Operation's PostOperationItems, the ops of a batch), and the
//     caller may change what a call returned without changing anything stored.
//   - What a store holds but cannot read back (a damaged file, a record that does not
//     decode) is reported with [ErrCorrupt], never with a panic.
type Store interface {
	// CreateRun stores a new run. It fails with [ErrExists] when the owner has a run,
	// and with an error wrapping [ErrInvalid] or phase.ErrUnknownPhase when
	// [Run.Validate] rejects r.
	CreateRun(ctx context.Context, r Run) error
	// GetRun returns the run of o, or [ErrNotFound].
	GetRun(ctx context.Context, o Owner) (Run, error)
	// UpdateRun applies update to the run of o atomically and returns the run as
	// stored. update must not call the Store (see above). It fails with [ErrNotFound],
	// with update's own error, or with the error of [ValidateRunUpdate].
	UpdateRun(ctx context.Context, o Owner, update func(*Run) error) (Run, error)
	// ListRuns returns the runs f selects, by kind (Backup, Restore, then kinds of one's
	// own by name), then name.
	ListRuns(ctx context.Context, f RunFilter) ([]Run, error)
	// DeleteRun deletes the run of o and all its operations, or fails with [ErrNotFound].
	DeleteRun(ctx context.Context, o Owner) error
	// PutOperations writes ops, all of o, as one atomic batch, inserting or replacing by
	// ID. An empty batch writes nothing and succeeds when the run exists.
	PutOperations(ctx context.Context, o Owner, ops []Operation) error
	// GetOperation returns the operation id of o, or [ErrNotFound].
	GetOperation(ctx context.Context, o Owner, id string) (Operation, error)
	// ListOperations returns the operations of o that f selects, in the order their IDs
	// were first put. It fails with [ErrNotFound] when o has no run.
	ListOperations(ctx context.Context, o Owner, f OperationFilter) ([]Operation, error)
}

// ValidateRunUpdate checks that after may replace before, as every [Store] does in
// UpdateRun:
//
//   - the owner's kind and name, and the profile, are unchanged (else [ErrConflict]);
//   - the phase is one of the run's machine, and a changed phase can be reached from the
//     old one (else the error of phase.Path, wrapping phase.ErrInvalidTransition or
//     phase.ErrUnknownPhase), so nothing moves back and nothing leaves a terminal phase
//     but a backup's deletion;
//   - History only grows: the old entries are unchanged (times are compared as instants,
//     with [time.Time.Equal]), and after a phase change the last entry leads to the new
//     phase (else [ErrInvalid]; [Run.SetPhase] keeps it so);
//   - a cancel request, once made, stays as it was (else [ErrConflict]);
//   - the texts the update changes or adds are at most [MaxTextBytes] long (else
//     [ErrInvalid]); texts it leaves as they were are not checked again.
//
// The engine of storage/kv calls it in UpdateRun for every driver. It is exported for a
// Store implemented without that engine: such a store calls it on the stored run and
// the result of update, and writes nothing when it fails, or storage/storetest fails
// the store.
func ValidateRunUpdate(before, after Run) error {
	if after.Owner.Kind != before.Owner.Kind || after.Owner.Name != before.Owner.Name {
		return fmt.Errorf("run %s: update changes the owner to %s: %w", before.Owner, after.Owner, ErrConflict)
	}
	if after.Profile != before.Profile {
		return fmt.Errorf("run %s: update changes the profile from %s to %s: %w", before.Owner, before.Profile, after.Profile, ErrConflict)
	}
	if err := after.validPhase(); err != nil {
		return err
	}
	if err := after.textTooLong(&before); err != nil {
		return err
	}
	if after.Phase != before.Phase {
		if _, err := phase.Path(before.Owner.Kind, before.Phase, after.Phase, before.Profile); err != nil {
			return fmt.Errorf("run %s: %w", before.Owner, err)
		}
	}
	if before.CancelRequested() && (after.Cancel.Reason != before.Cancel.Reason || !after.Cancel.At.Equal(before.Cancel.At)) {
		return fmt.Errorf("run %s: update withdraws or changes its cancel request: %w", before.Owner, ErrConflict)
	}
	if len(after.History) < len(before.History) || !slices.EqualFunc(before.History, after.History[:len(before.History)], Transition.equal) {
		return fmt.Errorf("run %s: update rewrites the phase history: %w", before.Owner, ErrInvalid)
	}
	if after.Phase != before.Phase {
		n := len(after.History)
		if n == len(before.History) || after.History[n-1].To != after.Phase {
			return fmt.Errorf("run %s: phase changed from %s to %s without a history entry (use Run.SetPhase): %w", before.Owner, before.Phase, after.Phase, ErrInvalid)
		}
	}
	return nil
}

// ValidateBatch checks a batch of operations for owner o before anything is written: each
// passes [Operation.Validate], belongs to o (same kind and name), and has an ID no other
// operation of the batch has. The error wraps [ErrInvalid] and names the first offender.
func ValidateBatch(o Owner, ops []Operation) error {
	if err := o.Validate(); err != nil {
		return err
	}
	seen := make(map[string]struct{}, len(ops))
	for i := range ops {
		op := &ops[i]
		if err := op.Validate(); err != nil {
			return fmt.Errorf("batch item %d: %w", i, err)
		}
		if op.Owner.Kind != o.Kind || op.Owner.Name != o.Name {
			return fmt.Errorf("batch item %d: operation %q belongs to %s, not %s: %w", i, op.ID, op.Owner, o, ErrInvalid)
		}
		if _, dup := seen[op.ID]; dup {
			return fmt.Errorf("batch item %d: operation ID %q appears twice: %w", i, op.ID, ErrInvalid)
		}
		seen[op.ID] = struct{}{}
	}
	return nil
}

// ValidateOperationUpdate checks that after may replace the stored before: an operation
// that has finished (Completed or Failed) keeps its phase, so a late writer cannot revive
// it ([ErrConflict]). Like [ValidateRunUpdate], it is called by the engine of storage/kv
// for every driver, and exported for a Store implemented without that engine, which
// calls it in PutOperations for each operation a batch replaces and writes nothing of
// the batch when it fails.
func ValidateOperationUpdate(before, after Operation) error {
	if before.Status.Phase.Finished() && after.Status.Phase != before.Status.Phase {
		return fmt.Errorf("operation %q of %s: finished as %s, cannot become %s: %w",
			before.ID, before.Owner, before.Status.Phase, after.Status.Phase, ErrConflict)
	}
	return nil
}

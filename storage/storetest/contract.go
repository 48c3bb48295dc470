package storetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/itemops/itemops/operations"
)

// testUIDMismatch checks that a run answers only to its own object: every call that
// names an owner whose UID is set and differs from the stored run's fails with
// operations.ErrUIDMismatch (an operations.ErrConflict) and changes nothing, while an
// owner without a UID, or with the run's, is served.
func testUIDMismatch(t *testing.T, s operations.Store) {
	o := backup("b")
	mustCreate(t, s, newRun(o))
	op := newOp(o, "op-1", operations.OperationNew)
	mustPut(t, s, o, []operations.Operation{op})

	stale := o
	stale.UID = "uid-of-a-deleted-object"
	staleOp := op.Clone()
	staleOp.Owner = stale
	calls := map[string]error{
		"GetRun":         second(s.GetRun(bg, stale)),
		"UpdateRun":      second(s.UpdateRun(bg, stale, func(r *operations.Run) error { r.Warnings = 99; return nil })),
		"PutOperations":  s.PutOperations(bg, stale, []operations.Operation{staleOp}),
		"GetOperation":   second(s.GetOperation(bg, stale, op.ID)),
		"ListOperations": second(s.ListOperations(bg, stale, operations.OperationFilter{})),
		"DeleteRun":      s.DeleteRun(bg, stale),
		"CreateRun":      s.CreateRun(bg, newRun(stale)),
	}
	for name, err := range calls {
		if !errors.Is(err, operations.ErrUIDMismatch) || !errors.Is(err, operations.ErrConflict) {
			t.Errorf("%s with another UID = %v, want ErrUIDMismatch (and ErrConflict)", name, err)
		}
	}
	wantRun(t, s, newRun(o))
	wantAllOps(t, s, o, []operations.Operation{op})

	anyUID := o
	anyUID.UID = ""
	_, err := s.UpdateRun(bg, anyUID, func(r *operations.Run) error { r.Warnings = 1; return nil })
	require.NoError(t, err, "UpdateRun without a UID")
	require.NoError(t, s.DeleteRun(bg, o), "DeleteRun with the run's UID")
}

// testNilUpdate checks that UpdateRun refuses a nil update function.
func testNilUpdate(t *testing.T, s operations.Store) {
	o := backup("b")
	mustCreate(t, s, newRun(o))
	_, err := s.UpdateRun(bg, o, nil)
	require.ErrorIs(t, err, operations.ErrInvalid)
	wantRun(t, s, newRun(o))
}

// testUpdateMayUseTheStore checks the rule of the contract on update functions: they
// may read the Store and write other records, the operations of their own run too,
// without deadlock, and the update still applies.
func testUpdateMayUseTheStore(t *testing.T, s operations.Store) {
	o, other := backup("b"), restore("r")
	mustCreate(t, s, newRun(o), newRun(other))
	// A store whose update functions deadlock on the Store would hang here; the
	// context ends the wait with a clear failure instead.
	ctx, cancel := context.WithTimeout(bg, time.Minute)
	defer cancel()
	got, err := s.UpdateRun(ctx, o, func(r *operations.Run) error {
		if _, err := s.GetRun(ctx, o); err != nil {
			return err
		}
		if _, err := s.ListRuns(ctx, operations.RunFilter{}); err != nil {
			return err
		}
		if err := s.PutOperations(ctx, o, []operations.Operation{newOp(o, "op-1", operations.OperationNew)}); err != nil {
			return err
		}
		if _, err := s.UpdateRun(ctx, other, func(r *operations.Run) error { r.Warnings = 2; return nil }); err != nil {
			return err
		}
		ops, err := s.ListOperations(ctx, o, operations.OperationFilter{})
		if err != nil {
			return err
		}
		r.ItemsTotal = len(ops)
		return nil
	})
	require.NoError(t, err, "UpdateRun whose update function uses the Store")
	require.Equal(t, 1, got.ItemsTotal)
	wantRun(t, s, got)
}

// testCreateRunWithOperations checks the optional operations.RunStarter ability, when
// the store has it: the run and its first batch appear together, an existing run is
// refused, and a refused batch creates no run.
func testCreateRunWithOperations(t *testing.T, s operations.Store) {
	rs, ok := s.(operations.RunStarter)
	if !ok {
		t.Skip("the store is not an operations.RunStarter")
	}
	o := backup("b")
	ops := newOps(o, "op-", 300, operations.OperationNew)
	require.NoError(t, rs.CreateRunWithOperations(bg, newRun(o), ops))
	wantRun(t, s, newRun(o))
	wantAllOps(t, s, o, ops)

	err := rs.CreateRunWithOperations(bg, newRun(o), newOps(o, "again-", 2, operations.OperationNew))
	require.ErrorIs(t, err, operations.ErrExists)
	wantAllOps(t, s, o, ops)

	bad := newOps(restore("r"), "op-", 3, operations.OperationNew)
	bad[2].ID = ""
	err = rs.CreateRunWithOperations(bg, newRun(restore("r")), bad)
	require.ErrorIs(t, err, operations.ErrInvalid)
	_, err = s.GetRun(bg, restore("r"))
	require.ErrorIs(t, err, operations.ErrNotFound, "a refused batch created its run")
}

func second[T any](_ T, err error) error { return err }

package storetest

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/phase"
)

func scaleChecks() []check {
	return []check{
		{"Batch100000", testBatch100000},
	}
}

// testBatch100000 puts 100,000 operations in one batch (one in a hundred unfinished),
// lists them back in order, counts them, spot-checks them, and finishes the unfinished
// ones in a second batch.
func testBatch100000(t *testing.T, s operations.Store) {
	const (
		n     = 100_000
		every = 100 // one operation in every is InProgress, the others Completed
	)
	o := backup("big")
	mustCreate(t, s, runIn(t, o, phase.WaitingForPluginOperations, phase.Profile{}))

	opAt := func(i int) operations.Operation {
		p := operations.OperationCompleted
		if i%every == 0 {
			p = operations.OperationInProgress
		}
		op := newOp(o, fmt.Sprintf("op-%06d", i), p)
		op.Status.NCompleted = int64(i)
		return op
	}
	ops := make([]operations.Operation, n)
	for i := range ops {
		ops[i] = opAt(i)
	}
	mustPut(t, s, o, ops)
	ops = nil // the store must not need the caller's slice

	got, err := s.ListOperations(bg, o, operations.OperationFilter{})
	require.NoError(t, err)
	require.Len(t, got, n, "ListOperations after a batch of %d", n)
	for i := range got {
		if want := fmt.Sprintf("op-%06d", i); got[i].ID != want || got[i].Status.NCompleted != int64(i) {
			t.Fatalf("operation %d listed is %q (NCompleted %d), want %q (NCompleted %d)", i, got[i].ID, got[i].Status.NCompleted, want, i)
		}
	}
	for _, i := range []int{0, 1, 99, 100, 4_321, 50_000, 77_777, n - 1} {
		want := opAt(i)
		if d := diff(want, got[i]); d != "" {
			t.Errorf("ListOperations()[%d] (-want +got):\n%s", i, d)
		}
		one, err := s.GetOperation(bg, o, want.ID)
		require.NoError(t, err, "GetOperation(%q)", want.ID)
		if d := diff(want, one); d != "" {
			t.Errorf("GetOperation(%q) (-want +got):\n%s", want.ID, d)
		}
	}

	unfinished, err := s.ListOperations(bg, o, phases(operations.OperationNew, operations.OperationInProgress))
	require.NoError(t, err)
	require.Len(t, unfinished, n/every, "unfinished operations")
	for k, op := range unfinished {
		if want := fmt.Sprintf("op-%06d", k*every); op.ID != want {
			t.Fatalf("unfinished operation %d is %q, want %q", k, op.ID, want)
		}
	}

	// Finish them in one batch; the run then has nothing left to wait for.
	for i := range unfinished {
		unfinished[i].Status.Phase = operations.OperationCompleted
	}
	mustPut(t, s, o, unfinished)
	wantOps(t, s, o, phases(operations.OperationNew, operations.OperationInProgress), nil)
	failed, err := s.ListOperations(bg, o, phases(operations.OperationFailed))
	require.NoError(t, err)
	require.Empty(t, failed)
	completed, err := s.ListOperations(bg, o, phases(operations.OperationCompleted))
	require.NoError(t, err)
	require.Len(t, completed, n, "completed operations after the second batch")
	require.Equal(t, "op-000100", completed[100].ID, "a replaced operation keeps its place")
}

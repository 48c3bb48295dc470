package storetest

import (
	"fmt"
	"testing"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/phase"
)

func scaleChecks() []check {
	return []check{
		{"LargeBatch", testLargeBatch},
	}
}

// testLargeBatch puts 100,000 operations in one batch (2,000 with -short), one in a
// hundred unfinished, lists them back in order, counts them, spot-checks them, and
// finishes the unfinished ones in a second batch.
func testLargeBatch(t tb, s operations.Store) {
	const every = 100 // one operation in every is InProgress, the others Completed
	n := 100_000
	if testing.Short() {
		n = 2_000
	}
	t.Logf("a batch of %d operations", n)
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
	noError(t, err, "ListOperations(%s)", o)
	wantEqual(t, n, len(got), "number of operations ListOperations(%s) returned after a batch of %d", o, n)
	for i := range got {
		if want := fmt.Sprintf("op-%06d", i); got[i].ID != want || got[i].Status.NCompleted != int64(i) {
			t.Fatalf("operation %d listed is %q (NCompleted %d), want %q (NCompleted %d)", i, got[i].ID, got[i].Status.NCompleted, want, i)
		}
	}
	for _, i := range []int{0, 1, 99, 100, 1_234, n / 2, n*7/9 + 7, n - 1} {
		want := opAt(i)
		if d := diff(want, got[i]); d != "" {
			t.Errorf("ListOperations()[%d] (-want +got):\n%s", i, d)
		}
		one, err := s.GetOperation(bg, o, want.ID)
		noError(t, err, "GetOperation(%q)", want.ID)
		if d := diff(want, one); d != "" {
			t.Errorf("GetOperation(%q) (-want +got):\n%s", want.ID, d)
		}
	}

	unfinished, err := s.ListOperations(bg, o, phases(operations.OperationNew, operations.OperationInProgress))
	noError(t, err, "ListOperations(%s) of the unfinished phases", o)
	wantEqual(t, n/every, len(unfinished), "number of unfinished operations ListOperations(%s) returned", o)
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
	noError(t, err, "ListOperations(%s) of phase Failed", o)
	wantEqual(t, 0, len(failed), "number of failed operations ListOperations(%s) returned", o)
	completed, err := s.ListOperations(bg, o, phases(operations.OperationCompleted))
	noError(t, err, "ListOperations(%s) of phase Completed", o)
	wantEqual(t, n, len(completed), "number of completed operations ListOperations(%s) returned after the second batch", o)
	wantEqual(t, "op-000100", completed[100].ID, "a replaced operation keeps its place")
}

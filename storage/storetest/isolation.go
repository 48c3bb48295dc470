package storetest

import (
	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/phase"
)

func isolationChecks() []check {
	return []check{
		{"RunAfterCreate", testIsolationRunAfterCreate},
		{"RunAfterGet", testIsolationRunAfterGet},
		{"RunAfterList", testIsolationRunAfterList},
		{"RunInsideUpdate", testIsolationRunInsideUpdate},
		{"RunAfterUpdate", testIsolationRunAfterUpdate},
		{"OperationsAfterPut", testIsolationOperationsAfterPut},
		{"OperationAfterGet", testIsolationOperationAfterGet},
		{"OperationsAfterList", testIsolationOperationsAfterList},
	}
}

// scribble changes every field of r a caller could reach, the history in place included.
func scribble(r *operations.Run) {
	r.Owner.UID = "scribbled"
	r.Errors += 100
	r.FailureReason = "scribbled"
	r.Created = at(999)
	for i := range r.History {
		r.History[i].Reason = "scribbled"
		r.History[i].To = phase.Failed
	}
	r.History = append(r.History, operations.Transition{Reason: "appended"})
}

// scribbleOp changes every field of op a caller could reach, PostOperationItems in place
// included.
func scribbleOp(op *operations.Operation) {
	op.Action = "scribbled"
	op.Status.Phase = operations.OperationFailed
	op.Status.NCompleted = -1
	op.Status.Updated = at(999)
	for i := range op.PostOperationItems {
		op.PostOperationItems[i].Name = "scribbled"
	}
	op.PostOperationItems = append(op.PostOperationItems, operations.ResourceIdentifier{Name: "appended"})
}

func testIsolationRunAfterCreate(t tb, s operations.Store) {
	r := fullRun(backup("b"))
	want := r.Clone()
	mustCreate(t, s, r)
	scribble(&r)
	wantRun(t, s, want)
}

func testIsolationRunAfterGet(t tb, s operations.Store) {
	want := fullRun(backup("b"))
	mustCreate(t, s, want.Clone())
	got, err := s.GetRun(bg, want.Owner)
	noError(t, err, "GetRun(%s)", want.Owner)
	scribble(&got)
	wantRun(t, s, want)
}

func testIsolationRunAfterList(t tb, s operations.Store) {
	want := []operations.Run{fullRun(backup("b")), fullRun(restore("r"))}
	mustCreate(t, s, want[0].Clone(), want[1].Clone())
	for _, f := range []operations.RunFilter{{}, {Phases: []phase.Phase{want[0].Phase}}} {
		got, err := s.ListRuns(bg, f)
		noError(t, err, "ListRuns(%+v)", f)
		for i := range got {
			scribble(&got[i])
		}
		wantRuns(t, s, operations.RunFilter{}, want)
	}
}

func testIsolationRunInsideUpdate(t tb, s operations.Store) {
	o := backup("b")
	mustCreate(t, s, fullRun(o))
	var kept *operations.Run
	var history []operations.Transition
	want, err := s.UpdateRun(bg, o, func(r *operations.Run) error {
		r.Warnings++
		kept, history = r, r.History
		return nil
	})
	noError(t, err, "UpdateRun(%s)", o)
	wantEqual(t, fullRun(o).Warnings+1, want.Warnings, "UpdateRun result")
	// The update function kept its pointer and the history slice; writing through them
	// afterwards must not reach the store.
	for i := range history {
		history[i].Reason = "scribbled through a kept slice"
	}
	scribble(kept)
	wantRun(t, s, want)
}

func testIsolationRunAfterUpdate(t tb, s operations.Store) {
	o := restore("r")
	mustCreate(t, s, fullRun(o))
	got, err := s.UpdateRun(bg, o, func(r *operations.Run) error { r.Errors++; return nil })
	noError(t, err, "UpdateRun(%s)", o)
	want := got.Clone()
	scribble(&got)
	wantRun(t, s, want)
}

func testIsolationOperationsAfterPut(t tb, s operations.Store) {
	o := backup("b")
	mustCreate(t, s, newRun(o))
	ops := newOps(o, "op-", 3, operations.OperationInProgress)
	want := cloneOps(ops)
	mustPut(t, s, o, ops)
	for i := range ops {
		scribbleOp(&ops[i])
	}
	ops[0] = newOp(o, "replaced-in-the-slice", operations.OperationNew)
	wantAllOps(t, s, o, want)
}

func testIsolationOperationAfterGet(t tb, s operations.Store) {
	o := backup("b")
	mustCreate(t, s, newRun(o))
	want := newOps(o, "op-", 2, operations.OperationNew)
	mustPut(t, s, o, cloneOps(want))
	got, err := s.GetOperation(bg, o, want[1].ID)
	noError(t, err, "GetOperation(%s, %q)", o, want[1].ID)
	if len(got.PostOperationItems) == 0 {
		t.Fatalf("GetOperation(%s, %q) returned no post-operation items, want those it was put with", o, want[1].ID)
	}
	scribbleOp(&got)
	wantAllOps(t, s, o, want)
}

func testIsolationOperationsAfterList(t tb, s operations.Store) {
	o := backup("b")
	mustCreate(t, s, newRun(o))
	want := append(newOps(o, "new-", 2, operations.OperationNew), newOps(o, "done-", 2, operations.OperationCompleted)...)
	mustPut(t, s, o, cloneOps(want))
	for _, f := range []operations.OperationFilter{{}, phases(operations.OperationNew, operations.OperationInProgress), phases(operations.OperationCompleted)} {
		got, err := s.ListOperations(bg, o, f)
		noError(t, err, "ListOperations(%s, %+v)", o, f)
		if len(got) == 0 {
			t.Fatalf("ListOperations(%s, %+v) returned no operations, want some", o, f)
		}
		for i := range got {
			scribbleOp(&got[i])
		}
		wantAllOps(t, s, o, want)
	}
}

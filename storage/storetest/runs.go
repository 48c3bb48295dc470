package storetest

import (
	"errors"
	"fmt"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/phase"
)

func runChecks(cfg config) []check {
	start := check{"AtomicStart", testAtomicStart}
	if cfg.withoutRunStarter {
		start = check{"StartWithoutRunStarter", testStartWithoutRunStarter}
	}
	return []check{
		{"CreateAndGet", testCreateAndGet},
		{"UIDMismatch", testUIDMismatch},
		{"NilUpdate", testNilUpdate},
		{"UpdateHoldsBackNoOtherCall", testUpdateHoldsBackNoOtherCall},
		start,
		{"StartRunOnce", testStartRunOnce},
		{"CancelRequest", testCancelRequest},
		{"CreateExisting", testCreateExisting},
		{"SameNameBothKinds", testSameNameBothKinds},
		{"CreateInvalid", testCreateInvalid},
		{"Limits", testLimits},
		{"GetMissing", testGetMissing},
		{"Update", testUpdate},
		{"UpdateAllowedPhaseChanges", testUpdateAllowedPhaseChanges},
		{"UpdateMissing", testUpdateMissing},
		{"UpdateFuncError", testUpdateFuncError},
		{"UpdateRefused", testUpdateRefused},
		{"TerminalStaysTerminal", testTerminalStaysTerminal},
		{"Delete", testDelete},
		{"DeleteMissing", testDeleteMissing},
		{"ListEmpty", testListEmpty},
		{"ListOrder", testListOrder},
		{"ListFilter", testListFilter},
		{"ListFollowsUpdatesAndDeletes", testListFollowsUpdatesAndDeletes},
		{"OwnKinds", testOwnKinds},
	}
}

func testCreateAndGet(t tb, s operations.Store) {
	for _, o := range []operations.Owner{backup("b-1"), restore("r-1")} {
		want := fullRun(o)
		mustCreate(t, s, fullRun(o))
		wantRun(t, s, want)

		// An owner without a UID finds the run; one with another UID is refused.
		anyUID := o
		anyUID.UID = ""
		got, err := s.GetRun(bg, anyUID)
		noError(t, err, "GetRun(%s) without a UID", o)
		if d := diff(want, got); d != "" {
			t.Errorf("GetRun(%s) without a UID (-want +got):\n%s", o, d)
		}
		other := o
		other.UID = "some-other-uid"
		_, err = s.GetRun(bg, other)
		wantError(t, err, operations.ErrUIDMismatch, "GetRun(%s) with another UID", o)
		wantError(t, err, operations.ErrConflict, "GetRun(%s) with another UID", o)
	}
}

func testCreateExisting(t tb, s operations.Store) {
	first := newRun(backup("b"))
	mustCreate(t, s, first)

	second := runIn(t, backup("b"), phase.InProgress, phase.Profile{})
	err := s.CreateRun(bg, second)
	wantError(t, err, operations.ErrExists, "second CreateRun(%s)", second.Owner)

	// A run of another object of the same name (a deleted and re-created one) is refused
	// with ErrUIDMismatch, not ErrExists: the caller must not take the stale run as its own.
	second.Owner.UID = "another-uid"
	err = s.CreateRun(bg, second)
	wantError(t, err, operations.ErrUIDMismatch, "CreateRun(%s) with another UID", second.Owner)
	if errors.Is(err, operations.ErrExists) {
		t.Fatalf("CreateRun(%s) with another UID returned the error %q, which wraps operations.ErrExists: the caller would take the stale run as its own", second.Owner, err)
	}
	wantRun(t, s, first)
}

func testSameNameBothKinds(t tb, s operations.Store) {
	b := newRun(backup("x"))
	r := runIn(t, restore("x"), phase.Completed, phase.Profile{})
	mustCreate(t, s, b, r)
	wantRun(t, s, b)
	wantRun(t, s, r)

	noError(t, s.DeleteRun(bg, backup("x")), "DeleteRun(Backup/x)")
	_, err := s.GetRun(bg, backup("x"))
	wantError(t, err, operations.ErrNotFound, "GetRun(Backup/x) after deleting it")
	wantRun(t, s, r)
}

func testCreateInvalid(t tb, s operations.Store) {
	tests := []struct {
		name    string
		run     operations.Run
		wantErr error
	}{
		{"empty name", newRun(operations.Owner{Kind: phase.Backup}), operations.ErrInvalid},
		{"empty kind", newRun(operations.Owner{Name: "x"}), operations.ErrInvalid},
		{"unknown kind", newRun(operations.Owner{Kind: "Schedule", Name: "x"}), operations.ErrInvalid},
		{"empty phase", operations.Run{Owner: backup("x")}, phase.ErrUnknownPhase},
		{"unknown phase", operations.Run{Owner: backup("x"), Phase: "Running"}, phase.ErrUnknownPhase},
		{"Queued without the queue profile", operations.Run{Owner: backup("x"), Phase: phase.Queued}, phase.ErrUnknownPhase},
		{"restore in Deleting", operations.Run{Owner: restore("x"), Phase: phase.Deleting}, phase.ErrUnknownPhase},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t tb) {
			err := s.CreateRun(bg, tc.run)
			wantError(t, err, tc.wantErr, "CreateRun(%+v)", tc.run)
		})
	}
	wantRuns(t, s, operations.RunFilter{}, nil)
}

func testGetMissing(t tb, s operations.Store) {
	mustCreate(t, s, newRun(backup("b")))
	for _, o := range []operations.Owner{backup("c"), restore("b"), {Kind: phase.Backup, Name: "B"}, {}} {
		_, err := s.GetRun(bg, o)
		wantError(t, err, operations.ErrNotFound, "GetRun(%s)", o)
	}
}

func testUpdate(t tb, s operations.Store) {
	o := backup("b")
	mustCreate(t, s, newRun(o))

	want := newRun(o)
	noError(t, want.SetPhase(phase.InProgress, "started", at(1)), "fixture: SetPhase(InProgress)")
	want.Errors, want.Warnings, want.ItemsTotal, want.ItemsDone = 1, 2, 30, 4
	want.FailureReason = "reason"
	want.Owner.UID = "new-uid" // an update may change the UID; later calls must name it

	got, err := s.UpdateRun(bg, o, func(r *operations.Run) error {
		if err := r.SetPhase(phase.InProgress, "started", at(1)); err != nil {
			return err
		}
		r.Errors, r.Warnings, r.ItemsTotal, r.ItemsDone = 1, 2, 30, 4
		r.FailureReason = "reason"
		r.Owner.UID = "new-uid"
		return nil
	})
	noError(t, err, "UpdateRun(%s)", o)
	if d := diff(want, got); d != "" {
		t.Errorf("UpdateRun(%s) returned (-want +got):\n%s", o, d)
	}
	wantRun(t, s, want)

	// The old UID is refused now, without calling the update function.
	_, err = s.UpdateRun(bg, o, func(r *operations.Run) error {
		return fmt.Errorf("update called for a run of another UID")
	})
	wantError(t, err, operations.ErrUIDMismatch, "UpdateRun(%s) with the old UID", o)

	// A second update, under the new UID, starts from the first one's result.
	o = want.Owner
	got, err = s.UpdateRun(bg, o, func(r *operations.Run) error {
		if r.Errors != 1 || r.Phase != phase.InProgress || len(r.History) != 1 {
			return fmt.Errorf("update got %+v, want the stored run", *r)
		}
		r.Errors++
		return r.SetPhase(phase.WaitingForPluginOperationsPartiallyFailed, "1 operation pending", at(2))
	})
	noError(t, err, "second UpdateRun(%s)", o)
	want.Errors = 2
	noError(t, want.SetPhase(phase.WaitingForPluginOperationsPartiallyFailed, "1 operation pending", at(2)), "fixture: SetPhase(WaitingForPluginOperationsPartiallyFailed)")
	if d := diff(want, got); d != "" {
		t.Errorf("second UpdateRun(%s) returned (-want +got):\n%s", o, d)
	}
	wantRun(t, s, want)
}

func testUpdateAllowedPhaseChanges(t tb, s operations.Store) {
	tests := []struct {
		name    string
		start   operations.Run
		to      phase.Phase
		history int // entries added
	}{
		{"backup New to Completed through Finalizing", newRun(backup("a")), phase.Completed, 3},
		{"a completed backup is deleted", runIn(t, backup("b"), phase.Completed, phase.Profile{}), phase.Deleting, 1},
		{"a failed backup is deleted", runIn(t, backup("c"), phase.Failed, phase.Profile{}), phase.Deleting, 1},
		{"queued backup New to InProgress", func() operations.Run {
			r := newRun(backup("d"))
			r.Profile = phase.Profile{Queue: true}
			return r
		}(), phase.InProgress, 3},
		{"restore with finalizing through Finalizing", runIn(t, restore("e"), phase.InProgress, phase.Profile{RestoreFinalizing: true}), phase.PartiallyFailed, 2},
		{"restore New to Failed, cancelled before it starts", newRun(restore("f")), phase.Failed, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t tb) {
			mustCreate(t, s, tc.start)
			want := tc.start.Clone()
			noError(t, want.SetPhase(tc.to, "moved", at(5)), "fixture: SetPhase(%s)", tc.to)
			wantEqual(t, len(tc.start.History)+tc.history, len(want.History), "fixture: history entries")

			got, err := s.UpdateRun(bg, tc.start.Owner, func(r *operations.Run) error {
				return r.SetPhase(tc.to, "moved", at(5))
			})
			noError(t, err, "UpdateRun(%s) to %s", tc.start.Owner, tc.to)
			if d := diff(want, got); d != "" {
				t.Errorf("UpdateRun(%s) to %s returned (-want +got):\n%s", tc.start.Owner, tc.to, d)
			}
			wantRun(t, s, want)
		})
	}
}

func testUpdateMissing(t tb, s operations.Store) {
	mustCreate(t, s, newRun(backup("b")))
	for _, o := range []operations.Owner{backup("c"), restore("b")} {
		called := false
		_, err := s.UpdateRun(bg, o, func(r *operations.Run) error {
			called = true
			return nil
		})
		wantError(t, err, operations.ErrNotFound, "UpdateRun(%s)", o)
		if called {
			t.Errorf("UpdateRun(%s) of a missing run called the update function", o)
		}
	}
	wantRuns(t, s, operations.RunFilter{}, []operations.Run{newRun(backup("b"))})
}

// errUpdate is what the update functions of the suite fail with.
var errUpdate = errors.New("storetest: update refused by the caller")

func testUpdateFuncError(t tb, s operations.Store) {
	o := restore("r")
	start := runIn(t, o, phase.InProgress, phase.Profile{})
	mustCreate(t, s, start)

	_, err := s.UpdateRun(bg, o, func(r *operations.Run) error {
		// Change everything, then refuse: none of it may be written.
		r.Errors = 99
		r.FailureReason = "half-done"
		r.History[0].Reason = "scribbled"
		if err := r.SetPhase(phase.Failed, "x", at(9)); err != nil {
			return err
		}
		return fmt.Errorf("wrapped by the caller: %w", errUpdate)
	})
	wantError(t, err, errUpdate, "UpdateRun(%s) must return the update function's error", o)
	wantRun(t, s, start)
}

func testUpdateRefused(t tb, s operations.Store) {
	tests := []struct {
		name    string
		start   operations.Run
		update  func(r *operations.Run) error
		wantErr error
	}{
		{
			name:    "a waiting run moved back to InProgress",
			start:   runIn(t, backup("a"), phase.WaitingForPluginOperations, phase.Profile{}),
			update:  func(r *operations.Run) error { forcePhase(r, phase.InProgress); return nil },
			wantErr: phase.ErrInvalidTransition,
		},
		{
			name:    "a finalizing backup moved back to waiting",
			start:   runIn(t, backup("b"), phase.Finalizing, phase.Profile{}),
			update:  func(r *operations.Run) error { forcePhase(r, phase.WaitingForPluginOperations); return nil },
			wantErr: phase.ErrInvalidTransition,
		},
		{
			name:    "a phase change without a history entry",
			start:   runIn(t, backup("c"), phase.InProgress, phase.Profile{}),
			update:  func(r *operations.Run) error { r.Phase = phase.Failed; return nil },
			wantErr: operations.ErrInvalid,
		},
		{
			name:  "a phase change whose history leads elsewhere",
			start: runIn(t, backup("d"), phase.InProgress, phase.Profile{}),
			update: func(r *operations.Run) error {
				r.History = append(r.History, operations.Transition{From: phase.InProgress, To: phase.Finalizing, Time: at(3)})
				r.Phase = phase.Failed
				return nil
			},
			wantErr: operations.ErrInvalid,
		},
		{
			name:    "the history rewritten",
			start:   runIn(t, backup("e"), phase.InProgress, phase.Profile{}),
			update:  func(r *operations.Run) error { r.History[0].Reason = "rewritten"; return nil },
			wantErr: operations.ErrInvalid,
		},
		{
			name:    "the history dropped",
			start:   runIn(t, backup("f"), phase.InProgress, phase.Profile{}),
			update:  func(r *operations.Run) error { r.History = nil; return nil },
			wantErr: operations.ErrInvalid,
		},
		{
			name:    "the owner renamed",
			start:   newRun(backup("g")),
			update:  func(r *operations.Run) error { r.Owner.Name = "g2"; return nil },
			wantErr: operations.ErrConflict,
		},
		{
			name:    "the kind changed",
			start:   newRun(backup("h")),
			update:  func(r *operations.Run) error { r.Owner.Kind = phase.Restore; return nil },
			wantErr: operations.ErrConflict,
		},
		{
			name:    "the profile changed",
			start:   newRun(backup("i")),
			update:  func(r *operations.Run) error { r.Profile.Queue = true; return nil },
			wantErr: operations.ErrConflict,
		},
		{
			name:    "an unknown phase",
			start:   newRun(restore("j")),
			update:  func(r *operations.Run) error { forcePhase(r, "Running"); return nil },
			wantErr: phase.ErrUnknownPhase,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t tb) {
			mustCreate(t, s, tc.start)
			_, err := s.UpdateRun(bg, tc.start.Owner, tc.update)
			wantError(t, err, tc.wantErr, "UpdateRun(%s)", tc.start.Owner)
			wantRun(t, s, tc.start)
		})
	}
	// The renamed and re-kinded updates must not have created runs either.
	for _, o := range []operations.Owner{backup("g2"), restore("h")} {
		_, err := s.GetRun(bg, o)
		wantError(t, err, operations.ErrNotFound, "GetRun(%s) after a refused rename", o)
	}
}

// forcePhase sets r's phase to p with a history entry that leads there, as a careless
// writer might, so that only the store's transition check can refuse it.
func forcePhase(r *operations.Run, p phase.Phase) {
	r.History = append(r.History, operations.Transition{From: r.Phase, To: p, Time: at(10), Reason: "forced"})
	r.Phase = p
	r.Updated = at(10)
}

func testTerminalStaysTerminal(t tb, s operations.Store) {
	for _, kind := range []phase.Kind{phase.Backup, phase.Restore} {
		for _, end := range []phase.Phase{phase.Completed, phase.PartiallyFailed, phase.Failed, phase.FailedValidation} {
			for _, back := range []phase.Phase{phase.New, phase.InProgress, phase.WaitingForPluginOperations} {
				t.Run(fmt.Sprintf("%s %s to %s", kind, end, back), func(t tb) {
					o := operations.Owner{Kind: kind, Name: fmt.Sprintf("%s-%s", end, back)}
					start := runIn(t, o, end, phase.Profile{})
					mustCreate(t, s, start)

					// Forged, so that the store's own check is what refuses it.
					_, err := s.UpdateRun(bg, o, func(r *operations.Run) error {
						forcePhase(r, back)
						r.Errors++
						return nil
					})
					wantError(t, err, phase.ErrInvalidTransition, "UpdateRun(%s) from %s to %s", o, end, back)
					wantRun(t, s, start)

					// Through SetPhase, whose own refusal the store returns.
					_, err = s.UpdateRun(bg, o, func(r *operations.Run) error {
						r.Errors++
						return r.SetPhase(back, "late writer", at(20))
					})
					wantError(t, err, phase.ErrInvalidTransition, "UpdateRun(%s) with SetPhase(%s)", o, back)
					wantRun(t, s, start)
				})
			}
		}
	}
}

func testDelete(t tb, s operations.Store) {
	b, sibling := backup("b"), backup("sibling")
	mustCreate(t, s, runIn(t, b, phase.WaitingForPluginOperations, phase.Profile{}), newRun(sibling))
	mustPut(t, s, b, newOps(b, "op-", 3, operations.OperationInProgress))
	siblingOps := newOps(sibling, "op-", 2, operations.OperationNew)
	mustPut(t, s, sibling, cloneOps(siblingOps))

	noError(t, s.DeleteRun(bg, b), "DeleteRun(%s)", b)

	_, err := s.GetRun(bg, b)
	wantError(t, err, operations.ErrNotFound, "GetRun(%s) after DeleteRun", b)
	_, err = s.GetOperation(bg, b, "op-0000")
	wantError(t, err, operations.ErrNotFound, "GetOperation(%s) after DeleteRun", b)
	_, err = s.ListOperations(bg, b, operations.OperationFilter{})
	wantError(t, err, operations.ErrNotFound, "ListOperations(%s) after DeleteRun", b)
	err = s.PutOperations(bg, b, newOps(b, "late-", 1, operations.OperationNew))
	wantError(t, err, operations.ErrNotFound, "PutOperations(%s) after DeleteRun", b)
	wantError(t, s.DeleteRun(bg, b), operations.ErrNotFound, "second DeleteRun(%s)", b)

	// The sibling is untouched.
	wantRun(t, s, newRun(sibling))
	wantAllOps(t, s, sibling, siblingOps)

	// A run created again under the name starts without operations.
	mustCreate(t, s, newRun(b))
	wantOps(t, s, b, operations.OperationFilter{}, nil)
	wantOps(t, s, b, phases(operations.OperationInProgress), nil)
	_, err = s.GetOperation(bg, b, "op-0000")
	wantError(t, err, operations.ErrNotFound, "GetOperation(%s) of a re-created run", b)
}

func testDeleteMissing(t tb, s operations.Store) {
	mustCreate(t, s, newRun(backup("b")))
	for _, o := range []operations.Owner{backup("c"), restore("b")} {
		wantError(t, s.DeleteRun(bg, o), operations.ErrNotFound, "DeleteRun(%s)", o)
	}
	wantRun(t, s, newRun(backup("b")))
}

func testListEmpty(t tb, s operations.Store) {
	for _, f := range []operations.RunFilter{{}, {Kind: phase.Restore}, {Phases: []phase.Phase{phase.New}}} {
		wantRuns(t, s, f, nil)
	}
}

func testListOrder(t tb, s operations.Store) {
	// Names in byte order: upper case before lower, "b10" before "b2".
	names := []string{"b2", "a", "b10", "B", "b-1", "b", "zz", "a.b"}
	var backups, restores []operations.Run
	for _, n := range []string{"B", "a", "a.b", "b", "b-1", "b10", "b2", "zz"} {
		backups = append(backups, newRun(backup(n)))
		restores = append(restores, newRun(restore(n)))
	}
	// Created interleaved, restores first, names shuffled.
	for _, n := range names {
		mustCreate(t, s, newRun(restore(n)), newRun(backup(n)))
	}
	wantRuns(t, s, operations.RunFilter{}, append(append([]operations.Run(nil), backups...), restores...))
	wantRuns(t, s, operations.RunFilter{Kind: phase.Restore}, restores)
	wantRuns(t, s, operations.RunFilter{Phases: []phase.Phase{phase.New}}, append(append([]operations.Run(nil), backups...), restores...))
}

func testListFilter(t tb, s operations.Store) {
	var (
		bNew      = newRun(backup("b-new"))
		bRunning  = runIn(t, backup("b-running"), phase.InProgress, phase.Profile{})
		bWaiting  = runIn(t, backup("b-waiting"), phase.WaitingForPluginOperations, phase.Profile{})
		bWaitingP = runIn(t, backup("b-waiting-pf"), phase.WaitingForPluginOperationsPartiallyFailed, phase.Profile{})
		bDone     = runIn(t, backup("b-done"), phase.Completed, phase.Profile{})
		bQueued   = runIn(t, backup("b-queued"), phase.Queued, phase.Profile{Queue: true})
		rWaiting  = runIn(t, restore("r-waiting"), phase.WaitingForPluginOperations, phase.Profile{})
		rFailed   = runIn(t, restore("r-failed"), phase.Failed, phase.Profile{})
		rFinal    = runIn(t, restore("r-final"), phase.Finalizing, phase.Profile{RestoreFinalizing: true})
	)
	mustCreate(t, s, rFinal, bWaitingP, bDone, rFailed, bNew, bQueued, rWaiting, bRunning, bWaiting)
	waitingPhases := []phase.Phase{phase.WaitingForPluginOperations, phase.WaitingForPluginOperationsPartiallyFailed}
	all := []operations.Run{bDone, bNew, bQueued, bRunning, bWaiting, bWaitingP, rFailed, rFinal, rWaiting}

	tests := []struct {
		name   string
		filter operations.RunFilter
		want   []operations.Run
	}{
		{"zero filter", operations.RunFilter{}, all},
		{"empty non-nil phases", operations.RunFilter{Phases: []phase.Phase{}}, all},
		{"backups", operations.RunFilter{Kind: phase.Backup}, []operations.Run{bDone, bNew, bQueued, bRunning, bWaiting, bWaitingP}},
		{"restores", operations.RunFilter{Kind: phase.Restore}, []operations.Run{rFailed, rFinal, rWaiting}},
		{"waiting, both kinds", operations.RunFilter{Phases: waitingPhases}, []operations.Run{bWaiting, bWaitingP, rWaiting}},
		{"waiting backups", operations.RunFilter{Kind: phase.Backup, Phases: waitingPhases}, []operations.Run{bWaiting, bWaitingP}},
		{"waiting restores", operations.RunFilter{Kind: phase.Restore, Phases: waitingPhases}, []operations.Run{rWaiting}},
		{"a phase listed twice", operations.RunFilter{Phases: []phase.Phase{phase.Failed, phase.Completed, phase.Failed}}, []operations.Run{bDone, rFailed}},
		{"Queued", operations.RunFilter{Phases: []phase.Phase{phase.Queued}}, []operations.Run{bQueued}},
		{"Finalizing restores", operations.RunFilter{Kind: phase.Restore, Phases: []phase.Phase{phase.Finalizing}}, []operations.Run{rFinal}},
		{"a phase no run is in", operations.RunFilter{Phases: []phase.Phase{phase.Deleting}}, nil},
		{"a phase no run of the kind is in", operations.RunFilter{Kind: phase.Restore, Phases: []phase.Phase{phase.New}}, nil},
		{"an unknown phase", operations.RunFilter{Phases: []phase.Phase{"Running"}}, nil},
		{"an unknown kind", operations.RunFilter{Kind: "Schedule"}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t tb) {
			wantRuns(t, s, tc.filter, tc.want)
		})
	}
}

func testListFollowsUpdatesAndDeletes(t tb, s operations.Store) {
	waitingPhases := operations.RunFilter{Phases: []phase.Phase{phase.WaitingForPluginOperations, phase.WaitingForPluginOperationsPartiallyFailed}}
	var runs []operations.Run
	for i := range 6 {
		r := runIn(t, restore(fmt.Sprintf("r%d", i)), phase.WaitingForPluginOperations, phase.Profile{})
		runs = append(runs, r)
		mustCreate(t, s, r)
	}
	wantRuns(t, s, waitingPhases, runs)

	move := func(i int, to phase.Phase) {
		t.Helper()
		got, err := s.UpdateRun(bg, runs[i].Owner, func(r *operations.Run) error { return r.SetPhase(to, "", at(3)) })
		noError(t, err, "UpdateRun(%s) to %s", runs[i].Owner, to)
		runs[i] = got
	}
	move(1, phase.WaitingForPluginOperationsPartiallyFailed) // still waiting
	move(2, phase.Completed)
	move(4, phase.PartiallyFailed)
	noError(t, s.DeleteRun(bg, runs[5].Owner), "DeleteRun(%s)", runs[5].Owner)

	wantRuns(t, s, waitingPhases, []operations.Run{runs[0], runs[1], runs[3]})
	wantRuns(t, s, operations.RunFilter{Phases: []phase.Phase{phase.WaitingForPluginOperations}}, []operations.Run{runs[0], runs[3]})
	wantRuns(t, s, operations.RunFilter{Phases: []phase.Phase{phase.Completed, phase.PartiallyFailed}}, []operations.Run{runs[2], runs[4]})
	wantRuns(t, s, operations.RunFilter{}, runs[:5])

	// A refused update leaves the run where the index has it.
	_, err := s.UpdateRun(bg, runs[2].Owner, func(r *operations.Run) error { forcePhase(r, phase.InProgress); return nil })
	wantError(t, err, phase.ErrInvalidTransition, "UpdateRun(%s) from Completed back to InProgress", runs[2].Owner)
	wantRuns(t, s, operations.RunFilter{Phases: []phase.Phase{phase.InProgress}}, nil)
	wantRuns(t, s, operations.RunFilter{Phases: []phase.Phase{phase.Completed}}, []operations.Run{runs[2]})

	// A run created again after deletion is listed once, in its new phase.
	r5 := newRun(runs[5].Owner)
	mustCreate(t, s, r5)
	wantRuns(t, s, waitingPhases, []operations.Run{runs[0], runs[1], runs[3]})
	wantRuns(t, s, operations.RunFilter{Phases: []phase.Phase{phase.New}}, []operations.Run{r5})
}

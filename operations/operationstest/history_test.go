package operationstest_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/operations/operationstest"
	"github.com/itemops/itemops/phase"
	"github.com/itemops/itemops/storage/memstore"
)

var t0 = time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)

func TestRunPhasesAndEvents(t *testing.T) {
	o := operations.Owner{Kind: phase.Backup, Name: "nightly"}
	// through moves a new run through phases with SetPhase, requesting its cancel
	// before the phase cancelAt.
	through := func(cancelAt phase.Phase, phases ...phase.Phase) operations.Run {
		r := operations.Run{Owner: o, Phase: phase.New, Created: t0}
		for i, p := range phases {
			if p == cancelAt {
				if err := r.RequestCancel("jane", t0.Add(time.Duration(i)*time.Minute)); err != nil {
					t.Fatalf("RequestCancel in %s returned the error %q, want none", r.Phase, err)
				}
			}
			if err := r.SetPhase(p, "", t0.Add(time.Duration(i)*time.Minute)); err != nil {
				t.Fatalf("SetPhase(%s) from %s returned the error %q, want none", p, r.Phase, err)
			}
		}
		return r
	}
	tests := []struct {
		name       string
		run        operations.Run
		wantPhases []phase.Phase
		wantEvents []phase.Event
	}{
		{"no history", through(""), []phase.Phase{phase.New}, nil},
		{"completed",
			through("", phase.InProgress, phase.WaitingForPluginOperations, phase.Finalizing, phase.Completed),
			[]phase.Phase{phase.New, phase.InProgress, phase.WaitingForPluginOperations, phase.Finalizing, phase.Completed},
			[]phase.Event{phase.EventStart, phase.EventWait, phase.EventFinalize, phase.EventComplete}},
		{"cancelled while waiting",
			through(phase.Failed, phase.InProgress, phase.WaitingForPluginOperations, phase.Failed),
			[]phase.Phase{phase.New, phase.InProgress, phase.WaitingForPluginOperations, phase.Failed},
			[]phase.Event{phase.EventStart, phase.EventWait, operations.EventCancelRequested, phase.EventFail}},
		{"InProgress straight to FinalizingPartiallyFailed",
			through("", phase.InProgress, phase.FinalizingPartiallyFailed),
			[]phase.Phase{phase.New, phase.InProgress, phase.FinalizingPartiallyFailed},
			[]phase.Event{phase.EventStart, phase.EventFinalizePartiallyFailed}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.wantPhases, operationstest.RunPhases(tc.run)); diff != "" {
				t.Errorf("RunPhases (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantEvents, operationstest.RunEvents(tc.run)); diff != "" {
				t.Errorf("RunEvents (-want +got):\n%s", diff)
			}
		})
	}
}

func TestOperationPhases(t *testing.T) {
	ctx := context.Background()
	s := memstore.New()
	o := operations.Owner{Kind: phase.Restore, Name: "r"}
	if err := s.CreateRun(ctx, operations.Run{Owner: o, Phase: phase.New}); err != nil {
		t.Fatalf("CreateRun(%s) returned the error %q, want none", o, err)
	}
	op := func(id string, p operations.OperationPhase) operations.Operation {
		return operations.Operation{Owner: o, Action: "example.io/a", ID: id, Status: operations.Status{Phase: p}}
	}
	ops := []operations.Operation{op("a", operations.OperationNew), op("b", operations.OperationCompleted), op("c", operations.OperationFailed)}
	if err := s.PutOperations(ctx, o, ops); err != nil {
		t.Fatalf("PutOperations(%s) returned the error %q, want none", o, err)
	}
	got, err := operationstest.OperationPhases(ctx, s, o)
	if err != nil {
		t.Fatalf("OperationPhases(%s) returned the error %q, want none", o, err)
	}
	want := map[string]operations.OperationPhase{"a": operations.OperationNew, "b": operations.OperationCompleted, "c": operations.OperationFailed}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("OperationPhases(%s) (-want +got):\n%s", o, diff)
	}

	missing := operations.Owner{Kind: phase.Backup, Name: "missing"}
	if _, err := operationstest.OperationPhases(ctx, s, missing); !errors.Is(err, operations.ErrNotFound) {
		t.Errorf("OperationPhases(%s) returned the error %v, want one wrapping operations.ErrNotFound", missing, err)
	}
}

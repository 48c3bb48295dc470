package storetest

import (
	"context"
	"time"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/phase"
)

func contextChecks() []check {
	return []check{
		{"Cancelled", testCancelled},
		{"DeadlineExceeded", testDeadlineExceeded},
	}
}

// testCancelled calls every method with a cancelled context: each must fail with an
// error wrapping context.Canceled, and the writes must leave the store as it was.
func testCancelled(t tb, s operations.Store) {
	o := backup("b")
	start := runIn(t, o, phase.InProgress, phase.Profile{})
	mustCreate(t, s, start)
	stored := newOps(o, "op-", 2, operations.OperationInProgress)
	mustPut(t, s, o, cloneOps(stored))

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	other := backup("other")

	tests := []struct {
		name string
		call func() error
	}{
		{"CreateRun", func() error { return s.CreateRun(ctx, newRun(other)) }},
		{"GetRun", func() error { _, err := s.GetRun(ctx, o); return err }},
		{"UpdateRun", func() error {
			_, err := s.UpdateRun(ctx, o, func(r *operations.Run) error {
				r.Errors = 42
				return r.SetPhase(phase.Failed, "cancelled", at(5))
			})
			return err
		}},
		{"ListRuns", func() error { _, err := s.ListRuns(ctx, operations.RunFilter{}); return err }},
		{"DeleteRun", func() error { return s.DeleteRun(ctx, o) }},
		{"PutOperations", func() error {
			ops := cloneOps(stored)
			ops[0].Status.Phase = operations.OperationCompleted
			return s.PutOperations(ctx, o, append(ops, newOp(o, "new", operations.OperationNew)))
		}},
		{"GetOperation", func() error { _, err := s.GetOperation(ctx, o, stored[0].ID); return err }},
		{"ListOperations", func() error { _, err := s.ListOperations(ctx, o, operations.OperationFilter{}); return err }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t tb) {
			wantError(t, tc.call(), context.Canceled, "%s with a cancelled context", tc.name)
			wantRuns(t, s, operations.RunFilter{}, []operations.Run{start})
			wantAllOps(t, s, o, stored)
		})
	}
}

// testDeadlineExceeded checks that a write past its deadline reports it and writes
// nothing.
func testDeadlineExceeded(t tb, s operations.Store) {
	o := restore("r")
	start := runIn(t, o, phase.WaitingForPluginOperations, phase.Profile{})
	mustCreate(t, s, start)

	ctx, cancel := context.WithDeadline(context.Background(), time.Unix(0, 0))
	defer cancel()
	err := s.PutOperations(ctx, o, newOps(o, "op-", 10, operations.OperationNew))
	wantError(t, err, context.DeadlineExceeded, "PutOperations past its deadline")
	_, err = s.UpdateRun(ctx, o, func(r *operations.Run) error { r.Errors++; return nil })
	wantError(t, err, context.DeadlineExceeded, "UpdateRun past its deadline")

	wantRun(t, s, start)
	wantOps(t, s, o, operations.OperationFilter{}, nil)
}

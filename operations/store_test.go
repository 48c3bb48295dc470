package operations_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/phase"
)

// inProgressBackup is a backup run that has started, with one history entry.
func inProgressBackup() operations.Run {
	return operations.Run{
		Owner: backupOwner("b"), Phase: phase.InProgress, Created: t0, Started: t0, Updated: t0,
		History: []operations.Transition{{From: phase.New, To: phase.InProgress, Event: phase.EventStart, Time: t0, Reason: "started"}},
	}
}

// terminal returns a run of kind in terminal phase p, reached through SetPhase.
func terminal(t *testing.T, kind phase.Kind, p phase.Phase) operations.Run {
	t.Helper()
	r := operations.Run{Owner: operations.Owner{Kind: kind, Name: "x"}, Phase: phase.New}
	require.NoError(t, r.SetPhase(p, "", t0))
	return r
}

func TestValidateRunUpdate(t *testing.T) {
	tests := []struct {
		name    string
		before  func(t *testing.T) operations.Run
		update  func(t *testing.T, r *operations.Run)
		wantErr error // nil: accepted
	}{
		{
			name:   "no change",
			before: func(*testing.T) operations.Run { return inProgressBackup() },
			update: func(*testing.T, *operations.Run) {},
		},
		{
			name:   "counters, reason, timeout and times change freely",
			before: func(*testing.T) operations.Run { return inProgressBackup() },
			update: func(_ *testing.T, r *operations.Run) {
				r.Errors, r.Warnings, r.ItemsDone, r.ItemsTotal = 3, 4, 5, 6
				r.FailureReason, r.OperationTimeout, r.Updated = "x", time.Hour, t2
			},
		},
		{
			name:   "the UID is not part of the identity",
			before: func(*testing.T) operations.Run { return inProgressBackup() },
			update: func(_ *testing.T, r *operations.Run) { r.Owner.UID = "another" },
		},
		{
			name:   "a phase change through SetPhase",
			before: func(*testing.T) operations.Run { return inProgressBackup() },
			update: func(t *testing.T, r *operations.Run) {
				require.NoError(t, r.SetPhase(phase.WaitingForPluginOperations, "", t1))
			},
		},
		{
			name:   "several steps at once through SetPhase",
			before: func(*testing.T) operations.Run { return inProgressBackup() },
			update: func(t *testing.T, r *operations.Run) { require.NoError(t, r.SetPhase(phase.PartiallyFailed, "", t1)) },
		},
		{
			name:   "a history entry without a phase change",
			before: func(*testing.T) operations.Run { return inProgressBackup() },
			update: func(_ *testing.T, r *operations.Run) {
				r.History = append(r.History, operations.Transition{From: phase.InProgress, To: phase.InProgress, Time: t1, Reason: "note"})
			},
		},
		{
			name:   "a completed backup may be deleted",
			before: func(t *testing.T) operations.Run { return terminal(t, phase.Backup, phase.Completed) },
			update: func(t *testing.T, r *operations.Run) { require.NoError(t, r.SetPhase(phase.Deleting, "", t1)) },
		},
		{
			name: "history times read back in another location are the same instants",
			before: func(*testing.T) operations.Run {
				r := inProgressBackup()
				r.History[0].Time = t0.In(time.FixedZone("CEST", 2*3600))
				return r
			},
			update: func(_ *testing.T, r *operations.Run) {
				// As a backend that decodes the stored run twice would see it: a
				// distinct *time.Location for the same zone.
				r.History = []operations.Transition{r.History[0]}
				r.History[0].Time = t0.In(time.FixedZone("CEST", 2*3600))
			},
		},
		{
			name:    "changing the name",
			before:  func(*testing.T) operations.Run { return inProgressBackup() },
			update:  func(_ *testing.T, r *operations.Run) { r.Owner.Name = "other" },
			wantErr: operations.ErrConflict,
		},
		{
			name:    "changing the kind",
			before:  func(*testing.T) operations.Run { return inProgressBackup() },
			update:  func(_ *testing.T, r *operations.Run) { r.Owner.Kind = phase.Restore },
			wantErr: operations.ErrConflict,
		},
		{
			name:    "changing the profile",
			before:  func(*testing.T) operations.Run { return inProgressBackup() },
			update:  func(_ *testing.T, r *operations.Run) { r.Profile.Queue = true },
			wantErr: operations.ErrConflict,
		},
		{
			name:    "an unknown phase",
			before:  func(*testing.T) operations.Run { return inProgressBackup() },
			update:  func(_ *testing.T, r *operations.Run) { forcePhase(r, "Running") },
			wantErr: phase.ErrUnknownPhase,
		},
		{
			name:    "a phase of another profile",
			before:  func(*testing.T) operations.Run { return inProgressBackup() },
			update:  func(_ *testing.T, r *operations.Run) { forcePhase(r, phase.Queued) },
			wantErr: phase.ErrUnknownPhase,
		},
		{
			name:    "a waiting run moved back to InProgress",
			before:  func(t *testing.T) operations.Run { return waiting(t) },
			update:  func(_ *testing.T, r *operations.Run) { forcePhase(r, phase.InProgress) },
			wantErr: phase.ErrInvalidTransition,
		},
		{
			name:    "a phase change without a history entry",
			before:  func(*testing.T) operations.Run { return inProgressBackup() },
			update:  func(_ *testing.T, r *operations.Run) { r.Phase = phase.Failed },
			wantErr: operations.ErrInvalid,
		},
		{
			name:   "a phase change whose last history entry leads elsewhere",
			before: func(*testing.T) operations.Run { return inProgressBackup() },
			update: func(_ *testing.T, r *operations.Run) {
				r.Phase = phase.Failed
				r.History = append(r.History, operations.Transition{From: phase.InProgress, To: phase.WaitingForPluginOperations})
			},
			wantErr: operations.ErrInvalid,
		},
		{
			name:    "dropping a history entry",
			before:  func(*testing.T) operations.Run { return inProgressBackup() },
			update:  func(_ *testing.T, r *operations.Run) { r.History = nil },
			wantErr: operations.ErrInvalid,
		},
		{
			name:    "rewriting a history entry's reason",
			before:  func(*testing.T) operations.Run { return inProgressBackup() },
			update:  func(_ *testing.T, r *operations.Run) { r.History[0].Reason = "rewritten" },
			wantErr: operations.ErrInvalid,
		},
		{
			name:    "rewriting a history entry's time",
			before:  func(*testing.T) operations.Run { return inProgressBackup() },
			update:  func(_ *testing.T, r *operations.Run) { r.History[0].Time = t1 },
			wantErr: operations.ErrInvalid,
		},
		{
			name: "inserting a history entry before the old ones",
			before: func(*testing.T) operations.Run {
				return inProgressBackup()
			},
			update: func(_ *testing.T, r *operations.Run) {
				r.History = append([]operations.Transition{{From: phase.New, To: phase.New}}, r.History...)
			},
			wantErr: operations.ErrInvalid,
		},
	}
	for _, kind := range []phase.Kind{phase.Backup, phase.Restore} {
		for _, p := range []phase.Phase{phase.Completed, phase.PartiallyFailed, phase.Failed, phase.FailedValidation} {
			tests = append(tests, struct {
				name    string
				before  func(t *testing.T) operations.Run
				update  func(t *testing.T, r *operations.Run)
				wantErr error
			}{
				name:    fmt.Sprintf("a %s %s run moved back to InProgress", p, kind),
				before:  func(t *testing.T) operations.Run { return terminal(t, kind, p) },
				update:  func(_ *testing.T, r *operations.Run) { forcePhase(r, phase.InProgress) },
				wantErr: phase.ErrInvalidTransition,
			})
		}
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := tc.before(t)
			after := before.Clone()
			tc.update(t, &after)
			err := operations.ValidateRunUpdate(before, after)
			if tc.wantErr == nil {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, tc.wantErr)
		})
	}
}

// forcePhase sets r's phase to p with a history entry that leads there, as a careless
// writer might, so that only the transition rule can refuse it.
func forcePhase(r *operations.Run, p phase.Phase) {
	r.History = append(r.History, operations.Transition{From: r.Phase, To: p, Time: t2})
	r.Phase = p
}

func waiting(t *testing.T) operations.Run {
	t.Helper()
	r := inProgressBackup()
	require.NoError(t, r.SetPhase(phase.WaitingForPluginOperations, "", t1))
	return r
}

func TestValidateBatch(t *testing.T) {
	b := backupOwner("b")
	many := make([]operations.Operation, 500)
	for i := range many {
		many[i] = op(b, fmt.Sprintf("op-%03d", i), operations.OperationNew)
	}
	tests := []struct {
		name     string
		owner    operations.Owner
		ops      []operations.Operation
		wantErr  bool
		wantText string // part of the message, when wantErr
	}{
		{name: "empty batch", owner: b},
		{name: "nil batch", owner: b, ops: nil},
		{name: "500 valid operations", owner: b, ops: many},
		{name: "the UID need not match", owner: b, ops: []operations.Operation{op(operations.Owner{Kind: phase.Backup, Name: "b", UID: "other"}, "op-1", operations.OperationNew)}},
		{name: "invalid batch owner", owner: operations.Owner{Kind: phase.Backup}, wantErr: true, wantText: "empty name"},
		{
			name: "empty ID", owner: b,
			ops:     []operations.Operation{op(b, "op-1", operations.OperationNew), op(b, "", operations.OperationNew)},
			wantErr: true, wantText: "batch item 1",
		},
		{
			name: "unknown phase", owner: b,
			ops:     []operations.Operation{op(b, "op-1", "Done")},
			wantErr: true, wantText: "batch item 0",
		},
		{
			name: "another owner's name", owner: b,
			ops:     []operations.Operation{op(b, "op-1", operations.OperationNew), op(backupOwner("c"), "op-2", operations.OperationNew)},
			wantErr: true, wantText: "belongs to Backup/c",
		},
		{
			name: "another owner's kind", owner: b,
			ops:     []operations.Operation{op(restoreOwner("b"), "op-1", operations.OperationNew)},
			wantErr: true, wantText: "belongs to Restore/b",
		},
		{
			name: "an ID twice", owner: b,
			ops:     []operations.Operation{op(b, "op-1", operations.OperationNew), op(b, "op-2", operations.OperationNew), op(b, "op-1", operations.OperationCompleted)},
			wantErr: true, wantText: `batch item 2: operation ID "op-1" appears twice`,
		},
		{
			name: "the 500th operation invalid", owner: b,
			ops: func() []operations.Operation {
				ops := append([]operations.Operation(nil), many...)
				ops[499].Status.Phase = ""
				return ops
			}(),
			wantErr: true, wantText: "batch item 499",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := operations.ValidateBatch(tc.owner, tc.ops)
			if !tc.wantErr {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, operations.ErrInvalid)
			require.Contains(t, err.Error(), tc.wantText)
		})
	}
}

func TestValidateOperationUpdate(t *testing.T) {
	phases := []operations.OperationPhase{operations.OperationNew, operations.OperationInProgress, operations.OperationCompleted, operations.OperationFailed}
	for _, from := range phases {
		for _, to := range phases {
			// A finished operation keeps its phase; an unfinished one may become anything.
			wantConflict := from.Finished() && to != from
			t.Run(fmt.Sprintf("%s to %s", from, to), func(t *testing.T) {
				before := op(backupOwner("b"), "op-1", from)
				after := op(backupOwner("b"), "op-1", to)
				after.Status.Description = "updated"
				err := operations.ValidateOperationUpdate(before, after)
				if !wantConflict {
					require.NoError(t, err)
					return
				}
				require.ErrorIs(t, err, operations.ErrConflict)
				require.Contains(t, err.Error(), fmt.Sprintf("finished as %s, cannot become %s", from, to))
			})
		}
	}
}

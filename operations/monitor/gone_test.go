package monitor_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/operations/monitor"
	"github.com/itemops/itemops/operations/operationstest"
	"github.com/itemops/itemops/phase"
)

// TestPassLeavesARunDeletedUnderIt: a run deleted, or replaced by the run of a new owner
// of its name, while a pass polls or finalizes it (as an operator deletes the run of a
// deleted object) is no failure of the pass, and the pass writes nothing of it back.
func TestPassLeavesARunDeletedUnderIt(t *testing.T) {
	for _, tc := range []struct {
		name    string
		at      phase.Phase // the run's phase when the pass lists it
		replace bool        // a new owner's run takes the name, rather than none
	}{
		{name: "deleted while polled", at: phase.WaitingForPluginOperations},
		{name: "replaced while polled", at: phase.WaitingForPluginOperations, replace: true},
		{name: "deleted while finalized", at: phase.Finalizing},
		{name: "replaced while finalized", at: phase.Finalizing, replace: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			ctx := context.Background()
			o := e.run(phase.Backup, "b1", tc.at, phase.Profile{}, ops("a")...)
			newOwner := operations.Owner{Kind: o.Kind, Name: o.Name, UID: "uid-new"}
			deleteRun := func() {
				require.NoError(t, e.store.DeleteRun(ctx, o))
				if tc.replace {
					r := operations.Run{Owner: newOwner, Phase: phase.New, Created: t0}
					require.NoError(t, r.SetPhase(phase.InProgress, "started", t0))
					require.NoError(t, e.store.CreateRun(ctx, r))
				}
			}
			e.trackers["p"] = &operationstest.Tracker{ProgressFunc: func(context.Context, operations.Operation) (operations.Progress, error) {
				deleteRun()
				return done, nil
			}}
			m := e.monitor(monitor.WithFinalizer(monitor.FinalizerFunc(func(context.Context, operations.Run, []operations.ResourceIdentifier) error {
				deleteRun()
				return nil
			})))

			st, err := m.RunOnce(ctx)
			require.NoError(t, err)
			require.Zero(t, st.Advanced+st.Completed+st.Finalized, "nothing of the deleted run counted")
			_, err = e.store.GetRun(ctx, o)
			if tc.replace {
				require.ErrorIs(t, err, operations.ErrUIDMismatch)
				ops, err := e.store.ListOperations(ctx, newOwner, operations.OperationFilter{})
				require.NoError(t, err)
				require.Empty(t, ops, "the deleted run's operations written into the new one")
			} else {
				require.ErrorIs(t, err, operations.ErrNotFound)
			}
		})
	}
}

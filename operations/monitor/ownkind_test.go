package monitor_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/operations/monitor"
	"github.com/itemops/itemops/phase"
)

// TestOwnKinds runs kinds of one's own through a Monitor, each along its base's machine
// as its stored profile says: a backup-like DatabaseSnapshot goes through Finalizing, a
// restore-like Migration ends when its operations do, and so does a backup-like Copy
// declared without Finalizing among its phases; StartRun, a cancel request and
// Recover work on them as on Backup and Restore runs, and the Observer counts them under
// their own kinds.
func TestOwnKinds(t *testing.T) {
	snapshot, err := phase.Declare("DatabaseSnapshot", phase.Backup)
	require.NoError(t, err)
	migration, err := phase.Declare("Migration", phase.Restore)
	require.NoError(t, err)
	copyKind, err := phase.Declare("Copy", phase.Backup, phase.WithPhases(phase.New, phase.InProgress,
		phase.WaitingForPluginOperations, phase.WaitingForPluginOperationsPartiallyFailed,
		phase.Completed, phase.PartiallyFailed, phase.Failed))
	require.NoError(t, err)
	e := newEnv(t)
	e.trackers["p"] = scriptedFunc(func(operations.Operation) operations.Progress { return done })
	s1 := e.run("DatabaseSnapshot", "s1", phase.WaitingForPluginOperations, snapshot, ops("a")...)
	m1 := e.run("Migration", "m1", phase.WaitingForPluginOperations, migration, ops("a")...)
	c1 := e.run("Copy", "c1", phase.WaitingForPluginOperations, copyKind, ops("a")...)
	stuck := e.run("DatabaseSnapshot", "s-stuck", phase.InProgress, snapshot)

	var (
		mu        sync.Mutex
		finalized []operations.Owner
		counted   []monitor.PhaseCount
	)
	m := e.monitor(
		monitor.WithFinalizer(monitor.FinalizerFunc(func(_ context.Context, r operations.Run, _ []operations.ResourceIdentifier) error {
			mu.Lock()
			defer mu.Unlock()
			finalized = append(finalized, r.Owner)
			return nil
		})),
		monitor.WithObserver(monitor.Observer{Pass: func(st monitor.PassStats) {
			mu.Lock()
			defer mu.Unlock()
			counted = st.RunPhases
		}}),
	)
	ctx := context.Background()

	res, err := m.Recover(ctx)
	require.NoError(t, err)
	reason := `found a DatabaseSnapshot with status "InProgress" during the server starting, mark it as "Failed"`
	if diff := cmp.Diff(monitor.RecoverResult{
		Failed:  []operations.Owner{stuck},
		Reasons: []string{reason},
		Resumed: []operations.Owner{c1, s1, m1},
	}, res); diff != "" {
		t.Errorf("Recover (-want +got):\n%s", diff)
	}
	require.Equal(t, reason, e.get(stuck).FailureReason)

	_, err = m.RunOnce(ctx)
	require.NoError(t, err)
	require.Equal(t, []phase.Phase{phase.InProgress, phase.WaitingForPluginOperations, phase.Finalizing, phase.Completed}, historyTo(e.get(s1)))
	require.Equal(t, []phase.Phase{phase.InProgress, phase.WaitingForPluginOperations, phase.Completed}, historyTo(e.get(m1)))
	require.Equal(t, []phase.Phase{phase.InProgress, phase.WaitingForPluginOperations, phase.Completed}, historyTo(e.get(c1)))
	mu.Lock()
	require.Equal(t, []operations.Owner{s1}, finalized)
	require.Equal(t, []monitor.PhaseCount{
		{Kind: "Copy", Phase: phase.WaitingForPluginOperations, Runs: 1},
		{Kind: "DatabaseSnapshot", Phase: phase.WaitingForPluginOperations, Runs: 1},
		{Kind: "Migration", Phase: phase.WaitingForPluginOperations, Runs: 1},
	}, counted)
	mu.Unlock()

	// StartRun, then a cancel request that the next pass honours.
	s2 := operations.Owner{Kind: "DatabaseSnapshot", Name: "s2", UID: "uid-s2"}
	e.trackers["p"] = scriptedFunc(func(operations.Operation) operations.Progress { return running })
	r, err := m.StartRun(ctx, operations.Run{Owner: s2, Profile: snapshot}, startingOne("op-1"))
	require.NoError(t, err)
	require.Equal(t, phase.WaitingForPluginOperations, r.Phase)
	require.Equal(t, snapshot, r.Profile)
	e.clock.Advance(time.Minute)
	_, err = operations.RequestCancel(ctx, e.store, s2, "jane: wrong database", e.clock.Now())
	require.NoError(t, err)
	_, err = m.RunOnce(ctx)
	require.NoError(t, err)
	got := e.get(s2)
	require.Equal(t, phase.Failed, got.Phase)
	require.Equal(t, "jane: wrong database", got.FailureReason)
	require.Equal(t, operations.OperationFailed, e.op(s2, "op-1").Status.Phase)

	// Without its profile the kind is refused, before anything is written.
	_, err = m.StartRun(ctx, operations.Run{Owner: operations.Owner{Kind: "DatabaseSnapshot", Name: "s3"}}, startingOne("op-1"))
	require.ErrorIs(t, err, operations.ErrInvalid)
	require.ErrorIs(t, err, phase.ErrUnknownKind)
	_, err = e.store.GetRun(ctx, operations.Owner{Kind: "DatabaseSnapshot", Name: "s3"})
	require.ErrorIs(t, err, operations.ErrNotFound)
}

package recipes_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/itemops/itemops/adapters"
	"github.com/itemops/itemops/adapters/adaptertest"
	"github.com/itemops/itemops/clock/clocktest"
	recipes "github.com/itemops/itemops/examples/testing"
	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/operations/monitor"
	"github.com/itemops/itemops/operations/operationstest"
	"github.com/itemops/itemops/phase"
	"github.com/itemops/itemops/storage/boltstore"
	"github.com/itemops/itemops/storage/memstore"
	"github.com/itemops/itemops/storage/storetest"
)

var t0 = time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)

// recipe: a real store on disk
func TestReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "itemops.db")
	s, err := boltstore.Open(path, nil)
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })

	o := operations.Owner{Kind: phase.Backup, Name: "nightly"}
	require.NoError(t, s.CreateRun(context.Background(), operations.Run{Owner: o, Phase: phase.New}))
	require.NoError(t, s.Close())
	again, err := boltstore.Open(path, nil)
	require.NoError(t, err)
	t.Cleanup(func() { again.Close() })
	_, err = again.GetRun(context.Background(), o)
	require.NoError(t, err, "GetRun after reopening the file")
}

// recipe: storetest
func TestWriteCounterConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) operations.Store {
		return new(recipes.WriteCounter).Wrap(memstore.New())
	})
}

// recipe: a decorator keeps the atomic start
func TestWriteCounterCounts(t *testing.T) {
	ctx := context.Background()
	var counter recipes.WriteCounter
	s := counter.Wrap(memstore.New())
	if _, ok := s.(operations.RunStarter); !ok {
		t.Fatal("the decorated memstore is not an operations.RunStarter: StartRun would not be atomic on it")
	}
	o := operations.Owner{Kind: phase.Backup, Name: "nightly"}
	_, err := operations.StartRun(ctx, s, operations.Run{Owner: o, Created: t0}, func(context.Context) (operations.MainRun, error) {
		return operations.MainRun{}, errors.New("main run failed")
	})
	require.Error(t, err)
	_, err = s.GetRun(ctx, o)
	require.ErrorIs(t, err, operations.ErrNotFound, "a failed main run leaves no run behind")

	before := counter.Writes()
	_, err = operations.StartRun(ctx, s, operations.Run{Owner: o, Created: t0}, func(context.Context) (operations.MainRun, error) {
		return operations.MainRun{Operations: []operations.Operation{{Action: "example.io/snapshotter", ID: "snap-1"}}}, nil
	})
	require.NoError(t, err)
	require.Equal(t, int64(3), counter.Writes()-before, "StartRun writes the run (before main), its operations and its phase")

	// The decorated store still writes a run and its operations in one write.
	q := operations.Owner{Kind: phase.Backup, Name: "copied"}
	before = counter.Writes()
	op := operations.Operation{Owner: q, Action: "example.io/snapshotter", ID: "snap-2",
		Status: operations.Status{Phase: operations.OperationNew, Created: t0}}
	require.NoError(t, s.(operations.RunStarter).CreateRunWithOperations(ctx, operations.Run{Owner: q, Phase: phase.New, Created: t0}, []operations.Operation{op}))
	require.Equal(t, int64(1), counter.Writes()-before, "CreateRunWithOperations writes the run and its operations at once")
}

// recipe: adaptertest
func TestSnapshotterConformance(t *testing.T) {
	adaptertest.RunBackupItemAction(t, adaptertest.BackupItemActionHarness[string]{
		New: func(t *testing.T) (adapters.BackupItemAction[string], adaptertest.FinishFunc) {
			clock := clocktest.NewClock(t0)
			s := &recipes.Snapshotter{Clock: clock, Took: time.Minute}
			return s, func(string) { clock.Advance(time.Minute) } // the FinishFunc ends an operation
		},
		Backup: "nightly", // Item is left nil: a ConfigMap, which Execute takes like any item
	})
}

// recipe: phase decisions
func TestAfterMainRun(t *testing.T) {
	tests := []struct {
		name string
		kind phase.Kind
		out  phase.Outcome
		opts []phase.Option
		want phase.Phase
	}{
		{name: "backup, operations pending", kind: phase.Backup, out: phase.Outcome{Pending: 3}, want: phase.WaitingForPluginOperations},
		{name: "backup, errors and pending", kind: phase.Backup, out: phase.Outcome{Errors: 1, Pending: 3}, want: phase.WaitingForPluginOperationsPartiallyFailed},
		{name: "backup, nothing pending", kind: phase.Backup, out: phase.Outcome{}, want: phase.Finalizing},
		{name: "restore, nothing pending", kind: phase.Restore, out: phase.Outcome{}, want: phase.Completed},
		{name: "restore through Finalizing", kind: phase.Restore, out: phase.Outcome{}, opts: []phase.Option{phase.WithRestoreFinalizing()}, want: phase.Finalizing},
		{name: "fatal beats everything", kind: phase.Backup, out: phase.Outcome{Fatal: true, Errors: 2, Pending: 1}, want: phase.Failed},
		{name: "cancel requested, nothing pending", kind: phase.Restore, out: phase.Outcome{Cancelled: true}, want: phase.Failed},
		{name: "cancel requested, operations pending: the Monitor cancels them", kind: phase.Backup, out: phase.Outcome{Cancelled: true, Pending: 2}, want: phase.WaitingForPluginOperations},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := phase.AfterMainRun(tc.kind, tc.out, tc.opts...); got != tc.want {
				t.Errorf("AfterMainRun(%s, %+v) = %s, want %s", tc.kind, tc.out, got, tc.want)
			}
		})
	}
}

// recipe: fake clock
func TestMonitorTimeouts(t *testing.T) {
	tests := []struct {
		name        string
		at          time.Time           // where the clock is moved before the pass
		report      operations.Progress // what the plugin says
		wantOps     map[string]operations.OperationPhase
		wantRoute   []phase.Phase // the phases the run went through
		wantCancels int
	}{
		{name: "still running, within its timeout", at: t0.Add(30 * time.Minute), report: operations.Progress{NCompleted: 1, NTotal: 2},
			wantOps:   map[string]operations.OperationPhase{"snap-1": operations.OperationNew},
			wantRoute: []phase.Phase{phase.New, phase.InProgress, phase.WaitingForPluginOperations}},
		{name: "still running past its timeout", at: t0.Add(time.Hour + time.Second), report: operations.Progress{NCompleted: 1, NTotal: 2},
			wantOps: map[string]operations.OperationPhase{"snap-1": operations.OperationFailed},
			wantRoute: []phase.Phase{phase.New, phase.InProgress, phase.WaitingForPluginOperations,
				phase.WaitingForPluginOperationsPartiallyFailed, phase.FinalizingPartiallyFailed, phase.PartiallyFailed},
			wantCancels: 1},
		{name: "done in time", at: t0.Add(time.Minute), report: operations.Progress{Completed: true, NCompleted: 2, NTotal: 2},
			wantOps:   map[string]operations.OperationPhase{"snap-1": operations.OperationCompleted},
			wantRoute: []phase.Phase{phase.New, phase.InProgress, phase.WaitingForPluginOperations, phase.Finalizing, phase.Completed}},
		{name: "failed", at: t0.Add(time.Minute), report: operations.Progress{Completed: true, Err: "disk full"},
			wantOps: map[string]operations.OperationPhase{"snap-1": operations.OperationFailed},
			wantRoute: []phase.Phase{phase.New, phase.InProgress, phase.WaitingForPluginOperations,
				phase.WaitingForPluginOperationsPartiallyFailed, phase.FinalizingPartiallyFailed, phase.PartiallyFailed}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			store, clock := memstore.New(), clocktest.NewClock(t0)
			o := operations.Owner{Kind: phase.Backup, Name: "nightly"}
			_, err := operations.StartRun(ctx, store, operations.Run{Owner: o, Created: t0, OperationTimeout: time.Hour},
				func(context.Context) (operations.MainRun, error) { // the main run starts one snapshot
					return operations.MainRun{Operations: []operations.Operation{{Action: "example.io/snapshotter", ID: "snap-1"}}}, nil
				})
			require.NoError(t, err)

			plugin := &operationstest.Tracker{ProgressFunc: func(context.Context, operations.Operation) (operations.Progress, error) {
				return tc.report, nil
			}}
			m := monitor.New(store, operationstest.Resolver(map[string]operations.Tracker{"example.io/snapshotter": plugin}),
				monitor.WithClock(clock))
			clock.AdvanceTo(tc.at)
			_, err = m.RunOnce(ctx) // one pass: polls, then finalizes; no goroutine to wait for
			require.NoError(t, err)

			ops, err := operationstest.OperationPhases(ctx, store, o)
			require.NoError(t, err)
			if diff := cmp.Diff(tc.wantOps, ops); diff != "" {
				t.Errorf("operations after the pass (-want +got):\n%s", diff)
			}
			run, err := store.GetRun(ctx, o)
			require.NoError(t, err)
			if diff := cmp.Diff(tc.wantRoute, operationstest.RunPhases(run)); diff != "" {
				t.Errorf("the run's route (-want +got):\n%s", diff)
			}
			if got := plugin.CancelCalls("snap-1"); got != tc.wantCancels {
				t.Errorf("Cancel calls = %d, want %d", got, tc.wantCancels)
			}
		})
	}
}

// recipe: errors
func TestUnknownSnapshot(t *testing.T) {
	s := &recipes.Snapshotter{Clock: clocktest.NewClock(t0), Took: time.Minute}
	_, err := s.Progress(context.Background(), "snapshot-404", "nightly")
	if !errors.Is(err, operations.ErrInvalidOperationID) {
		t.Fatalf("Progress of an unknown ID = %v, want an error wrapping ErrInvalidOperationID", err)
	}
}

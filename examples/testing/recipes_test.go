package recipes_test

import (
	"context"
	"errors"
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
	"github.com/itemops/itemops/storage/memstore"
	"github.com/itemops/itemops/storage/storetest"
)

var t0 = time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)

// recipe: storetest
func TestCountingStoreConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) operations.Store {
		return &recipes.CountingStore{Store: memstore.New()}
	})
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
		name      string
		after     time.Duration       // how far the clock moves before the poll
		report    operations.Progress // what the plugin says
		wantOp    operations.OperationPhase
		wantErr   string
		wantRun   phase.Phase
		wantCancs int
	}{
		{name: "still running, within its timeout", after: 30 * time.Minute, report: operations.Progress{NCompleted: 1, NTotal: 2},
			wantOp: operations.OperationNew, wantRun: phase.WaitingForPluginOperations},
		{name: "still running past its timeout", after: time.Hour + time.Second, report: operations.Progress{NCompleted: 1, NTotal: 2},
			wantOp: operations.OperationFailed, wantErr: monitor.TimedOut, wantRun: phase.FinalizingPartiallyFailed, wantCancs: 1},
		{name: "done in time", after: time.Minute, report: operations.Progress{Completed: true, NCompleted: 2, NTotal: 2},
			wantOp: operations.OperationCompleted, wantRun: phase.Finalizing},
		{name: "failed", after: time.Minute, report: operations.Progress{Completed: true, Err: "disk full"},
			wantOp: operations.OperationFailed, wantErr: "disk full", wantRun: phase.FinalizingPartiallyFailed},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			store, clock := memstore.New(), clocktest.NewClock(t0)
			o := operations.Owner{Kind: phase.Backup, Name: "nightly"}
			run := operations.Run{Owner: o, Phase: phase.New, Created: t0, OperationTimeout: time.Hour}
			require.NoError(t, run.SetPhase(phase.InProgress, "started", t0))
			require.NoError(t, store.CreateRun(ctx, run))
			require.NoError(t, store.PutOperations(ctx, o, []operations.Operation{{Owner: o, Action: "example.io/snapshotter", ID: "snap-1",
				Status: operations.Status{Phase: operations.OperationNew, Created: t0}}}))
			_, err := store.UpdateRun(ctx, o, func(r *operations.Run) error {
				return r.SetPhase(phase.WaitingForPluginOperations, "main run ended", t0)
			})
			require.NoError(t, err)

			plugin := &operationstest.Tracker{ProgressFunc: func(context.Context, operations.Operation) (operations.Progress, error) {
				return tc.report, nil
			}}
			m := monitor.New(store, operationstest.Resolver(map[string]operations.Tracker{"example.io/snapshotter": plugin}),
				monitor.WithClock(clock))
			clock.Advance(tc.after)
			res, err := m.Poll(ctx, o) // one pass, no goroutine to wait for
			require.NoError(t, err)

			op, err := store.GetOperation(ctx, o, "snap-1")
			require.NoError(t, err)
			got := []any{op.Status.Phase, op.Status.Error, res.Phase, plugin.CancelCalls("snap-1")}
			want := []any{tc.wantOp, tc.wantErr, tc.wantRun, tc.wantCancs}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("operation phase, error, run phase, cancels (-want +got):\n%s", diff)
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

func TestCountingStoreCounts(t *testing.T) {
	s := &recipes.CountingStore{Store: memstore.New()}
	ctx := context.Background()
	o := operations.Owner{Kind: phase.Backup, Name: "nightly"}
	require.NoError(t, s.CreateRun(ctx, operations.Run{Owner: o, Phase: phase.New}))
	require.NoError(t, s.PutOperations(ctx, o, nil))
	_, err := s.GetRun(ctx, o)
	require.NoError(t, err)
	require.Equal(t, int64(2), s.Writes())
}

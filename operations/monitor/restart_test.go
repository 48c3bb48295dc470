package monitor_test

import (
	"context"
	"fmt"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/itemops/itemops/clock/clocktest"
	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/operations/monitor"
	"github.com/itemops/itemops/operations/operationstest"
	"github.com/itemops/itemops/phase"
	"github.com/itemops/itemops/storage/boltstore"
	"github.com/itemops/itemops/storage/memstore"
)

// TestRestartOnBoltstore stops a Monitor in the middle of a pass, reopens the store file
// as a restarted process would, applies Recover, and lets a new Monitor finish: every run
// reaches the terminal phase it should, and no operation is lost.
func TestRestartOnBoltstore(t *testing.T) {
	path := filepath.Join(t.TempDir(), "itemops.db")
	s, err := boltstore.Open(path, nil)
	require.NoError(t, err)
	clock := clocktest.NewClock(t0)
	setup := func(kind phase.Kind, name string, p phase.Phase, profile phase.Profile, n int) operations.Owner {
		o := operations.Owner{Kind: kind, Name: name, UID: "uid-" + name}
		r := operations.Run{Owner: o, Phase: phase.New, Profile: profile, Created: t0}
		require.NoError(t, r.SetPhase(phase.InProgress, "started", t0))
		require.NoError(t, s.CreateRun(context.Background(), r))
		var ops []operations.Operation
		for i := 0; i < n; i++ {
			ops = append(ops, operations.Operation{Owner: o, Action: "mover", ID: fmt.Sprintf("%s-op-%d", name, i),
				Status: operations.Status{Phase: operations.OperationInProgress, Created: t0}})
		}
		require.NoError(t, s.PutOperations(context.Background(), o, ops))
		if p != phase.InProgress {
			_, err := s.UpdateRun(context.Background(), o, func(r *operations.Run) error { return r.SetPhase(p, "main run ended", t0) })
			require.NoError(t, err)
		}
		return o
	}
	const wait = phase.WaitingForPluginOperations
	want := map[operations.Owner]phase.Phase{
		setup(phase.Backup, "b-running", phase.InProgress, phase.Profile{}, 3):                                    phase.Failed,
		setup(phase.Backup, "b-ok", wait, phase.Profile{}, 20):                                                    phase.Completed,
		setup(phase.Backup, "b-bad", wait, phase.Profile{}, 20):                                                   phase.PartiallyFailed,
		setup(phase.Restore, "r-ok", wait, phase.Profile{}, 20):                                                   phase.Completed,
		setup(phase.Restore, "r-fin", phase.FinalizingPartiallyFailed, phase.Profile{RestoreFinalizing: true}, 0): phase.PartiallyFailed,
	}

	// The first process: its plugin answers a few calls, then stops answering until the
	// Monitor is stopped in the middle of its pass.
	var answered atomic.Int32
	stuck := make(chan struct{}, 1) // holds the first signal until the test waits for it
	first := &operationstest.Tracker{ProgressFunc: func(ctx context.Context, op operations.Operation) (operations.Progress, error) {
		if answered.Add(1) > 10 {
			select {
			case stuck <- struct{}{}:
			default:
			}
			<-ctx.Done()
			return operations.Progress{}, ctx.Err()
		}
		return running, nil
	}}
	m1 := monitor.New(s, operationstest.Resolver(map[string]operations.Tracker{"mover": first}),
		monitor.WithClock(clock), monitor.WithWorkers(4))
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan error)
	go func() { stopped <- m1.Run(ctx) }()
	<-stuck
	cancel()
	require.ErrorIs(t, <-stopped, context.Canceled)
	require.NoError(t, s.Close())

	// The second process reopens the file, recovers, and finishes.
	s, err = boltstore.Open(path, nil)
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	second := &operationstest.Tracker{ProgressFunc: func(ctx context.Context, op operations.Operation) (operations.Progress, error) {
		if strings.HasPrefix(op.ID, "b-bad-op-1") { // b-bad-op-1 and b-bad-op-10 to 19 fail
			return broken, nil
		}
		return done, nil
	}}
	passes := make(chan monitor.PassStats)
	m2 := monitor.New(s, operationstest.Resolver(map[string]operations.Tracker{"mover": second}),
		monitor.WithClock(clock), monitor.WithObserver(monitor.Observer{Pass: func(ps monitor.PassStats) { passes <- ps }}))
	rec, err := m2.Recover(context.Background())
	require.NoError(t, err)
	require.Len(t, rec.Failed, 1)
	require.Equal(t, "b-running", rec.Failed[0].Name)
	require.Len(t, rec.Resumed, 4)

	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	go func() { stopped <- m2.Run(ctx) }()
	stats := <-passes
	require.NoError(t, stats.Err)
	cancel()
	require.ErrorIs(t, <-stopped, context.Canceled)

	for o, p := range want {
		r, err := s.GetRun(context.Background(), o)
		require.NoError(t, err)
		require.Equal(t, p, r.Phase, "%s", o)
		all, err := s.ListOperations(context.Background(), o, operations.OperationFilter{})
		require.NoError(t, err)
		wantOps := map[string]int{"b-running": 3, "b-ok": 20, "b-bad": 20, "r-ok": 20, "r-fin": 0}[o.Name]
		require.Len(t, all, wantOps, "%s: no operation may be lost", o)
		if o.Name == "b-bad" {
			require.Equal(t, 11, r.Errors, "b-bad-op-1 and b-bad-op-10..19 failed")
		}
	}
}

// A process that dies while its main run runs leaves the run InProgress, as StartRun
// created it; Recover fails it and StartRun then returns it as is.
func TestStartRunAfterRecover(t *testing.T) {
	ctx := context.Background()
	s := memstore.New()
	o := operations.Owner{Kind: phase.Backup, Name: "b"}
	crashed := make(chan struct{})
	go func() {
		defer close(crashed)
		_, _ = operations.StartRun(ctx, s, operations.Run{Owner: o}, func(context.Context) (operations.MainRun, error) {
			runtime.Goexit() // the process dies in main: nothing after it runs
			return operations.MainRun{}, nil
		})
	}()
	<-crashed
	r, err := s.GetRun(ctx, o)
	require.NoError(t, err)
	require.Equal(t, phase.InProgress, r.Phase, "the run a crash in main leaves")
	res, err := monitor.New(s, operationstest.Resolver(nil)).Recover(ctx)
	require.NoError(t, err)
	require.Equal(t, []operations.Owner{o}, res.Failed)
	r, err = operations.StartRun(ctx, s, operations.Run{Owner: o}, func(context.Context) (operations.MainRun, error) {
		t.Fatal("main called for a failed run")
		return operations.MainRun{}, nil
	})
	require.NoError(t, err)
	require.Equal(t, phase.Failed, r.Phase)
}

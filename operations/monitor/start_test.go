package monitor_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/itemops/itemops/clock/clocktest"
	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/operations/monitor"
	"github.com/itemops/itemops/operations/operationstest"
	"github.com/itemops/itemops/phase"
	"github.com/itemops/itemops/storage/memstore"
)

func startingOne(id string) func(context.Context) (operations.MainRun, error) {
	return func(context.Context) (operations.MainRun, error) {
		return operations.MainRun{Operations: []operations.Operation{{Action: "p", ID: id}}}, nil
	}
}

// TestStartRunUsesTheMonitorsClock: a run started through the Monitor is stamped by the
// Monitor's clock, so a clock far from the system's neither times its operations out on
// their first poll nor records two clocks' times in one history.
func TestStartRunUsesTheMonitorsClock(t *testing.T) {
	ctx := context.Background()
	at := time.Date(2126, 1, 2, 3, 4, 5, 0, time.UTC) // far ahead of any system clock
	clock := clocktest.NewClock(at)
	store := memstore.New()
	m := monitor.New(store, operationstest.Resolver(map[string]operations.Tracker{"p": scriptedFunc(func(operations.Operation) operations.Progress {
		return running
	})}), monitor.WithClock(clock))
	o := operations.Owner{Kind: phase.Backup, Name: "b", UID: "u"}
	r, err := m.StartRun(ctx, operations.Run{Owner: o}, startingOne("op-1"))
	require.NoError(t, err)
	require.Equal(t, at, r.Created)
	for _, tr := range r.History {
		require.Equal(t, at, tr.Time, "transition to %s", tr.To)
	}
	op, err := store.GetOperation(ctx, o, "op-1")
	require.NoError(t, err)
	require.Equal(t, at, op.Status.Created)

	clock.Advance(time.Minute)
	res, err := m.Poll(ctx, o)
	require.NoError(t, err)
	if diff := cmp.Diff(monitor.PollResult{Running: 1, Phase: phase.WaitingForPluginOperations}, res); diff != "" {
		t.Errorf("first poll (-want +got):\n%s", diff)
	}
}

// TestStartRunWakesRun: a run started while Run waits out its interval is polled at once.
// The fake clock never moves, so the interval never ends: only the wake can start the
// second pass.
func TestStartRunWakesRun(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	clock := clocktest.NewClock(t0)
	polled := make(chan string, 1)
	tracker := &operationstest.Tracker{ProgressFunc: func(_ context.Context, op operations.Operation) (operations.Progress, error) {
		polled <- op.ID
		return running, nil
	}}
	passes := make(chan monitor.PassStats, 10)
	m := monitor.New(memstore.New(), operationstest.Resolver(map[string]operations.Tracker{"p": tracker}),
		monitor.WithClock(clock), monitor.WithInterval(10*time.Second),
		monitor.WithObserver(monitor.Observer{Pass: func(s monitor.PassStats) { passes <- s }}))
	done := make(chan error)
	go func() { done <- m.Run(ctx) }()
	require.Zero(t, (<-passes).Runs, "the first pass finds nothing")
	clock.BlockUntilWaiters(1) // Run waits out its interval

	o := operations.Owner{Kind: phase.Backup, Name: "b", UID: "u"}
	_, err := m.StartRun(ctx, operations.Run{Owner: o}, startingOne("op-1"))
	require.NoError(t, err)
	select {
	case id := <-polled:
		require.Equal(t, "op-1", id)
	case <-time.After(time.Minute): // a guard against hanging: no pass can come but the wake's
		t.Fatal("no poll: StartRun did not wake Run")
	}
	require.Equal(t, 1, (<-passes).Runs)

	cancel()
	require.ErrorIs(t, <-done, context.Canceled)
}

// TestRequestCancelWakesRun: a cancel requested while Run waits out its interval is
// honoured at once: the run's operation is cancelled through its plugin and the run
// fails. The fake clock never moves, so the interval never ends: only the wake can start
// the pass that cancels.
func TestRequestCancelWakesRun(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	clock := clocktest.NewClock(t0)
	cancelled := make(chan string, 1)
	tracker := &operationstest.Tracker{
		ProgressFunc: func(context.Context, operations.Operation) (operations.Progress, error) { return running, nil },
		CancelFunc: func(_ context.Context, op operations.Operation) error {
			cancelled <- op.ID
			return nil
		},
	}
	store := memstore.New()
	passes := make(chan monitor.PassStats, 10)
	m := monitor.New(store, operationstest.Resolver(map[string]operations.Tracker{"p": tracker}),
		monitor.WithClock(clock), monitor.WithInterval(10*time.Second),
		monitor.WithObserver(monitor.Observer{Pass: func(s monitor.PassStats) { passes <- s }}))
	o := operations.Owner{Kind: phase.Backup, Name: "b", UID: "u"}
	// Started on the store alone, so that nothing wakes Run before the request.
	_, err := operations.StartRun(ctx, store, operations.Run{Owner: o, Created: t0}, startingOne("op-1"))
	require.NoError(t, err)

	done := make(chan error)
	go func() { done <- m.Run(ctx) }()
	require.Equal(t, 1, (<-passes).Runs, "the first pass polls the run")
	clock.BlockUntilAfterCalls(1) // Run waits out its interval

	r, err := m.RequestCancel(ctx, o, "jane: wrong namespace")
	require.NoError(t, err)
	require.True(t, r.Cancel.At.Equal(t0), "the request at %v, want the Monitor's clock's %v", r.Cancel.At, t0)
	select {
	case id := <-cancelled:
		require.Equal(t, "op-1", id)
	case <-time.After(time.Minute): // a guard against hanging: no pass can come but the wake's
		t.Fatal("no cancel: RequestCancel did not wake Run")
	}
	<-passes
	got, err := store.GetRun(ctx, o)
	require.NoError(t, err)
	require.Equal(t, phase.Failed, got.Phase, "the pass the request woke fails the run")

	cancel()
	require.ErrorIs(t, <-done, context.Canceled)
}

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

// TestSubmitRunUsesTheMonitorsClock: a run started through the Monitor is stamped by the
// Monitor's clock, so a clock far from the system's neither times its operations out on
// their first poll nor records two clocks' times in one history.
func TestSubmitRunUsesTheMonitorsClock(t *testing.T) {
	ctx := context.Background()
	at := time.Date(2126, 1, 2, 3, 4, 5, 0, time.UTC) // far ahead of any system clock
	clock := clocktest.NewClock(at)
	store := memstore.New()
	m := monitor.New(store, operationstest.Resolver(map[string]operations.Tracker{"p": scriptedFunc(func(operations.Operation) operations.Progress {
		return running
	})}), monitor.WithClock(clock))
	o := operations.Owner{Kind: phase.Backup, Name: "b", UID: "u"}
	r, err := m.SubmitRun(ctx, operations.Run{Owner: o}, startingOne("op-1"))
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

// TestSubmitRunWakesRun: a run started while Run waits out its interval is polled at once.
// The fake clock never moves, so the interval never ends: only the wake can start the
// second pass.
func TestSubmitRunWakesRun(t *testing.T) {
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
	_, err := m.SubmitRun(ctx, operations.Run{Owner: o}, startingOne("op-1"))
	require.NoError(t, err)
	select {
	case id := <-polled:
		require.Equal(t, "op-1", id)
	case <-time.After(time.Minute): // a guard against hanging: no pass can come but the wake's
		t.Fatal("no poll: SubmitRun did not wake Run")
	}
	require.Equal(t, 1, (<-passes).Runs)

	cancel()
	require.ErrorIs(t, <-done, context.Canceled)
}

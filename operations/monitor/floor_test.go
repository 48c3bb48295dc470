package monitor_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/operations/monitor"
	"github.com/itemops/itemops/operations/operationstest"
	"github.com/itemops/itemops/phase"
)

// TestIntervalFloor checks that Run makes no pass sooner than MinInterval after the last,
// with an interval of a nanosecond and a retry policy whose waits are zero or a
// nanosecond: on the fake clock, the wait after a pass does not end a nanosecond before
// MinInterval and ends at it, when the next pass begins, and each pass calls the plugin once per operation of its
// 20, each erring.
func TestIntervalFloor(t *testing.T) {
	for _, initial := range []time.Duration{0, time.Nanosecond} {
		t.Run("initial interval "+initial.String(), func(t *testing.T) {
			e := newEnv(t)
			var calls, passes atomic.Int32
			e.trackers["p"] = &operationstest.Tracker{ProgressFunc: func(context.Context, operations.Operation) (operations.Progress, error) {
				calls.Add(1)
				return operations.Progress{}, operations.Retryable(errors.New("busy"))
			}}
			ids := make([]string, 20)
			for i := range ids {
				ids[i] = string(rune('a' + i))
			}
			e.run(phase.Backup, "b1", phase.WaitingForPluginOperations, phase.Profile{}, ops(ids...)...)
			policy := monitor.RetryPolicy{InitialInterval: initial, MaxAttempts: 1000}
			m := e.monitor(monitor.WithInterval(time.Nanosecond), monitor.WithRetryPolicy(policy),
				monitor.WithObserver(monitor.Observer{Pass: func(monitor.PassStats) { passes.Add(1) }}))
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- m.Run(ctx) }()
			defer func() {
				cancel()
				require.ErrorIs(t, <-done, context.Canceled)
			}()

			for pass := 1; pass <= 3; pass++ {
				e.clock.BlockUntilAfterCalls(pass) // Run sleeps after its pass
				require.Equal(t, int32(pass), passes.Load())
				require.Equal(t, int32(20*pass), calls.Load(), "one call per operation per pass")
				e.clock.Advance(monitor.MinInterval - time.Nanosecond)
				require.Equal(t, 1, e.clock.Waiters(), "a nanosecond before MinInterval, Run still waits")
				e.clock.Advance(time.Nanosecond)
				// The next pass may begin and go back to sleep before this goroutine looks,
				// so the end of the wait is told by the pass count, not by Waiters.
				require.Eventually(t, func() bool { return passes.Load() == int32(pass+1) },
					10*time.Second, time.Millisecond, "at MinInterval, the wait ends and a pass begins")
			}
		})
	}
}

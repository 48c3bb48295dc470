package monitor_test

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/operations/monitor"
	"github.com/itemops/itemops/operations/operationstest"
	"github.com/itemops/itemops/phase"
)

// forever is the longest Duration, Velero's itemOperationTimeout of
// 2562047h47m16.854775807s.
const forever = time.Duration(math.MaxInt64)

// TestLongestDurations checks that a Monitor given the longest Duration in every option,
// and an operation timeout of that length from either the run or the option, keeps an
// operation in retry backoff waiting for its next poll: the passes within the wait call
// no plugin and spend no attempt, the pass reports the stored next poll as the time it
// is due (what itemops inspect shows as NEXT POLL), and the second attempt comes at that
// time. A sum of such durations that wrapped around would make the operation due at
// every pass.
func TestLongestDurations(t *testing.T) {
	for _, runTimeout := range []bool{false, true} {
		name := "the option's timeout"
		if runTimeout {
			name = "the run's timeout"
		}
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			e := newEnv(t)
			calls := 0
			e.trackers["p"] = &operationstest.Tracker{ProgressFunc: func(context.Context, operations.Operation) (operations.Progress, error) {
				calls++
				return operations.Progress{}, operations.Retryable(errors.New("busy"))
			}}
			o := e.run(phase.Backup, "b1", phase.WaitingForPluginOperations, phase.Profile{}, ops("a")...)
			if runTimeout {
				_, err := e.store.UpdateRun(ctx, o, func(r *operations.Run) error { r.OperationTimeout = forever; return nil })
				require.NoError(t, err)
			}
			policy := monitor.RetryPolicy{InitialInterval: time.Minute, MaxInterval: forever, MaxAttempts: 3, MaxElapsed: forever}
			m := e.monitor(monitor.WithInterval(forever), monitor.WithCallTimeout(forever), monitor.WithDefaultOperationTimeout(forever),
				monitor.WithFinalizeTimeout(forever), monitor.WithStallTimeout(forever), monitor.WithRetryPolicy(policy))

			_, err := m.RunOnce(ctx)
			require.NoError(t, err)
			require.Equal(t, 1, calls)
			next := e.op(o, "a").Monitor.NextPoll
			require.Equal(t, t0.Add(time.Minute), next)
			for range 5 {
				e.clock.Advance(10 * time.Second)
				stats, err := m.RunOnce(ctx)
				require.NoError(t, err)
				require.Equal(t, 1, calls, "no call within the wait")
				require.Equal(t, 1, stats.OperationsDeferred)
				require.Equal(t, next, stats.NextDue, "due at its next poll")
				require.Equal(t, 1, e.op(o, "a").Monitor.Attempts)
			}
			e.clock.AdvanceTo(next)
			_, err = m.RunOnce(ctx)
			require.NoError(t, err)
			require.Equal(t, 2, calls)
			got := e.op(o, "a")
			require.Equal(t, operations.OperationNew, got.Status.Phase)
			require.Equal(t, 2, got.Monitor.Attempts)
			require.Equal(t, next.Add(2*time.Minute), got.Monitor.NextPoll)
		})
	}
}

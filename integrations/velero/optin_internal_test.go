package velero

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/itemops/itemops/clock/clocktest"
	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/operations/monitor"
	"github.com/itemops/itemops/operations/operationstest"
	"github.com/itemops/itemops/phase"
)

// TestMonitorOptionsOptIn checks that the Monitor options given to NewBackupOperations
// and NewRestoreOperations reach the Monitor of each reconcile, and that without them
// the bridge keeps Velero's rules: under a retry policy a plugin that is Unavailable
// twice is asked again and its operation runs on, under a stall timeout an operation
// whose report does not move fails at the window, and with neither the first error
// fails the operation.
func TestMonitorOptionsOptIn(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	// As the bridge's Resolver gives it (see TestTransientGRPC): marked transient.
	unavailable := markTransient(status.Error(codes.Unavailable, "connection error"))
	tests := []struct {
		name    string
		opts    func(*clocktest.Clock) []monitor.Option
		want    operations.OperationPhase
		wantErr string
	}{
		{"no option: Velero's rules", func(*clocktest.Clock) []monitor.Option { return nil },
			operations.OperationFailed, unavailable.Error()},
		{"a retry policy", func(c *clocktest.Clock) []monitor.Option {
			return []monitor.Option{monitor.WithClock(c), monitor.WithRetryPolicy(monitor.RetryPolicy{MaxAttempts: 5})}
		}, operations.OperationInProgress, ""},
		{"a stall timeout and a retry policy", func(c *clocktest.Clock) []monitor.Option {
			return []monitor.Option{monitor.WithClock(c), monitor.WithRetryPolicy(monitor.RetryPolicy{MaxAttempts: 5}),
				monitor.WithActionStallTimeout("p", time.Minute)}
		}, operations.OperationFailed, "no progress for 1m0s: last 0 of 0 at 03:04:05Z"},
	}
	for _, kind := range []phase.Kind{phase.Backup, phase.Restore} {
		for _, tc := range tests {
			t.Run(string(kind)+"/"+tc.name, func(t *testing.T) {
				ctx := context.Background()
				clk := clocktest.NewClock(t0)
				var tr *tracked
				if kind == phase.Backup {
					tr = NewBackupOperations(tc.opts(clk)...).tracked
				} else {
					tr = NewRestoreOperations(tc.opts(clk)...).tracked
				}
				o := operations.Owner{Kind: kind, Name: "x"}
				run := operations.Run{Owner: o, Phase: phase.New, Created: t0}
				require.NoError(t, run.SetPhase(phase.WaitingForPluginOperations, "main run ended", t0))
				require.NoError(t, tr.store.CreateRun(ctx, run))
				require.NoError(t, tr.store.PutOperations(ctx, o, []operations.Operation{{Owner: o, Action: "p", ID: "1",
					Status: operations.Status{Phase: operations.OperationInProgress, Created: t0}}}))
				var calls int
				r := operationstest.Resolver(map[string]operations.Tracker{"p": &operationstest.Tracker{
					ProgressFunc: func(context.Context, operations.Operation) (operations.Progress, error) {
						if calls++; calls <= 2 {
							return operations.Progress{}, unavailable
						}
						return operations.Progress{}, nil
					}}})
				// Three reconciles, the last a minute after the first.
				for _, at := range []time.Duration{0, time.Second, time.Minute} {
					clk.AdvanceTo(t0.Add(at))
					_, _, _, err := tr.poll(ctx, o, r, nil)
					require.NoError(t, err)
				}
				got, err := tr.store.GetOperation(ctx, o, "1")
				require.NoError(t, err)
				require.Equal(t, tc.want, got.Status.Phase)
				require.Equal(t, tc.wantErr, got.Status.Error)
			})
		}
	}
}

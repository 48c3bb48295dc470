package monitor_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/operations/monitor"
	"github.com/itemops/itemops/operations/operationstest"
	"github.com/itemops/itemops/phase"
)

// TestRunsTakeWorkersOneAtATime polls three runs of four operations with two workers,
// the plugin answering only when the test lets it: at every step both calls in flight
// are of one run. The workers of a run whose operations are all taken move to the next
// run together, so that runs end one after another and write their batches while the
// calls of others go on, rather than the runs waiting for workers sharing them in turn
// and all ending at the end of the pass.
func TestRunsTakeWorkersOneAtATime(t *testing.T) {
	const runs, perRun, workers = 3, 4, 2
	e := newEnv(t)
	calls := make(chan string)
	release := make(chan struct{})
	e.trackers["p"] = &operationstest.Tracker{ProgressFunc: func(ctx context.Context, op operations.Operation) (operations.Progress, error) {
		select {
		case calls <- op.Owner.Name:
		case <-ctx.Done():
			return operations.Progress{}, ctx.Err()
		}
		select {
		case <-release:
		case <-ctx.Done():
			return operations.Progress{}, ctx.Err()
		}
		return done, nil
	}}
	for r := range runs {
		var ids []string
		for i := range perRun {
			ids = append(ids, fmt.Sprintf("op-%d", i))
		}
		e.run(phase.Backup, fmt.Sprintf("b%d", r), phase.WaitingForPluginOperations, phase.Profile{}, ops(ids...)...)
	}
	m := e.monitor(monitor.WithWorkers(workers))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	passed := make(chan error, 1)
	go func() {
		_, err := m.RunOnce(ctx)
		passed <- err
	}()

	seen := map[string]int{} // calls of each run so far
	for step := range runs * perRun / workers {
		var inFlight []string
		for range workers {
			select {
			case name := <-calls:
				inFlight = append(inFlight, name)
			case <-ctx.Done():
				t.Fatalf("step %d: only %v in flight after a minute", step, inFlight)
			}
		}
		require.Equal(t, inFlight[0], inFlight[1], "step %d: the calls in flight are of runs %v", step, inFlight)
		seen[inFlight[0]] += workers
		for range workers {
			release <- struct{}{}
		}
	}
	require.NoError(t, <-passed)
	require.Equal(t, map[string]int{"b0": perRun, "b1": perRun, "b2": perRun}, seen)
	for r := range runs {
		require.Equal(t, phase.Completed, e.get(operations.Owner{Kind: phase.Backup, Name: fmt.Sprintf("b%d", r)}).Phase)
	}
}

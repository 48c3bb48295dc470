package monitor_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/operations/monitor"
	"github.com/itemops/itemops/operations/operationstest"
	"github.com/itemops/itemops/phase"
	"github.com/itemops/itemops/storage/memstore"
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

// listSignal is a store that tells when a run's operations have been listed.
type listSignal struct {
	*memstore.Store
	name   string
	listed chan struct{}
}

func (s *listSignal) ListOperations(ctx context.Context, o operations.Owner, f operations.OperationFilter) ([]operations.Operation, error) {
	ops, err := s.Store.ListOperations(ctx, o, f)
	if o.Name == s.name {
		select {
		case s.listed <- struct{}{}:
		default:
		}
	}
	return ops, err
}

// TestPollWithNothingToCheckDoesNotWait polls, with one worker, a run whose operation's
// call hangs (a), then a run waiting for that worker (c), then a run with no operation
// left to check (b): b's poll moves it on at once, without waiting behind c for a worker
// it does not need.
func TestPollWithNothingToCheckDoesNotWait(t *testing.T) {
	e := newEnv(t)
	called := make(chan struct{}, 2)
	release := make(chan struct{})
	e.trackers["p"] = &operationstest.Tracker{ProgressFunc: func(ctx context.Context, op operations.Operation) (operations.Progress, error) {
		called <- struct{}{}
		select {
		case <-release:
		case <-ctx.Done():
		}
		return done, nil
	}}
	a := e.run(phase.Backup, "a", phase.WaitingForPluginOperations, phase.Profile{}, ops("op-1")...)
	c := e.run(phase.Backup, "c", phase.WaitingForPluginOperations, phase.Profile{}, ops("op-1")...)
	finished := ops("op-1")
	finished[0].Status.Phase = operations.OperationCompleted
	b := e.run(phase.Backup, "b", phase.WaitingForPluginOperations, phase.Profile{}, finished...)
	s := &listSignal{Store: e.store, name: "c", listed: make(chan struct{}, 1)}
	m := monitor.New(s, operationstest.Resolver(e.trackers), monitor.WithClock(e.clock), monitor.WithWorkers(1),
		monitor.WithCallTimeout(time.Hour)) // a's call holds its worker until the test lets it go

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	polled := make(chan error, 2)
	go func() { _, err := m.Poll(ctx, a); polled <- err }()
	<-called // a's call holds the one worker
	go func() { _, err := m.Poll(ctx, c); polled <- err }()
	<-s.listed // c is about to wait for a worker
	// b's poll would wait as long as a's call, were it to wait for a worker: the test
	// gives it ten seconds, then fails.
	bctx, bcancel := context.WithTimeout(ctx, 10*time.Second)
	defer bcancel()
	res, err := m.Poll(bctx, b)
	require.NoError(t, err, "b's poll waited for a worker")
	require.Equal(t, phase.Finalizing, res.Phase) // a backup finalizes after its operations
	close(release)
	require.NoError(t, <-polled)
	require.NoError(t, <-polled)
}

// queued waits until m has n polls queued for its workers, or fails when ctx ends.
func queued(ctx context.Context, t *testing.T, m *monitor.Monitor, n int) {
	t.Helper()
	for m.PollsQueued() != n {
		select {
		case <-ctx.Done():
			t.Fatalf("%d polls queued, want %d", m.PollsQueued(), n)
		case <-time.After(time.Millisecond):
		}
	}
}

// TestPollsTakeWorkersInTheirOrder queues three polls, in an order that is not their
// runs' names, behind a call that holds the one worker: when it is let go, the worker
// checks their operations in the order the polls came.
func TestPollsTakeWorkersInTheirOrder(t *testing.T) {
	e := newEnv(t)
	calls := make(chan string)
	release := make(chan struct{})
	e.trackers["p"] = &operationstest.Tracker{ProgressFunc: func(ctx context.Context, op operations.Operation) (operations.Progress, error) {
		calls <- op.Owner.Name
		<-release
		return done, nil
	}}
	order := []string{"a", "d", "b", "c"}
	for _, name := range order {
		e.run(phase.Backup, name, phase.WaitingForPluginOperations, phase.Profile{}, ops("op-1")...)
	}
	m := e.monitor(monitor.WithWorkers(1), monitor.WithCallTimeout(time.Hour))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	polled := make(chan error, len(order))
	for i, name := range order {
		go func() {
			_, err := m.Poll(ctx, operations.Owner{Kind: phase.Backup, Name: name})
			polled <- err
		}()
		if i == 0 {
			require.Equal(t, "a", <-calls) // a's call holds the worker
		} else {
			queued(ctx, t, m, i)
		}
	}
	var got []string
	for range order[1:] {
		release <- struct{}{}
		got = append(got, <-calls)
	}
	release <- struct{}{}
	require.Equal(t, order[1:], got)
	for range order {
		require.NoError(t, <-polled)
	}
	require.Zero(t, m.WorkersBusy())
}

// TestPollCancelledWhileQueued ends a poll that waits for the one worker, which a hung
// call holds: the poll returns at once with the context's error, and its operation is
// never called, not even when the worker frees up.
func TestPollCancelledWhileQueued(t *testing.T) {
	e := newEnv(t)
	var (
		mu     sync.Mutex
		called []string
	)
	entered := make(chan struct{})
	release := make(chan struct{})
	e.trackers["p"] = &operationstest.Tracker{ProgressFunc: func(ctx context.Context, op operations.Operation) (operations.Progress, error) {
		mu.Lock()
		called = append(called, op.Owner.Name)
		mu.Unlock()
		if op.Owner.Name == "a" {
			close(entered)
			<-release
		}
		return done, nil
	}}
	a := e.run(phase.Backup, "a", phase.WaitingForPluginOperations, phase.Profile{}, ops("op-1")...)
	b := e.run(phase.Backup, "b", phase.WaitingForPluginOperations, phase.Profile{}, ops("op-1", "op-2")...)
	m := e.monitor(monitor.WithWorkers(1), monitor.WithCallTimeout(time.Hour))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	polledA := make(chan error, 1)
	go func() { _, err := m.Poll(ctx, a); polledA <- err }()
	<-entered
	bctx, bcancel := context.WithCancel(ctx)
	polledB := make(chan error, 1)
	go func() { _, err := m.Poll(bctx, b); polledB <- err }()
	queued(ctx, t, m, 1)
	bcancel()
	select {
	case err := <-polledB:
		require.ErrorIs(t, err, context.Canceled)
	case <-ctx.Done():
		t.Fatal("b's poll went on waiting for the worker after its context ended")
	}
	require.Zero(t, m.PollsQueued())
	close(release)
	require.NoError(t, <-polledA)
	require.Zero(t, m.WorkersBusy())
	mu.Lock()
	require.Equal(t, []string{"a"}, called)
	mu.Unlock()
	require.Equal(t, phase.WaitingForPluginOperations, e.get(b).Phase)
	for _, id := range []string{"op-1", "op-2"} {
		require.Equal(t, operations.OperationNew, e.op(b, id).Status.Phase, id)
	}
	require.Equal(t, phase.Finalizing, e.get(a).Phase)
}

package operations_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/operations/operationstest"
	"github.com/itemops/itemops/phase"
	"github.com/itemops/itemops/storage/memstore"
)

// cancelFixture stores a restore waiting for six operations of three plugins: one that
// cancels at once, one whose Cancel hangs until its context ends, and one that does not
// support cancelling.
func cancelFixture(t *testing.T, s operations.Store) (operations.Owner, operations.Resolver, map[string]*operationstest.Tracker) {
	t.Helper()
	ctx := context.Background()
	t0 := time.Now().UTC().Truncate(time.Second) // so that no operation has timed out
	o := operations.Owner{Kind: phase.Restore, Name: "r", UID: "u"}
	r := operations.Run{Owner: o, Phase: phase.New, Created: t0}
	require.NoError(t, r.SetPhase(phase.WaitingForPluginOperations, "main run ended", t0))
	trackers := map[string]*operationstest.Tracker{
		"quick": {},
		"hangs": {CancelFunc: func(ctx context.Context, _ operations.Operation) error { <-ctx.Done(); return ctx.Err() }},
		"refuses": {CancelFunc: func(_ context.Context, op operations.Operation) error {
			return operations.AsyncOperationsNotSupported("refuses", op.ID)
		}},
	}
	var ops []operations.Operation
	for i, action := range []string{"quick", "hangs", "refuses", "quick", "hangs", "refuses"} {
		ops = append(ops, operations.Operation{Owner: o, Action: action, ID: fmt.Sprintf("op-%d", i),
			Status: operations.Status{Phase: operations.OperationInProgress, Created: t0}})
	}
	require.NoError(t, s.CreateRun(ctx, r))
	require.NoError(t, s.PutOperations(ctx, o, ops))
	resolve := map[string]operations.Tracker{}
	for name, tr := range trackers {
		resolve[name] = tr
	}
	return o, operationstest.Resolver(resolve), trackers
}

// A cancel request makes the next pass cancel every unfinished operation, whatever its
// plugin does, write them Failed with the reason, and move the run to Failed.
func TestMonitorHonoursCancel(t *testing.T) {
	ctx := context.Background()
	s := memstore.New()
	o, resolver, trackers := cancelFixture(t, s)
	m := operations.NewMonitor(s, resolver, operations.WithCallTimeout(50*time.Millisecond))

	_, err := operations.RequestCancel(ctx, s, o, "jane: wrong namespace", time.Now())
	require.NoError(t, err)
	_, err = m.RunOnce(ctx)
	require.NoError(t, err)

	run, err := s.GetRun(ctx, o)
	require.NoError(t, err)
	require.Equal(t, phase.Failed, run.Phase)
	require.Equal(t, "jane: wrong namespace", run.FailureReason)
	require.Equal(t, 6, run.Errors, "every cancelled operation counts as an error")
	ops, err := s.ListOperations(ctx, o, operations.OperationFilter{})
	require.NoError(t, err)
	for _, op := range ops {
		require.Equal(t, operations.OperationFailed, op.Status.Phase, "operation %s", op.ID)
		require.True(t, strings.HasPrefix(op.Status.Error, operations.CancelledPrefix+"jane: wrong namespace"), "operation %s: %q", op.ID, op.Status.Error)
		require.Equal(t, 1, trackers[op.Action].CancelCalls(op.ID), "Cancel calls of %s", op.ID)
		require.Zero(t, trackers[op.Action].ProgressCalls(op.ID), "a cancelled run's operation was polled")
	}
	// What each plugin said is kept after the reason.
	for _, op := range ops {
		switch op.Action {
		case "refuses":
			require.Contains(t, op.Status.Error, "not supported")
		case "hangs":
			require.Contains(t, op.Status.Error, "no answer within 50ms")
		}
	}
	// The run is terminal: later passes leave it alone, and a new request is refused.
	_, err = m.RunOnce(ctx)
	require.NoError(t, err)
	_, err = operations.RequestCancel(ctx, s, o, "again", time.Now())
	require.ErrorIs(t, err, operations.ErrRunEnded)
}

// A run found InProgress after a restart has its unfinished operations cancelled before
// Monitor.Recover fails it, so that none is left running for a failed run.
func TestMonitorRecoverCancelsOrphans(t *testing.T) {
	ctx := context.Background()
	s := memstore.New()
	o, resolver, trackers := cancelFixture(t, s)
	// The run was InProgress when its process died: its main run had recorded its
	// operations but not yet moved it to waiting.
	require.NoError(t, s.DeleteRun(ctx, o))
	r := operations.Run{Owner: o, Phase: phase.New, Created: time.Now()}
	require.NoError(t, r.SetPhase(phase.InProgress, "started", time.Now()))
	require.NoError(t, s.CreateRun(ctx, r))
	var ops []operations.Operation
	for i, action := range []string{"quick", "hangs", "refuses"} {
		ops = append(ops, operations.Operation{Owner: o, Action: action, ID: fmt.Sprintf("op-%d", i),
			Status: operations.Status{Phase: operations.OperationNew, Created: time.Now()}})
	}
	require.NoError(t, s.PutOperations(ctx, o, ops))

	m := operations.NewMonitor(s, resolver, operations.WithCallTimeout(50*time.Millisecond))
	res, err := m.Recover(ctx)
	require.NoError(t, err)
	require.Equal(t, []operations.Owner{o}, res.Failed)
	got, err := s.ListOperations(ctx, o, operations.OperationFilter{})
	require.NoError(t, err)
	for _, op := range got {
		require.Equal(t, operations.OperationFailed, op.Status.Phase, "operation %s left %s under a failed run", op.ID, op.Status.Phase)
		require.Contains(t, op.Status.Error, operations.CancelledPrefix)
		require.Equal(t, 1, trackers[op.Action].CancelCalls(op.ID))
	}
	run, err := s.GetRun(ctx, o)
	require.NoError(t, err)
	require.Equal(t, phase.Failed, run.Phase)
}

// A cancel requested while a pass polls the run is honoured by the next pass; the
// request and the pass race without losing either.
func TestCancelDuringAPass(t *testing.T) {
	ctx := context.Background()
	s := memstore.New()
	o, _, _ := cancelFixture(t, s)
	started := make(chan struct{})
	var once sync.Once
	slow := &operationstest.Tracker{ProgressFunc: func(ctx context.Context, _ operations.Operation) (operations.Progress, error) {
		once.Do(func() { close(started) })
		time.Sleep(10 * time.Millisecond)
		return operations.Progress{}, nil
	}}
	m := operations.NewMonitor(s, operations.ResolverFunc(func(string) (operations.Tracker, error) { return slow, nil }))
	done := make(chan error, 1)
	go func() { _, err := m.RunOnce(ctx); done <- err }()
	<-started
	_, err := operations.RequestCancel(ctx, s, o, "stop", time.Now())
	require.NoError(t, err)
	require.NoError(t, <-done)
	_, err = m.RunOnce(ctx)
	require.NoError(t, err)
	run, err := s.GetRun(ctx, o)
	require.NoError(t, err)
	require.Equal(t, phase.Failed, run.Phase)
	require.Equal(t, 6, slow.CancelCalls("op-0")+slow.CancelCalls("op-1")+slow.CancelCalls("op-2")+slow.CancelCalls("op-3")+slow.CancelCalls("op-4")+slow.CancelCalls("op-5"))
}

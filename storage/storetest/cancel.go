package storetest

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/operations/monitor"
	"github.com/itemops/itemops/operations/operationstest"
	"github.com/itemops/itemops/phase"
)

// RunCancel checks that a [monitor.Monitor] on the store honours cancel requests: a
// pass cancels every unfinished operation of a cancelled run, whether its plugin cancels
// at once, hangs or refuses, writes them Failed with the request's reason and fails the
// run; Recover does the same for the operations of a run it fails; a request made while a
// pass polls the run is honoured by the next pass. newStore is called as by [Run]. The
// checks use a 50ms call timeout for the plugin that hangs; they start no goroutine that
// outlives them.
func RunCancel(t *testing.T, newStore func(t *testing.T) operations.Store) {
	t.Helper()
	runEach(t, newStore, []check{
		{"HonouredByNextPass", testCancelHonoured},
		{"RecoverCancelsOrphans", testRecoverCancelsOrphans},
		{"RequestDuringAPass", testCancelDuringAPass},
	})
}

// cancelTimeout is the call timeout of the Monitors of the cancel checks: how long the
// Monitor waits for the plugin that hangs.
const cancelTimeout = 50 * time.Millisecond

// cancelFixture stores a restore in phase p with six operations of three plugins: one
// that cancels at once, one whose Cancel hangs until its context ends, and one that does
// not support cancelling. The operations are New when the run is InProgress (its main run
// was still going), else InProgress.
func cancelFixture(t *testing.T, s operations.Store, p phase.Phase) (operations.Owner, operations.Resolver, map[string]*operationstest.Tracker) {
	t.Helper()
	t0 := time.Now().UTC().Truncate(time.Second) // so that no operation has timed out
	o := restore("cancelled")
	r := operations.Run{Owner: o, Phase: phase.New, Created: t0}
	require.NoError(t, r.SetPhase(p, "fixture", t0))
	trackers := map[string]*operationstest.Tracker{
		"quick": {},
		"hangs": {CancelFunc: func(ctx context.Context, _ operations.Operation) error { <-ctx.Done(); return ctx.Err() }},
		"refuses": {CancelFunc: func(_ context.Context, op operations.Operation) error {
			return operations.AsyncOperationsNotSupported("refuses", op.ID)
		}},
	}
	opPhase := operations.OperationInProgress
	if p == phase.InProgress {
		opPhase = operations.OperationNew
	}
	var ops []operations.Operation
	for i, action := range []string{"quick", "hangs", "refuses", "quick", "hangs", "refuses"} {
		ops = append(ops, operations.Operation{Owner: o, Action: action, ID: fmt.Sprintf("op-%d", i),
			Status: operations.Status{Phase: opPhase, Created: t0}})
	}
	mustCreate(t, s, r)
	mustPut(t, s, o, ops)
	resolve := map[string]operations.Tracker{}
	for name, tr := range trackers {
		resolve[name] = tr
	}
	return o, operationstest.Resolver(resolve), trackers
}

// wantCancelled checks that every operation of o is Failed with an error that starts
// with monitor.CancelledPrefix+reason, and that Cancel was called once for each.
func wantCancelled(t *testing.T, s operations.Store, o operations.Owner, reason string, trackers map[string]*operationstest.Tracker) []operations.Operation {
	t.Helper()
	ops, err := s.ListOperations(bg, o, operations.OperationFilter{})
	require.NoError(t, err)
	require.Len(t, ops, 6)
	for _, op := range ops {
		require.Equal(t, operations.OperationFailed, op.Status.Phase, "operation %s left %s", op.ID, op.Status.Phase)
		require.True(t, strings.HasPrefix(op.Status.Error, monitor.CancelledPrefix+reason), "operation %s: %q", op.ID, op.Status.Error)
		require.Equal(t, 1, trackers[op.Action].CancelCalls(op.ID), "Cancel calls of %s", op.ID)
	}
	return ops
}

// A cancel request makes the next pass cancel every unfinished operation, whatever its
// plugin does, write them Failed with the reason, and move the run to Failed.
func testCancelHonoured(t *testing.T, s operations.Store) {
	o, resolver, trackers := cancelFixture(t, s, phase.WaitingForPluginOperations)
	m := monitor.New(s, resolver, monitor.WithCallTimeout(cancelTimeout))

	const reason = "jane: wrong namespace"
	_, err := operations.RequestCancel(bg, s, o, reason, time.Now())
	require.NoError(t, err)
	_, err = m.RunOnce(bg)
	require.NoError(t, err)

	run, err := s.GetRun(bg, o)
	require.NoError(t, err)
	require.Equal(t, phase.Failed, run.Phase)
	require.Equal(t, reason, run.FailureReason)
	require.Equal(t, reason, run.Cancel.Reason)
	require.Equal(t, 6, run.Errors, "every cancelled operation counts as an error")
	require.Equal(t, operations.EventCancelRequested, run.History[len(run.History)-2].Event, "the request is in the history before the failure")
	ops := wantCancelled(t, s, o, reason, trackers)
	for _, op := range ops {
		require.Zero(t, trackers[op.Action].ProgressCalls(op.ID), "a cancelled run's operation %s was polled", op.ID)
		// What each plugin said is kept after the reason.
		switch op.Action {
		case "refuses":
			require.Contains(t, op.Status.Error, "not supported")
		case "hangs":
			require.Contains(t, op.Status.Error, "no answer within "+cancelTimeout.String())
		}
	}
	// The run is terminal: later passes leave it alone, and a new request is refused.
	_, err = m.RunOnce(bg)
	require.NoError(t, err)
	wantCancelled(t, s, o, reason, trackers)
	_, err = operations.RequestCancel(bg, s, o, "again", time.Now())
	require.ErrorIs(t, err, operations.ErrRunEnded)
}

// A run found InProgress after a restart has its unfinished operations cancelled before
// Monitor.Recover fails it, so that none is left running for a failed run.
func testRecoverCancelsOrphans(t *testing.T, s operations.Store) {
	o, resolver, trackers := cancelFixture(t, s, phase.InProgress)
	m := monitor.New(s, resolver, monitor.WithCallTimeout(cancelTimeout))
	res, err := m.Recover(bg)
	require.NoError(t, err)
	require.Equal(t, []operations.Owner{o}, res.Failed)
	wantCancelled(t, s, o, "", trackers)
	run, err := s.GetRun(bg, o)
	require.NoError(t, err)
	require.Equal(t, phase.Failed, run.Phase)
}

// A cancel requested while a pass polls the run is honoured by the next pass; the
// request and the pass race without losing either.
func testCancelDuringAPass(t *testing.T, s operations.Store) {
	o, _, _ := cancelFixture(t, s, phase.WaitingForPluginOperations)
	started := make(chan struct{})
	var once sync.Once
	slow := &operationstest.Tracker{ProgressFunc: func(ctx context.Context, _ operations.Operation) (operations.Progress, error) {
		once.Do(func() { close(started) })
		time.Sleep(10 * time.Millisecond)
		return operations.Progress{}, nil
	}}
	m := monitor.New(s, operations.ResolverFunc(func(string) (operations.Tracker, error) { return slow, nil }))
	done := make(chan error, 1)
	go func() { _, err := m.RunOnce(bg); done <- err }()
	<-started
	_, err := operations.RequestCancel(bg, s, o, "stop", time.Now())
	require.NoError(t, err)
	require.NoError(t, <-done)
	_, err = m.RunOnce(bg)
	require.NoError(t, err)
	run, err := s.GetRun(bg, o)
	require.NoError(t, err)
	require.Equal(t, phase.Failed, run.Phase)
	require.Equal(t, "stop", run.FailureReason)
	wantCancelled(t, s, o, "stop", map[string]*operationstest.Tracker{"quick": slow, "hangs": slow, "refuses": slow})
}

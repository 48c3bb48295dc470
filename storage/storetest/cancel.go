package storetest

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

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
// outlives them. A failure names the read that returned the unexpected value.
func RunCancel[T TB[T]](t T, newStore func(t T) operations.Store) {
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
func cancelFixture(t tb, s operations.Store, p phase.Phase) (operations.Owner, operations.Resolver, map[string]*operationstest.Tracker) {
	t.Helper()
	t0 := time.Now().UTC().Truncate(time.Second) // so that no operation has timed out
	o := restore("cancelled")
	r := operations.Run{Owner: o, Phase: phase.New, Created: t0}
	noError(t, r.SetPhase(p, "fixture", t0), "fixture: SetPhase(%s)", p)
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
// with monitor.CanceledPrefix+reason, and that Cancel was called once for each. after
// names what happened before the read, for the failure messages.
func wantCancelled(t tb, s operations.Store, o operations.Owner, reason, after string, trackers map[string]*operationstest.Tracker) []operations.Operation {
	t.Helper()
	ops, err := s.ListOperations(bg, o, operations.OperationFilter{})
	noError(t, err, "ListOperations(%s) after %s", o, after)
	wantEqual(t, 6, len(ops), "number of operations ListOperations(%s) returned after %s", o, after)
	for _, op := range ops {
		if op.Status.Phase != operations.OperationFailed || !strings.HasPrefix(op.Status.Error, monitor.CanceledPrefix+reason) {
			t.Errorf("ListOperations(%s) after %s returned operation %s %s with error %q, want it Failed with an error that starts with %q",
				o, after, op.ID, op.Status.Phase, op.Status.Error, monitor.CanceledPrefix+reason)
		}
		if n := trackers[op.Action].CancelCalls(op.ID); n != 1 {
			t.Errorf("after %s, the plugin %q had Cancel called %d times for operation %s, want once", after, op.Action, n, op.ID)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	return ops
}

// wantRunFailed checks that GetRun, after what after names, returns the run of o Failed
// with reason as its FailureReason, and returns it.
func wantRunFailed(t tb, s operations.Store, o operations.Owner, reason, after string) operations.Run {
	t.Helper()
	run, err := s.GetRun(bg, o)
	noError(t, err, "GetRun(%s) after %s", o, after)
	if run.Phase != phase.Failed || run.FailureReason != reason {
		t.Fatalf("GetRun(%s) after %s returned the run in %s with FailureReason %q, want it Failed with %q", o, after, run.Phase, run.FailureReason, reason)
	}
	return run
}

// A cancel request makes the next pass cancel every unfinished operation, whatever its
// plugin does, write them Failed with the reason, and move the run to Failed.
func testCancelHonoured(t tb, s operations.Store) {
	o, resolver, trackers := cancelFixture(t, s, phase.WaitingForPluginOperations)
	m := monitor.New(s, resolver, monitor.WithCallTimeout(cancelTimeout))

	const reason = "jane: wrong namespace"
	_, err := operations.RequestCancel(bg, s, o, reason, time.Now())
	noError(t, err, "RequestCancel(%s)", o)
	_, err = m.RunOnce(bg)
	noError(t, err, "Monitor.RunOnce after the cancel request")

	const after = "the pass that followed the cancel request"
	run := wantRunFailed(t, s, o, reason, after)
	wantEqual(t, reason, run.Cancel.Reason, "cancel reason of the run GetRun(%s) returned after %s", o, after)
	wantEqual(t, 6, run.Errors, "errors of the run GetRun(%s) returned after %s (each cancelled operation counts)", o, after)
	if n := len(run.History); n < 2 || run.History[n-2].Event != operations.EventCancelRequested {
		t.Errorf("GetRun(%s) after %s returned the history %+v, want the cancel request just before the failure", o, after, run.History)
	}
	ops := wantCancelled(t, s, o, reason, after, trackers)
	for _, op := range ops {
		if n := trackers[op.Action].ProgressCalls(op.ID); n != 0 {
			t.Errorf("the pass called Progress %d times for operation %s of a cancelled run, want none", n, op.ID)
		}
		// What each plugin said is kept after the reason.
		want := map[string]string{"refuses": "not supported", "hangs": "no answer within " + cancelTimeout.String()}[op.Action]
		if !strings.Contains(op.Status.Error, want) {
			t.Errorf("ListOperations(%s) after %s returned operation %s with error %q, want it to contain %q (what its plugin said)", o, after, op.ID, op.Status.Error, want)
		}
	}
	// The run is terminal: later passes leave it alone, and a new request is refused.
	_, err = m.RunOnce(bg)
	noError(t, err, "a second Monitor.RunOnce")
	wantCancelled(t, s, o, reason, "a second pass", trackers)
	_, err = operations.RequestCancel(bg, s, o, "again", time.Now())
	wantError(t, err, operations.ErrRunEnded, "RequestCancel(%s) of the failed run", o)
}

// A run found InProgress after a restart has its unfinished operations cancelled before
// Monitor.Recover fails it, so that none is left running for a failed run.
func testRecoverCancelsOrphans(t tb, s operations.Store) {
	o, resolver, trackers := cancelFixture(t, s, phase.InProgress)
	m := monitor.New(s, resolver, monitor.WithCallTimeout(cancelTimeout))
	res, err := m.Recover(bg)
	noError(t, err, "Monitor.Recover")
	wantEqual(t, []operations.Owner{o}, res.Failed, "runs Monitor.Recover failed")
	wantCancelled(t, s, o, "", "Monitor.Recover", trackers)
	run, err := s.GetRun(bg, o)
	noError(t, err, "GetRun(%s) after Monitor.Recover", o)
	wantEqual(t, phase.Failed, run.Phase, "phase of the run GetRun(%s) returned after Monitor.Recover", o)
}

// A cancel requested while a pass polls the run is honoured by the next pass; the
// request and the pass race without losing either.
func testCancelDuringAPass(t tb, s operations.Store) {
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
	noError(t, err, "RequestCancel(%s) during a pass", o)
	noError(t, <-done, "the Monitor.RunOnce during which the cancel was requested")
	_, err = m.RunOnce(bg)
	noError(t, err, "the next Monitor.RunOnce")
	const after = "the pass that followed the one during which the cancel was requested"
	wantRunFailed(t, s, o, "stop", after)
	wantCancelled(t, s, o, "stop", after, map[string]*operationstest.Tracker{"quick": slow, "hangs": slow, "refuses": slow})
}

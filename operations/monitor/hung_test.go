package monitor_test

import (
	"context"
	"maps"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/operations/monitor"
	"github.com/itemops/itemops/phase"
)

// stuckTracker is a plugin that ignores its context: a call of an operation listed in
// progress or cancel blocks until the test closes that list's channel, and then answers
// running (Progress) or nil (Cancel). It counts the calls of each operation, and the
// most calls blocked in it at once.
type stuckTracker struct {
	progress, cancel map[string]chan struct{} // by operation ID; nil: answer at once

	mu                     sync.Mutex
	progressCalls, cancels map[string]int
	blocked, mostBlocked   int
}

func newStuckTracker(progress, cancel map[string]chan struct{}) *stuckTracker {
	return &stuckTracker{progress: progress, cancel: cancel, progressCalls: map[string]int{}, cancels: map[string]int{}}
}

// enter counts a call of id in calls and returns when the call may return.
func (s *stuckTracker) enter(calls map[string]int, id string, stuck chan struct{}) {
	s.mu.Lock()
	calls[id]++
	if stuck == nil {
		s.mu.Unlock()
		return
	}
	s.blocked++
	s.mostBlocked = max(s.mostBlocked, s.blocked)
	s.mu.Unlock()
	<-stuck
	s.mu.Lock()
	s.blocked--
	s.mu.Unlock()
}

func (s *stuckTracker) Progress(_ context.Context, op operations.Operation) (operations.Progress, error) {
	s.enter(s.progressCalls, op.ID, s.progress[op.ID])
	return running, nil
}

func (s *stuckTracker) Cancel(_ context.Context, op operations.Operation) error {
	s.enter(s.cancels, op.ID, s.cancel[op.ID])
	return nil
}

// counts returns the Progress and Cancel calls of each operation so far, and the most
// calls that were blocked in the plugin at once.
func (s *stuckTracker) counts() (progress, cancels map[string]int, mostBlocked int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.progressCalls), maps.Clone(s.cancels), s.mostBlocked
}

// hungOutcomes returns an Observer that counts the CallHung outcomes of each action and
// kind of call, and the counts.
func hungOutcomes() (monitor.Observer, func() map[string]int) {
	var mu sync.Mutex
	n := map[string]int{}
	return monitor.Observer{Call: func(s monitor.CallStats) {
			if s.Outcome != monitor.CallHung {
				return
			}
			mu.Lock()
			defer mu.Unlock()
			if s.Cancel {
				n["cancel"]++
			} else {
				n["progress"]++
			}
		}}, func() map[string]int {
			mu.Lock()
			defer mu.Unlock()
			return maps.Clone(n)
		}
}

// release returns a function that closes each channel, and does nothing when called
// again.
func release(chans ...chan struct{}) func() {
	var once sync.Once
	return func() {
		once.Do(func() {
			for _, c := range chans {
				close(c)
			}
		})
	}
}

// TestHungCallIsNotRepeated has a plugin that ignores its context and never answers
// Progress for one operation, under a Monitor that retries many Progress errors: over
// 16 passes the plugin is called once for that operation, the other operation is
// polled every pass, and the Observer is told of each call not made. When the run is
// cancelled, the other operation's Cancel hangs too and is called once; the hung
// operation's Cancel is not called while its Progress hangs, and both operations fail,
// the run with them. Passes after that call nothing. At most two calls are ever blocked
// in the plugin at once, one per operation, and once the plugin returns, no goroutine is
// left.
func TestHungCallIsNotRepeated(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	e := newEnv(t)
	progressStuck, cancelStuck := make(chan struct{}), make(chan struct{})
	unstick := release(progressStuck, cancelStuck)
	defer unstick() // before goleak looks, when the test fails early
	tr := newStuckTracker(map[string]chan struct{}{"hangs": progressStuck}, map[string]chan struct{}{"answers": cancelStuck, "hangs": cancelStuck})
	e.trackers["p"] = tr
	o := e.run(phase.Backup, "b1", phase.WaitingForPluginOperations, phase.Profile{}, ops("hangs", "answers")...)
	observer, hung := hungOutcomes()
	m := e.monitor(monitor.WithCallTimeout(250*time.Millisecond), monitor.WithRetryPolicy(retryAll(1000)), monitor.WithObserver(observer))
	ctx := context.Background()

	const passes = 16
	for range passes {
		_, err := m.RunOnce(ctx)
		require.NoError(t, err)
	}
	progress, cancels, blocked := tr.counts()
	if diff := cmp.Diff(map[string]int{"hangs": 1, "answers": passes}, progress); diff != "" {
		t.Errorf("Progress calls per operation after %d passes (-want +got):\n%s", passes, diff)
	}
	require.Empty(t, cancels)
	require.Equal(t, 1, blocked, "calls blocked in the plugin at once")
	require.Equal(t, map[string]int{"progress": passes - 1}, hung(), "CallHung outcomes")
	require.Equal(t, 1, m.HungCalls())
	require.Equal(t, operations.OperationNew, e.op(o, "hangs").Status.Phase, "the hung operation, its errors retried")

	_, err := operations.RequestCancel(ctx, e.store, o, "jane: wrong namespace", t0)
	require.NoError(t, err)
	for range 5 {
		_, err := m.RunOnce(ctx)
		require.NoError(t, err)
	}
	progress, cancels, blocked = tr.counts()
	if diff := cmp.Diff(map[string]int{"hangs": 1, "answers": passes}, progress); diff != "" {
		t.Errorf("Progress calls per operation after the cancel (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]int{"answers": 1}, cancels); diff != "" {
		t.Errorf("Cancel calls per operation after the cancel (-want +got):\n%s", diff)
	}
	require.Equal(t, 2, blocked, "calls blocked in the plugin at once")
	require.Equal(t, map[string]int{"progress": passes - 1, "cancel": 1}, hung(), "CallHung outcomes")
	require.Equal(t, 2, m.HungCalls())
	require.Equal(t, phase.Failed, e.get(o).Phase)
	for id, want := range map[string]string{
		"hangs":   monitor.CanceledPrefix + "jane: wrong namespace; cancel: no answer within 250ms",
		"answers": monitor.CanceledPrefix + "jane: wrong namespace; cancel: no answer within 250ms",
	} {
		op := e.op(o, id)
		require.Equal(t, operations.OperationFailed, op.Status.Phase, id)
		require.Equal(t, want, op.Status.Error, id)
	}

	unstick()
	require.Eventually(t, func() bool { return m.HungCalls() == 0 }, time.Minute, time.Millisecond, "hung calls once the plugin returned")
}

// TestHungCallAnswerIsDropped checks what happens when a hung call returns at last: its
// answer is dropped, and the next pass calls the plugin again and records that answer.
func TestHungCallAnswerIsDropped(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	e := newEnv(t)
	stuck := make(chan struct{})
	unstick := release(stuck)
	defer unstick() // before goleak looks, when the test fails early
	tr := newStuckTracker(map[string]chan struct{}{"a": stuck}, nil)
	e.trackers["p"] = tr
	o := e.run(phase.Backup, "b1", phase.WaitingForPluginOperations, phase.Profile{}, ops("a")...)
	m := e.monitor(monitor.WithCallTimeout(250*time.Millisecond), monitor.WithRetryPolicy(retryAll(1000)))
	ctx := context.Background()

	for range 3 {
		_, err := m.RunOnce(ctx)
		require.NoError(t, err)
	}
	progress, _, _ := tr.counts()
	require.Equal(t, map[string]int{"a": 1}, progress)

	unstick()
	require.Eventually(t, func() bool { return m.HungCalls() == 0 }, time.Minute, time.Millisecond, "hung calls once the plugin returned")
	require.Equal(t, operations.Status{Phase: operations.OperationNew, Created: t0}, e.op(o, "a").Status, "the late answer is dropped")

	_, err := m.RunOnce(ctx)
	require.NoError(t, err)
	progress, _, _ = tr.counts()
	require.Equal(t, map[string]int{"a": 2}, progress)
	want := operations.Status{Phase: operations.OperationInProgress, NCompleted: running.NCompleted, NTotal: running.NTotal,
		OperationUnits: running.OperationUnits, Created: t0, Started: running.Started, Updated: running.Updated}
	if diff := cmp.Diff(want, e.op(o, "a").Status); diff != "" {
		t.Errorf("the operation after the pass that called the plugin again (-want +got):\n%s", diff)
	}
}

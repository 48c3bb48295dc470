package monitor_test

import (
	"context"
	"errors"
	"maps"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/operations/monitor"
	"github.com/itemops/itemops/operations/operationstest"
	"github.com/itemops/itemops/phase"
)

// TestRunOnceToCompleted drives a backup from WaitingForPluginOperations to Completed with
// the fake clock alone: RunOnce polls, then finalizes what the poll moved on.
func TestRunOnceToCompleted(t *testing.T) {
	e := newEnv(t)
	uploadEnds := t0.Add(time.Hour)
	e.trackers["p"] = scriptedFunc(func(op operations.Operation) operations.Progress {
		if e.clock.Now().Before(uploadEnds) {
			return running
		}
		return done
	})
	o := e.run(phase.Backup, "b1", phase.WaitingForPluginOperations, phase.Profile{}, ops("a", "b")...)
	var finalized atomic.Int32
	m := e.monitor(monitor.WithFinalizer(monitor.FinalizerFunc(func(context.Context, operations.Run, []operations.ResourceIdentifier) error {
		finalized.Add(1)
		return nil
	})))
	ctx := context.Background()

	st, err := m.RunOnce(ctx)
	require.NoError(t, err)
	require.Equal(t, 0, st.Advanced)
	require.Equal(t, 2, st.OperationsInProgress)
	require.Equal(t, phase.WaitingForPluginOperations, e.get(o).Phase)

	e.clock.Advance(time.Hour)
	st, err = m.RunOnce(ctx)
	require.NoError(t, err)
	require.Equal(t, 2, st.Completed)
	require.Equal(t, 1, st.Finalized)
	require.Equal(t, []phase.Phase{phase.InProgress, phase.WaitingForPluginOperations, phase.Finalizing, phase.Completed}, historyTo(e.get(o)))
	require.EqualValues(t, 1, finalized.Load())
}

// scriptedFunc returns a tracker whose Progress answers with f.
func scriptedFunc(f func(operations.Operation) operations.Progress) operations.Tracker {
	return &operationstest.Tracker{ProgressFunc: func(_ context.Context, op operations.Operation) (operations.Progress, error) {
		return f(op), nil
	}}
}

func TestFinalize(t *testing.T) {
	e := newEnv(t)
	fin := e.run(phase.Backup, "b1", phase.FinalizingPartiallyFailed, phase.Profile{})
	waiting := e.run(phase.Backup, "b2", phase.WaitingForPluginOperations, phase.Profile{}, ops("a")...)
	m := e.monitor()
	ctx := context.Background()

	got, err := m.Finalize(ctx, fin)
	require.NoError(t, err)
	require.Equal(t, phase.PartiallyFailed, got)
	require.Equal(t, phase.PartiallyFailed, e.get(fin).Phase)

	got, err = m.Finalize(ctx, waiting)
	require.NoError(t, err)
	require.Equal(t, phase.WaitingForPluginOperations, got, "a waiting run is left alone")

	_, err = m.Finalize(ctx, operations.Owner{Kind: phase.Backup, Name: "none"})
	require.ErrorIs(t, err, operations.ErrNotFound)
}

// inFlightStore counts the store calls in flight, and holds each GetRun until released,
// so that the calls of a pass pile up as far as the Monitor lets them.
type inFlightStore struct {
	operations.Store
	inFlight, most atomic.Int32
	release        chan struct{}
}

func (s *inFlightStore) enter() func() {
	n := s.inFlight.Add(1)
	for {
		m := s.most.Load()
		if n <= m || s.most.CompareAndSwap(m, n) {
			break
		}
	}
	return func() { s.inFlight.Add(-1) }
}

func (s *inFlightStore) GetRun(ctx context.Context, o operations.Owner) (operations.Run, error) {
	defer s.enter()()
	<-s.release
	return s.Store.GetRun(ctx, o)
}

func (s *inFlightStore) ListOperations(ctx context.Context, o operations.Owner, f operations.OperationFilter) ([]operations.Operation, error) {
	defer s.enter()()
	return s.Store.ListOperations(ctx, o, f)
}

func (s *inFlightStore) UpdateRun(ctx context.Context, o operations.Owner, u func(*operations.Run) error) (operations.Run, error) {
	defer s.enter()()
	return s.Store.UpdateRun(ctx, o, u)
}

func (s *inFlightStore) PutOperations(ctx context.Context, o operations.Owner, ops []operations.Operation) error {
	defer s.enter()()
	return s.Store.PutOperations(ctx, o, ops)
}

// TestPassBoundsStoreWork: a pass over 20 waiting runs makes at most n store calls at once.
func TestPassBoundsStoreWork(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []monitor.Option
		want int32
	}{
		{"WithStoreConcurrency", []monitor.Option{monitor.WithStoreConcurrency(3)}, 3},
		{"default: the worker count", []monitor.Option{monitor.WithWorkers(5)}, 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			e.trackers["p"] = scripted(map[string]operations.Progress{"a": done}, nil)
			for i := range 20 {
				e.run(phase.Restore, string(rune('a'+i)), phase.WaitingForPluginOperations, phase.Profile{}, ops("a")...)
			}
			s := &inFlightStore{Store: e.store, release: make(chan struct{})}
			m := monitor.New(s, operations.ResolverFunc(func(string) (operations.Tracker, error) { return e.trackers["p"], nil }),
				append([]monitor.Option{monitor.WithClock(e.clock)}, tc.opts...)...)
			passed := make(chan monitor.PassStats)
			go func() { st, _ := m.RunOnce(context.Background()); passed <- st }()
			// The pass starts as many store calls as it may, which the store holds; a call
			// beyond the bound, made at any time before the pass ends, would raise s.most.
			require.Eventually(t, func() bool { return s.inFlight.Load() == tc.want }, 10*time.Second, time.Millisecond)
			close(s.release)
			st := <-passed
			require.NoError(t, st.Err)
			require.Equal(t, 20, st.Runs)
			require.Equal(t, tc.want, s.most.Load(), "most store calls in flight")
		})
	}
}

// TestFinalizeTimeout: a finalizer that hangs, ignoring its context, is given up after the
// finalize timeout; the run moves on, and so does the Monitor.
func TestFinalizeTimeout(t *testing.T) {
	e := newEnv(t)
	hung := e.run(phase.Backup, "b1", phase.Finalizing, phase.Profile{})
	healthy := e.run(phase.Backup, "b2", phase.Finalizing, phase.Profile{})
	wait := hang(t, true)
	var (
		mu    sync.Mutex
		stats []monitor.FinalizeStats
	)
	m := e.monitor(
		monitor.WithStoreConcurrency(1), // one run at a time: b2 waits behind b1
		monitor.WithFinalizeTimeout(20*time.Millisecond),
		monitor.WithFinalizer(monitor.FinalizerFunc(func(ctx context.Context, r operations.Run, _ []operations.ResourceIdentifier) error {
			if r.Owner.Name == "b1" {
				wait(ctx)
			}
			return nil
		})),
		monitor.WithObserver(monitor.Observer{Finalized: func(s monitor.FinalizeStats) {
			mu.Lock()
			defer mu.Unlock()
			s.Duration = 0
			stats = append(stats, s)
		}}),
	)
	st, err := m.RunOnce(context.Background())
	require.ErrorContains(t, err, "finalizer: no answer within 20ms")
	require.Equal(t, 2, st.Finalized)
	require.Equal(t, []monitor.PhaseCount{{Kind: phase.Backup, Phase: phase.Finalizing, Runs: 2}}, st.RunPhases)
	r := e.get(hung)
	require.Equal(t, phase.PartiallyFailed, r.Phase)
	require.Equal(t, "finalize: no answer within 20ms", r.History[len(r.History)-1].Reason)
	require.Equal(t, phase.Completed, e.get(healthy).Phase)
	mu.Lock()
	defer mu.Unlock()
	want := []monitor.FinalizeStats{
		{Owner: hung, Err: errors.New("no answer within 20ms"), TimedOut: true},
		{Owner: healthy},
	}
	if diff := cmp.Diff(want, stats, equateErrorText); diff != "" {
		t.Errorf("Finalized hook (-want +got):\n%s", diff)
	}
}

var equateErrorText = cmp.Comparer(func(a, b error) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return a.Error() == b.Error()
})

// TestRunChanges: a pass tells the observer of each run it changed, and of no other.
func TestRunChanges(t *testing.T) {
	e := newEnv(t)
	var (
		mu      sync.Mutex
		answers = map[string]operations.Progress{"a": running, "b": running, "c": done}
		changes []monitor.RunChange
	)
	e.trackers["p"] = scriptedFunc(func(op operations.Operation) operations.Progress {
		mu.Lock()
		defer mu.Unlock()
		return answers[op.ID]
	})
	b1 := e.run(phase.Backup, "b1", phase.WaitingForPluginOperations, phase.Profile{}, ops("a", "b")...)
	r1 := e.run(phase.Restore, "r1", phase.WaitingForPluginOperations, phase.Profile{}, ops("c")...)
	e.run(phase.Restore, "r2", phase.WaitingForPluginOperations, phase.Profile{}, ops("d")...) // unchanged: "d" keeps running
	m := e.monitor(monitor.WithObserver(monitor.Observer{RunChanged: func(c monitor.RunChange) {
		mu.Lock()
		defer mu.Unlock()
		changes = append(changes, c)
	}}))
	ctx := context.Background()
	pass := func(set map[string]operations.Progress) []monitor.RunChange {
		t.Helper()
		mu.Lock()
		maps.Copy(answers, set)
		changes = nil
		mu.Unlock()
		_, err := m.RunOnce(ctx)
		require.NoError(t, err)
		mu.Lock()
		defer mu.Unlock()
		return changes
	}

	// Pass 1: r1 completes; b1's operations start, a change of progress only, which
	// the pass writes; r2's "d" reports what the store holds already, which is no
	// change. The runs are polled at once, so their changes come in any order.
	require.ElementsMatch(t, []monitor.RunChange{
		{Owner: r1, From: phase.WaitingForPluginOperations, To: phase.Completed, Completed: 1},
		{Owner: b1, From: phase.WaitingForPluginOperations, To: phase.WaitingForPluginOperations, Running: 2, Progressed: true},
	}, pass(nil))
	// Pass 1b: the same reports again change nothing; then "a" reports more done, a
	// change of progress only.
	require.Empty(t, pass(nil))
	further := running
	further.NCompleted++
	require.Equal(t, []monitor.RunChange{{Owner: b1, From: phase.WaitingForPluginOperations, To: phase.WaitingForPluginOperations, Running: 2, Progressed: true}},
		pass(map[string]operations.Progress{"a": further}))
	// Pass 2: "a" ends, b1 stays waiting. Pass 3: "b" fails, b1 goes through
	// FinalizingPartiallyFailed to PartiallyFailed: one change from the poll, one from
	// the finalizing.
	require.Equal(t, []monitor.RunChange{{Owner: b1, From: phase.WaitingForPluginOperations, To: phase.WaitingForPluginOperations, Running: 1, Completed: 1}},
		pass(map[string]operations.Progress{"a": done}))
	require.Equal(t, []monitor.RunChange{
		{Owner: b1, From: phase.WaitingForPluginOperations, To: phase.FinalizingPartiallyFailed, Failed: 1},
		{Owner: b1, From: phase.FinalizingPartiallyFailed, To: phase.PartiallyFailed},
	}, pass(map[string]operations.Progress{"b": broken}))
	require.Empty(t, pass(nil))
}

// TestObserverCalls: every plugin call and operation timeout is reported, with the
// call's error.
func TestObserverCalls(t *testing.T) {
	e := newEnv(t)
	hangs := hang(t, false)
	e.trackers["ok"] = scripted(map[string]operations.Progress{"a": done}, nil)
	e.trackers["err"] = scripted(nil, map[string]error{"b": errors.New("unreachable")})
	e.trackers["panic"] = scriptedFunc(func(operations.Operation) operations.Progress { panic("boom") })
	e.trackers["hang"] = &hangingTracker{hang: hangs}
	e.trackers["slow"] = scripted(map[string]operations.Progress{"e": running}, nil) // past its timeout
	o := e.run(phase.Backup, "b1", phase.WaitingForPluginOperations, phase.Profile{},
		operations.Operation{ID: "a", Action: "ok"},
		operations.Operation{ID: "b", Action: "err"},
		operations.Operation{ID: "c", Action: "panic"},
		operations.Operation{ID: "d", Action: "hang"},
		operations.Operation{ID: "e", Action: "slow", Status: operations.Status{Created: t0.Add(-5 * time.Hour)}},
	)
	var (
		mu       sync.Mutex
		calls    []monitor.CallStats
		errs     []string // the calls' errors, "action: error"
		timedOut []string
	)
	m := e.monitor(monitor.WithCallTimeout(20*time.Millisecond), monitor.WithObserver(monitor.Observer{
		Call: func(s monitor.CallStats) {
			mu.Lock()
			defer mu.Unlock()
			require.Positive(t, s.Duration)
			s.Duration = 0
			if s.Err != nil {
				errs = append(errs, s.Action+": "+s.Err.Error())
				s.Err = nil
			}
			calls = append(calls, s)
		},
		TimedOut: func(op operations.Operation) {
			mu.Lock()
			defer mu.Unlock()
			timedOut = append(timedOut, op.ID)
		},
	}))
	_, err := m.Poll(context.Background(), o)
	require.NoError(t, err)
	mu.Lock()
	defer mu.Unlock()
	want := []monitor.CallStats{
		{Action: "ok", Outcome: monitor.CallSucceeded},
		{Action: "err", Outcome: monitor.CallErrored},
		{Action: "panic", Outcome: monitor.CallPanicked},
		{Action: "hang", Outcome: monitor.CallTimedOut},
		{Action: "slow", Outcome: monitor.CallSucceeded},
		{Action: "slow", Cancel: true, Outcome: monitor.CallSucceeded},
	}
	require.ElementsMatch(t, want, calls)
	require.ElementsMatch(t, []string{"err: unreachable", "panic: plugin panicked: boom", "hang: no answer within 20ms"}, errs)
	require.Equal(t, []string{"e"}, timedOut)
}

type hangingTracker struct{ hang func(context.Context) }

func (h *hangingTracker) Progress(ctx context.Context, _ operations.Operation) (operations.Progress, error) {
	h.hang(ctx)
	return operations.Progress{}, ctx.Err()
}

func (h *hangingTracker) Cancel(context.Context, operations.Operation) error { return nil }

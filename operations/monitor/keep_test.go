package monitor_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/itemops/itemops/clock/clocktest"
	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/operations/monitor"
	"github.com/itemops/itemops/operations/operationstest"
	"github.com/itemops/itemops/phase"
)

// keepingStore is a claimingStore that can also keep claims, as storage/etcdstore does:
// it records the keep sessions Run starts, what Run tells them, and whether each claim
// was made under one.
type keepingStore struct {
	*claimingStore

	kmu       sync.Mutex // guards the fields below
	intervals []time.Duration
	wake      func() // the wake of the last session
	passes    []int
	ends      int
	kept      []bool // for each ClaimRun, whether its context carried a keep session
}

type keepMark struct{}

func (s *keepingStore) KeepClaims(ctx context.Context, interval time.Duration, wake func()) (context.Context, func(int), func()) {
	s.kmu.Lock()
	defer s.kmu.Unlock()
	s.intervals, s.wake = append(s.intervals, interval), wake
	pass := func(runs int) {
		s.kmu.Lock()
		defer s.kmu.Unlock()
		s.passes = append(s.passes, runs)
	}
	end := func() {
		s.kmu.Lock()
		defer s.kmu.Unlock()
		s.ends++
	}
	return context.WithValue(ctx, keepMark{}, true), pass, end
}

func (s *keepingStore) ClaimRun(ctx context.Context, o operations.Owner) (func(), bool, error) {
	s.kmu.Lock()
	s.kept = append(s.kept, ctx.Value(keepMark{}) != nil)
	s.kmu.Unlock()
	return s.claimingStore.ClaimRun(ctx, o)
}

// TestRunKeepsClaims runs a Monitor on a store that keeps claims: Run starts one keep
// session with its interval, claims every run under it, tells it after each pass how
// many runs the pass listed (two waiting, one finalizing that another Monitor holds),
// and ends it once when it returns. The session's wake starts the second pass, the
// clock not moved. RunOnce outside Run claims without a session.
func TestRunKeepsClaims(t *testing.T) {
	const interval = 3 * time.Second
	s := &keepingStore{claimingStore: newClaimingStore()}
	e := &env{t: t, store: s.Store, clock: clocktest.NewClock(t0), trackers: map[string]operations.Tracker{}}
	running := operations.Progress{NCompleted: 1, NTotal: 2}
	e.trackers["p"] = scripted(map[string]operations.Progress{"a": running, "b": running}, nil)
	e.run(phase.Backup, "one", phase.WaitingForPluginOperations, phase.Profile{}, ops("a")...)
	e.run(phase.Backup, "two", phase.WaitingForPluginOperations, phase.Profile{}, ops("b")...)
	s.hold(e.run(phase.Restore, "held", phase.Finalizing, phase.Profile{RestoreFinalizing: true}))

	passes := make(chan monitor.PassStats, 8) // room for the pass of RunOnce below
	m := monitor.New(s, operationstest.Resolver(e.trackers), monitor.WithClock(e.clock), monitor.WithInterval(interval),
		monitor.WithObserver(monitor.Observer{Pass: func(st monitor.PassStats) { passes <- st }}))
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan error)
	go func() { stopped <- m.Run(ctx) }()
	for i := range 2 {
		st := <-passes
		require.NoError(t, st.Err)
		require.Equal(t, 2, st.Runs, "runs polled in pass %d", i)
		require.Equal(t, 1, st.Skipped, "runs skipped in pass %d", i)
		e.clock.BlockUntilAfterCalls(i + 1) // Run has told the session and waits for the interval
		if i == 0 {
			s.kmu.Lock()
			wake := s.wake
			s.kmu.Unlock()
			wake()
		}
	}
	cancel()
	require.ErrorIs(t, <-stopped, context.Canceled)

	s.kmu.Lock()
	if d := cmp.Diff([]time.Duration{interval}, s.intervals); d != "" {
		t.Errorf("keep sessions started, by interval (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]int{3, 3}, s.passes); d != "" {
		t.Errorf("runs listed, as told to the session after each pass (-want +got):\n%s", d)
	}
	require.Equal(t, 1, s.ends, "keep sessions ended")
	if d := cmp.Diff([]bool{true, true, true, true, true, true}, s.kept); d != "" {
		t.Errorf("claims made under the keep session (-want +got):\n%s", d)
	}
	s.kept = nil
	s.kmu.Unlock()

	_, err := m.RunOnce(context.Background())
	require.NoError(t, err)
	s.kmu.Lock()
	defer s.kmu.Unlock()
	if d := cmp.Diff([]bool{false, false, false}, s.kept); d != "" {
		t.Errorf("claims made under a keep session by RunOnce (-want +got):\n%s", d)
	}
	require.Len(t, s.intervals, 1, "keep sessions started by RunOnce")
}

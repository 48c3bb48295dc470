package monitor_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/itemops/itemops/clock/clocktest"
	"github.com/itemops/itemops/internal/testutil/logrec"
	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/operations/monitor"
	"github.com/itemops/itemops/operations/operationstest"
	"github.com/itemops/itemops/phase"
)

// keepingStore is a claimingStore that is also an operations.ClaimKeeper, as
// storage/etcdstore is: it records the sessions Run starts, what Run tells them, and
// whether each claim was made under a session. Its sessions claim through the
// claimingStore and give the claims up on release.
type keepingStore struct {
	*claimingStore

	kmu      sync.Mutex // guards the fields below
	wake     func()     // the wake of the last session
	events   []string   // the sessions started and what Run told them, in order
	kept     []bool     // for each claim, whether it was made under a session
	listErrs int        // ListRuns fails this many more times
	endErr   error      // what its sessions' EndPass returns
}

var _ operations.ClaimKeeper = (*keepingStore)(nil)

func (s *keepingStore) KeepClaims(_ context.Context, interval time.Duration, wake func()) operations.ClaimSession {
	s.kmu.Lock()
	defer s.kmu.Unlock()
	s.wake = wake
	s.events = append(s.events, fmt.Sprintf("KeepClaims(%s)", interval))
	return keepSession{s}
}

func (s *keepingStore) ClaimRun(ctx context.Context, o operations.Owner) (func(), bool, error) {
	s.record(func() { s.kept = append(s.kept, false) })
	return s.claimingStore.ClaimRun(ctx, o)
}

func (s *keepingStore) ListRuns(ctx context.Context, f operations.RunFilter) ([]operations.Run, error) {
	if s.listFails() {
		return nil, errors.New("injected list failure")
	}
	return s.claimingStore.ListRuns(ctx, f)
}

// ReadPass, the memstore's, fails as ListRuns does.
func (s *keepingStore) ReadPass(ctx context.Context, f operations.RunFilter, fn func([]operations.PassRun) error) error {
	if s.listFails() {
		return errors.New("injected list failure")
	}
	return s.claimingStore.ReadPass(ctx, f, fn)
}

// listFails reports whether a list of runs is to fail, counting it.
func (s *keepingStore) listFails() bool {
	s.kmu.Lock()
	defer s.kmu.Unlock()
	fail := s.listErrs > 0
	if fail {
		s.listErrs--
	}
	return fail
}

func (s *keepingStore) record(f func()) {
	s.kmu.Lock()
	defer s.kmu.Unlock()
	f()
}

// keepSession is a session of a keepingStore.
type keepSession struct{ s *keepingStore }

func (k keepSession) ClaimRun(ctx context.Context, o operations.Owner) (func(), bool, error) {
	k.s.record(func() { k.s.kept = append(k.s.kept, true) })
	return k.s.claimingStore.ClaimRun(ctx, o)
}

func (k keepSession) EndPass(runs int) error {
	var err error
	k.s.record(func() {
		k.s.events = append(k.s.events, fmt.Sprintf("EndPass(%d)", runs))
		err = k.s.endErr
	})
	return err
}

func (k keepSession) EndIncompletePass() {
	k.s.record(func() { k.s.events = append(k.s.events, "EndIncompletePass") })
}

func (k keepSession) End() { k.s.record(func() { k.s.events = append(k.s.events, "End") }) }

// TestRunKeepsClaims runs a Monitor on a store that keeps claims: Run starts one session
// with its interval, claims every run under it, tells it after each pass how many runs
// the pass listed (two waiting, one finalizing that another Monitor holds), or that a
// list of runs failed, and ends it once when it returns. The session's wake starts the
// next pass, the clock not moved. RunOnce outside Run claims without a session.
func TestRunKeepsClaims(t *testing.T) {
	const interval = 3 * time.Second
	s := &keepingStore{claimingStore: newClaimingStore(), listErrs: 1}
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
	// The first pass fails to list the waiting runs (listErrs) and finalizes nothing, as
	// another Monitor holds the finalizing run; the next two poll the waiting runs.
	for i, want := range []struct{ runs, skipped int }{{0, 1}, {2, 1}, {2, 1}} {
		st := <-passes
		if i == 0 {
			require.Error(t, st.Err, "pass %d", i)
		} else {
			require.NoError(t, st.Err, "pass %d", i)
		}
		require.Equal(t, want.runs, st.Runs, "runs polled in pass %d", i)
		require.Equal(t, want.skipped, st.Skipped, "runs skipped in pass %d", i)
		e.clock.BlockUntilAfterCalls(i + 1) // Run has told the session and waits for the interval
		if i < 2 {
			s.kmu.Lock()
			wake := s.wake
			s.kmu.Unlock()
			wake()
		}
	}
	cancel()
	require.ErrorIs(t, <-stopped, context.Canceled)

	s.kmu.Lock()
	want := []string{"KeepClaims(3s)", "EndIncompletePass", "EndPass(3)", "EndPass(3)", "End"}
	if d := cmp.Diff(want, s.events); d != "" {
		t.Errorf("sessions started and what Run told them (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]bool{true, true, true, true, true, true, true}, s.kept); d != "" {
		t.Errorf("claims made under the session (-want +got):\n%s", d)
	}
	s.kept, s.events = nil, nil
	s.kmu.Unlock()

	_, err := m.RunOnce(context.Background())
	require.NoError(t, err)
	s.kmu.Lock()
	defer s.kmu.Unlock()
	if d := cmp.Diff([]bool{false, false, false}, s.kept); d != "" {
		t.Errorf("claims made under a session by RunOnce (-want +got):\n%s", d)
	}
	require.Empty(t, s.events, "sessions started, or told of a pass, by RunOnce")
}

// TestRunLogsWhatKeepsClaimsUnshared runs a Monitor on a store whose claim session
// cannot read the other holders (as a store without list on Leases): the session's
// EndPass says so, and Run logs it as a warning after each pass, and goes on.
func TestRunLogsWhatKeepsClaimsUnshared(t *testing.T) {
	const interval = 3 * time.Second
	forbidden := errors.New("claims: count the claims and members: leases is forbidden")
	s := &keepingStore{claimingStore: newClaimingStore(), endErr: forbidden}
	e := &env{t: t, store: s.Store, clock: clocktest.NewClock(t0), trackers: map[string]operations.Tracker{}}
	e.trackers["p"] = scripted(map[string]operations.Progress{"a": {NCompleted: 1, NTotal: 2}}, nil)
	e.run(phase.Backup, "one", phase.WaitingForPluginOperations, phase.Profile{}, ops("a")...)

	logger, logs := logrec.Logger()
	m := monitor.New(s, operationstest.Resolver(e.trackers), monitor.WithClock(e.clock), monitor.WithInterval(interval),
		monitor.WithLogger(logger))
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan error)
	go func() { stopped <- m.Run(ctx) }()
	for i := range 2 {
		e.clock.BlockUntilAfterCalls(i + 1) // the pass has ended and Run waits for the interval
		if i == 0 {
			e.clock.Advance(interval)
		}
	}
	cancel()
	require.ErrorIs(t, <-stopped, context.Canceled)

	warnings := logs.At(slog.LevelWarn)
	require.Len(t, warnings, 2, "warnings logged in two passes: %v", warnings)
	for _, w := range warnings {
		require.Contains(t, w, forbidden.Error())
	}
}

// TestRunOnceKeepsClaims drives a Monitor with WithKeptClaims by RunOnce on a store that
// keeps claims: the first RunOnce starts one session with the Monitor's interval, every
// pass claims its runs under it and tells it how many runs it listed, and Close ends it,
// once. A RunOnce after Close starts another session. Without the option RunOnce starts
// none, and Close does nothing.
func TestRunOnceKeepsClaims(t *testing.T) {
	const interval = 3 * time.Second
	for _, tc := range []struct {
		name       string
		opts       []monitor.Option
		wantEvents []string
		wantKept   []bool
	}{{
		name:       "kept",
		opts:       []monitor.Option{monitor.WithKeptClaims()},
		wantEvents: []string{"KeepClaims(3s)", "EndPass(2)", "EndPass(2)", "End", "KeepClaims(3s)", "EndPass(2)", "End"},
		wantKept:   []bool{true, true, true, true, true, true},
	}, {
		name:     "default",
		wantKept: []bool{false, false, false, false, false, false},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			s := &keepingStore{claimingStore: newClaimingStore()}
			e := &env{t: t, store: s.Store, clock: clocktest.NewClock(t0), trackers: map[string]operations.Tracker{}}
			running := operations.Progress{NCompleted: 1, NTotal: 2}
			e.trackers["p"] = scripted(map[string]operations.Progress{"a": running, "b": running}, nil)
			e.run(phase.Backup, "one", phase.WaitingForPluginOperations, phase.Profile{}, ops("a")...)
			e.run(phase.Backup, "two", phase.WaitingForPluginOperations, phase.Profile{}, ops("b")...)
			m := monitor.New(s, operationstest.Resolver(e.trackers), append([]monitor.Option{
				monitor.WithClock(e.clock), monitor.WithInterval(interval)}, tc.opts...)...)
			for range 2 {
				st, err := m.RunOnce(context.Background())
				require.NoError(t, err)
				require.Equal(t, 2, st.Runs, "runs polled")
			}
			m.Close()
			m.Close()
			_, err := m.RunOnce(context.Background())
			require.NoError(t, err)
			m.Close()

			s.kmu.Lock()
			defer s.kmu.Unlock()
			if d := cmp.Diff(tc.wantEvents, s.events); d != "" {
				t.Errorf("sessions started and what RunOnce and Close told them (-want +got):\n%s", d)
			}
			if d := cmp.Diff(tc.wantKept, s.kept); d != "" {
				t.Errorf("claims made under a session (-want +got):\n%s", d)
			}
		})
	}
}

// TestRunOnceSessionOnePassAtATime makes two RunOnce passes at once, with WithKeptClaims:
// the first uses the session, the second claims without it (and skips the run the first
// holds). Close, called while the first pass goes on, waits for it: the session ends
// after the pass has told it how it ended.
func TestRunOnceSessionOnePassAtATime(t *testing.T) {
	s := &keepingStore{claimingStore: newClaimingStore()}
	e := &env{t: t, store: s.Store, clock: clocktest.NewClock(t0), trackers: map[string]operations.Tracker{}}
	started, proceed := make(chan struct{}), make(chan struct{})
	e.trackers["p"] = &operationstest.Tracker{ProgressFunc: func(context.Context, operations.Operation) (operations.Progress, error) {
		started <- struct{}{}
		<-proceed
		return operations.Progress{NCompleted: 1, NTotal: 2}, nil
	}}
	e.run(phase.Backup, "one", phase.WaitingForPluginOperations, phase.Profile{}, ops("a")...)
	m := monitor.New(s, operationstest.Resolver(e.trackers), monitor.WithClock(e.clock), monitor.WithKeptClaims())

	first := make(chan error, 1)
	go func() { _, err := m.RunOnce(context.Background()); first <- err }()
	<-started
	st, err := m.RunOnce(context.Background())
	require.NoError(t, err)
	require.Equal(t, monitor.PassStats{Skipped: 1}, monitor.PassStats{Runs: st.Runs, Skipped: st.Skipped},
		"a pass while another uses the session")
	closed := make(chan struct{})
	go func() { m.Close(); close(closed) }()
	close(proceed)
	require.NoError(t, <-first)
	<-closed

	s.kmu.Lock()
	defer s.kmu.Unlock()
	if d := cmp.Diff([]string{"KeepClaims(10s)", "EndPass(1)", "End"}, s.events); d != "" {
		t.Errorf("sessions started and what RunOnce and Close told them (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]bool{true, false}, s.kept); d != "" {
		t.Errorf("claims made under a session (-want +got):\n%s", d)
	}
}

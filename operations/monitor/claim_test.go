package monitor_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
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
	"github.com/itemops/itemops/storage/memstore"
)

// claimingStore is a memstore that is also a RunClaimer: it records who holds each run's
// claim, and lets a test hold claims for "another Monitor" or make claiming fail.
type claimingStore struct {
	*memstore.Store

	mu       sync.Mutex // guards the fields below
	holders  map[operations.Owner]string
	claims   int   // successful ClaimRun calls
	refused  int   // ClaimRun calls that found another holder
	releases int   // release calls that gave a claim up
	err      error // when set, ClaimRun fails with it
}

var _ operations.RunClaimer = (*claimingStore)(nil)

func newClaimingStore() *claimingStore {
	return &claimingStore{Store: memstore.New(), holders: map[operations.Owner]string{}}
}

func (s *claimingStore) ClaimRun(ctx context.Context, o operations.Owner) (func(), bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return nil, false, s.err
	}
	o.UID = ""
	if s.holders[o] != "" {
		s.refused++
		return nil, false, nil
	}
	s.holders[o] = "monitor"
	s.claims++
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			delete(s.holders, o)
			s.releases++
		})
	}, true, nil
}

// refusals returns how many ClaimRun calls found another holder.
func (s *claimingStore) refusals() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.refused
}

// holder returns who holds the claim of o.
func (s *claimingStore) holder(o operations.Owner) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	o.UID = ""
	return s.holders[o]
}

// hold makes "another Monitor" hold the claim of o.
func (s *claimingStore) hold(o operations.Owner) {
	s.mu.Lock()
	defer s.mu.Unlock()
	o.UID = ""
	s.holders[o] = "another monitor"
}

// counts returns the successful claims and the releases so far.
func (s *claimingStore) counts() (claims, releases int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.claims, s.releases
}

// TestPollClaims checks that Poll works on a run only while it holds the run's claim:
// it skips a run another Monitor holds, gives up the claim when done, and fails when the
// claim cannot be decided.
func TestPollClaims(t *testing.T) {
	tests := []struct {
		name       string
		heldByPeer bool  // another Monitor holds the claim
		claimErr   error // ClaimRun fails
		want       monitor.PollResult
		wantErr    error
		wantCalls  int // Progress calls
		wantPhase  phase.Phase
	}{
		{name: "free run is polled and advanced", want: monitor.PollResult{Completed: 2, Phase: phase.Finalizing}, wantCalls: 2, wantPhase: phase.Finalizing},
		{name: "run held by another Monitor is skipped", heldByPeer: true, want: monitor.PollResult{Phase: phase.WaitingForPluginOperations, Skipped: true}, wantPhase: phase.WaitingForPluginOperations},
		{name: "claim failure fails the poll", claimErr: errors.New("backend unreachable"), wantErr: errors.New("backend unreachable"), wantPhase: phase.WaitingForPluginOperations},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newClaimingStore()
			e := &env{t: t, store: s.Store, clock: clocktest.NewClock(t0), trackers: map[string]operations.Tracker{}}
			o := e.run(phase.Backup, "b", phase.WaitingForPluginOperations, phase.Profile{}, ops("x", "y")...)
			if tc.heldByPeer {
				s.hold(o)
			}
			s.err = tc.claimErr
			var heldDuringCalls []string
			var mu sync.Mutex
			tracker := &operationstest.Tracker{ProgressFunc: func(ctx context.Context, op operations.Operation) (operations.Progress, error) {
				mu.Lock()
				defer mu.Unlock()
				heldDuringCalls = append(heldDuringCalls, s.holder(o))
				return done, nil
			}}
			m := monitor.New(s, operationstest.Resolver(map[string]operations.Tracker{"p": tracker}), monitor.WithClock(e.clock))

			got, err := m.Poll(context.Background(), o)
			if tc.wantErr != nil {
				require.ErrorContains(t, err, tc.wantErr.Error(), "Poll with a failing ClaimRun")
				require.ErrorContains(t, err, "claim run Backup/b")
			} else {
				require.NoError(t, err, "Poll")
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("Poll result (-want +got):\n%s", d)
			}
			require.Equal(t, tc.wantCalls, tracker.ProgressCalls("x")+tracker.ProgressCalls("y"), "Progress calls")
			for _, h := range heldDuringCalls {
				require.Equal(t, "monitor", h, "the claim's holder while Progress was called")
			}
			require.Equal(t, tc.wantPhase, e.get(o).Phase, "phase after Poll")
			claims, releases := s.counts()
			require.Equal(t, claims, releases, "every claim taken is given up when Poll returns")
			if tc.heldByPeer {
				require.Equal(t, "another monitor", s.holder(o), "the other Monitor's claim is left alone")
			}
		})
	}
}

// TestPollNeedsNoClaimWhenNotWaiting checks that a run that is not waiting is not claimed.
func TestPollNeedsNoClaimWhenNotWaiting(t *testing.T) {
	s := newClaimingStore()
	e := &env{t: t, store: s.Store, clock: clocktest.NewClock(t0), trackers: map[string]operations.Tracker{}}
	o := e.run(phase.Backup, "b", phase.Completed, phase.Profile{})
	m := monitor.New(s, operationstest.Resolver(nil), monitor.WithClock(e.clock))
	got, err := m.Poll(context.Background(), o)
	require.NoError(t, err)
	require.Equal(t, monitor.PollResult{Phase: phase.Completed}, got)
	claims, _ := s.counts()
	require.Zero(t, claims, "claims taken for a completed run")
}

// TestRunSkipsClaimedRuns runs passes while another Monitor holds a waiting and a
// finalizing run: the pass leaves both alone and counts them as skipped; once the claims
// are given up, the next pass polls and finalizes them.
func TestRunSkipsClaimedRuns(t *testing.T) {
	s := newClaimingStore()
	e := &env{t: t, store: s.Store, clock: clocktest.NewClock(t0), trackers: map[string]operations.Tracker{}}
	e.trackers["p"] = scripted(map[string]operations.Progress{"a": done, "b": done}, nil)
	free := e.run(phase.Backup, "free", phase.WaitingForPluginOperations, phase.Profile{}, ops("a")...)
	heldWaiting := e.run(phase.Backup, "held-waiting", phase.WaitingForPluginOperations, phase.Profile{}, ops("b")...)
	heldFinalizing := e.run(phase.Restore, "held-finalizing", phase.Finalizing, phase.Profile{RestoreFinalizing: true})
	s.hold(heldWaiting)
	s.hold(heldFinalizing)

	var finalizedMu sync.Mutex
	var finalized []string
	passes := make(chan monitor.PassStats)
	m := monitor.New(s, operationstest.Resolver(e.trackers), monitor.WithClock(e.clock),
		monitor.WithObserver(monitor.Observer{Pass: func(st monitor.PassStats) { passes <- st }}),
		monitor.WithFinalizer(monitor.FinalizerFunc(func(ctx context.Context, r operations.Run, _ []operations.ResourceIdentifier) error {
			finalizedMu.Lock()
			defer finalizedMu.Unlock()
			finalized = append(finalized, r.Owner.Name)
			return nil
		})))
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan error)
	go func() { stopped <- m.Run(ctx) }()

	first := <-passes
	require.NoError(t, first.Err)
	require.Equal(t, 1, first.Runs, "runs polled in the first pass")
	require.Equal(t, 2, first.Skipped, "runs skipped in the first pass (one waiting, one finalizing)")
	require.Equal(t, phase.Completed, e.get(free).Phase, "the free run went through Finalizing to Completed")
	require.Equal(t, phase.WaitingForPluginOperations, e.get(heldWaiting).Phase)
	require.Equal(t, phase.Finalizing, e.get(heldFinalizing).Phase)
	require.Equal(t, operations.OperationNew, e.op(heldWaiting, "b").Status.Phase, "an operation of a skipped run")

	// The other Monitor gives its claims up.
	s.mu.Lock()
	clear(s.holders)
	s.mu.Unlock()
	e.clock.BlockUntilWaiters(1)
	e.clock.Advance(monitor.DefaultInterval)
	second := <-passes
	require.NoError(t, second.Err)
	require.Zero(t, second.Skipped, "runs skipped once the claims are free")
	require.Equal(t, phase.Completed, e.get(heldWaiting).Phase)
	require.Equal(t, phase.Completed, e.get(heldFinalizing).Phase)
	finalizedMu.Lock()
	require.ElementsMatch(t, []string{"free", "held-waiting", "held-finalizing"}, finalized, "runs finalized")
	finalizedMu.Unlock()

	cancel()
	require.ErrorIs(t, <-stopped, context.Canceled)
	claims, releases := s.counts()
	require.Equal(t, claims, releases, "every claim taken was given up")
}

// TestHeldRunsLogged checks that the passes of a Monitor log at Info how many runs wait
// for the claims of other Monitors: when that number changes, again once a minute while
// it stays the same, and once when no run waits any more; not every pass.
func TestHeldRunsLogged(t *testing.T) {
	s := newClaimingStore()
	e := &env{t: t, store: s.Store, clock: clocktest.NewClock(t0), trackers: map[string]operations.Tracker{}}
	e.trackers["p"] = scripted(map[string]operations.Progress{}, nil) // never done
	one := e.run(phase.Backup, "one", phase.WaitingForPluginOperations, phase.Profile{}, ops("a")...)
	two := e.run(phase.Backup, "two", phase.WaitingForPluginOperations, phase.Profile{}, ops("b")...)
	e.run(phase.Backup, "free", phase.WaitingForPluginOperations, phase.Profile{}, ops("c")...)
	s.hold(one)
	s.hold(two)
	logger, logs := logrec.Logger()
	m := monitor.New(s, operationstest.Resolver(e.trackers), monitor.WithClock(e.clock), monitor.WithLogger(logger))
	held := func() []string {
		var out []string
		for _, l := range logs.At(slog.LevelInfo) {
			if strings.Contains(l, "claim") {
				out = append(out, l)
			}
		}
		return out
	}
	free := func(o operations.Owner) {
		s.mu.Lock()
		defer s.mu.Unlock()
		o.UID = ""
		delete(s.holders, o)
	}
	since := "since=" + t0.UTC().Format(time.RFC3339)
	for i, step := range []struct {
		advance time.Duration
		change  func()
		want    []string // what the pass adds to the log: each string is in one record
	}{
		{0, nil, []string{"runs=2 " + since}},
		{10 * time.Second, nil, nil},
		{time.Minute, nil, []string{"runs=2 " + since}},
		{10 * time.Second, func() { free(one) }, []string{"runs=1 " + since}},
		{10 * time.Second, func() { free(two) }, []string{"no run waits any more for another Monitor's claim waited=1m30s"}},
		{10 * time.Minute, nil, nil},
	} {
		e.clock.Advance(step.advance)
		if step.change != nil {
			step.change()
		}
		before := len(held())
		st, err := m.RunOnce(context.Background())
		require.NoError(t, err, "pass %d", i)
		got := held()[before:]
		require.Len(t, got, len(step.want), "pass %d (skipped %d) logged %q", i, st.Skipped, got)
		for j, w := range step.want {
			require.Contains(t, got[j], w, "pass %d", i)
		}
	}
}

package monitor_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/operations/monitor"
	"github.com/itemops/itemops/operations/operationstest"
	"github.com/itemops/itemops/phase"
)

// stuck is a report that does not move: 12 of 100 GiB.
var stuck = operations.Progress{NCompleted: 12, NTotal: 100, OperationUnits: "GiB", Description: "copying", Started: started, Updated: started}

// reporting returns a tracker whose Progress answers *report, as it is at the call.
func reporting(mu *sync.Mutex, report *operations.Progress) *operationstest.Tracker {
	return &operationstest.Tracker{ProgressFunc: func(context.Context, operations.Operation) (operations.Progress, error) {
		mu.Lock()
		defer mu.Unlock()
		return *report, nil
	}}
}

// ended records the operations an Observer was told of, timed out or stalled.
type ended struct {
	mu                sync.Mutex
	timedOut, stalled []string
}

func (e *ended) observer() monitor.Observer {
	add := func(to *[]string) func(operations.Operation) {
		return func(op operations.Operation) {
			e.mu.Lock()
			defer e.mu.Unlock()
			*to = append(*to, op.ID)
		}
	}
	return monitor.Observer{TimedOut: add(&e.timedOut), Stalled: add(&e.stalled)}
}

func (e *ended) get() (timedOut, stalled []string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.timedOut...), append([]string(nil), e.stalled...)
}

// oneOp is a waiting run of one operation "a" of plugin "p", whose Progress answers
// what report holds at the call, under a Monitor with opts that tells obs what ended.
type oneOp struct {
	e      *env
	tr     *operationstest.Tracker
	o      operations.Owner
	obs    ended
	m      *monitor.Monitor
	mu     sync.Mutex
	report operations.Progress
}

func newOneOp(t *testing.T, opts ...monitor.Option) *oneOp {
	c := &oneOp{e: newEnv(t), report: stuck}
	c.tr = reporting(&c.mu, &c.report)
	c.e.trackers["p"] = c.tr
	c.o = c.e.run(phase.Backup, "b1", phase.WaitingForPluginOperations, phase.Profile{}, ops("a")...)
	c.m = c.e.monitor(append(opts, monitor.WithObserver(c.obs.observer()))...)
	return c
}

// set changes the report the plugin answers.
func (c *oneOp) set(change func(*operations.Progress)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	change(&c.report)
}

// pass makes a pass after moving the clock d on.
func (c *oneOp) pass(t *testing.T, d time.Duration) monitor.PassStats {
	t.Helper()
	c.e.clock.Advance(d)
	stats, err := c.m.RunOnce(context.Background())
	require.NoError(t, err)
	return stats
}

// TestStallWindow checks that an operation whose report does not move is stalled at the
// window exactly: a nanosecond before, it runs on and its plugin is not cancelled; at the
// window it fails with a message that gives the window, the last counts and the time of
// the last move (without its day when that is today, with it otherwise), its Cancel is
// called once, and the Observer is told once. The window starts at the first check.
func TestStallWindow(t *testing.T) {
	tests := []struct {
		name    string
		window  time.Duration
		wantErr string
	}{
		{"within the day", 30 * time.Minute, "no progress for 30m0s: last 12 of 100 GiB at 12:00:00Z"},
		{"past midnight", 13 * time.Hour, "no progress for 13h0m0s: last 12 of 100 GiB at 2024-05-01T12:00:00Z"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := newOneOp(t, monitor.WithStallTimeout(tc.window), monitor.WithDefaultOperationTimeout(24*time.Hour))
			c.pass(t, 0)
			require.Equal(t, operations.MonitorState{ProgressAt: t0}, c.e.op(c.o, "a").Monitor, "the window starts at the first check")

			c.pass(t, tc.window-time.Nanosecond)
			require.Equal(t, operations.OperationInProgress, c.e.op(c.o, "a").Status.Phase, "a nanosecond before the window")
			require.Zero(t, c.tr.CancelCalls("a"))

			stats := c.pass(t, time.Nanosecond)
			require.Equal(t, 1, stats.Failed)
			got := c.e.op(c.o, "a")
			want := operations.Status{Phase: operations.OperationFailed, Error: tc.wantErr, NCompleted: 12, NTotal: 100, OperationUnits: "GiB",
				Description: "copying", Created: t0, Started: started, Updated: started}
			if d := cmp.Diff(want, got.Status); d != "" {
				t.Errorf("the stalled operation (-want +got):\n%s", d)
			}
			require.Zero(t, got.Monitor, "a finished operation keeps no Monitor state")
			require.Equal(t, 1, c.tr.CancelCalls("a"))
			require.Equal(t, 3, c.tr.ProgressCalls("a"))
			timedOut, stalled := c.obs.get()
			require.Empty(t, timedOut)
			require.Equal(t, []string{"a"}, stalled)
			require.Equal(t, phase.PartiallyFailed, c.e.get(c.o).Phase, "finalized in the same pass")
		})
	}
}

// TestStallProgressResets checks what moves an operation's progress, and so restarts its
// window: an NCompleted above every one seen. A report that changes only what is not
// work done (NTotal, Description, OperationUnits, Started, an Updated time) or whose
// NCompleted goes down does not: the operation stalls at the window of its first check.
func TestStallProgressResets(t *testing.T) {
	tests := []struct {
		name   string
		change func(*operations.Progress)
		moves  bool
	}{
		{"NCompleted up", func(p *operations.Progress) { p.NCompleted++ }, true},
		{"NCompleted down", func(p *operations.Progress) { p.NCompleted-- }, false},
		{"NTotal", func(p *operations.Progress) { p.NTotal++ }, false},
		{"Description", func(p *operations.Progress) { p.Description = "verifying" }, false},
		{"Updated", func(p *operations.Progress) { p.Updated = p.Updated.Add(time.Second) }, false},
		{"nothing", func(*operations.Progress) {}, false},
		{"Updated zero: unknown", func(p *operations.Progress) { p.Updated = time.Time{} }, false},
		{"OperationUnits", func(p *operations.Progress) { p.OperationUnits = "Bytes" }, false},
		{"Started", func(p *operations.Progress) { p.Started = p.Started.Add(time.Second) }, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := newOneOp(t, monitor.WithStallTimeout(30*time.Minute))
			c.pass(t, 0)
			c.set(tc.change)
			c.pass(t, 20*time.Minute)
			wantAt := t0
			if tc.moves {
				wantAt = t0.Add(20 * time.Minute)
			}
			require.Equal(t, wantAt, c.e.op(c.o, "a").Monitor.ProgressAt)

			c.pass(t, 10*time.Minute) // the window of the first check ends
			got := c.e.op(c.o, "a").Status
			if tc.moves {
				require.Equal(t, operations.OperationInProgress, got.Phase)
				c.pass(t, 20*time.Minute) // the window of the move ends
				got = c.e.op(c.o, "a").Status
			}
			require.Equal(t, operations.OperationFailed, got.Phase)
			require.Contains(t, got.Error, monitor.StallPrefix+"30m0s: ")
		})
	}
}

// TestStallPerAction checks that a plugin's own window overrides the Monitor's, and that
// a window of 0 turns stalls off for that plugin.
func TestStallPerAction(t *testing.T) {
	e := newEnv(t)
	var mu sync.Mutex
	report := stuck
	for _, action := range []string{"p", "slow", "silent"} {
		e.trackers[action] = reporting(&mu, &report)
	}
	all := ops("default", "slow", "silent")
	all[1].Action, all[2].Action = "slow", "silent"
	o := e.run(phase.Backup, "b1", phase.WaitingForPluginOperations, phase.Profile{}, all...)
	m := e.monitor(monitor.WithActionStallTimeout("slow", 2*time.Hour), monitor.WithStallTimeout(30*time.Minute),
		monitor.WithActionStallTimeout("silent", 0), monitor.WithDefaultOperationTimeout(24*time.Hour))
	ctx := context.Background()
	phases := func() map[string]operations.OperationPhase {
		got, err := operationstest.OperationPhases(ctx, e.store, o)
		require.NoError(t, err)
		return got
	}
	for _, step := range []struct {
		to   time.Duration
		want map[string]operations.OperationPhase
	}{
		{0, map[string]operations.OperationPhase{"default": operations.OperationInProgress, "slow": operations.OperationInProgress, "silent": operations.OperationInProgress}},
		{30 * time.Minute, map[string]operations.OperationPhase{"default": operations.OperationFailed, "slow": operations.OperationInProgress, "silent": operations.OperationInProgress}},
		{2 * time.Hour, map[string]operations.OperationPhase{"default": operations.OperationFailed, "slow": operations.OperationFailed, "silent": operations.OperationInProgress}},
		{20 * time.Hour, map[string]operations.OperationPhase{"default": operations.OperationFailed, "slow": operations.OperationFailed, "silent": operations.OperationInProgress}},
	} {
		e.clock.AdvanceTo(t0.Add(step.to))
		_, err := m.RunOnce(ctx)
		require.NoError(t, err)
		if d := cmp.Diff(step.want, phases()); d != "" {
			t.Errorf("at t0+%s (-want +got):\n%s", step.to, d)
		}
	}
	require.Zero(t, e.op(o, "silent").Monitor, "a plugin without a window keeps no Monitor state")
}

// TestStallVsTimeout checks the order of what ends an operation at one check: a report
// of completion, then the operation timeout (Velero's message), then the stall window.
func TestStallVsTimeout(t *testing.T) {
	tests := []struct {
		name      string
		report    operations.Progress
		at        time.Duration
		wantPhase operations.OperationPhase
		wantErr   string
		timedOut  []string
		stalled   []string
	}{
		{"both deadlines passed: the timeout", stuck, 31 * time.Minute, operations.OperationFailed, monitor.TimeoutMessage, []string{"a"}, nil},
		{"the stall window only: the timeout is strict", stuck, 30 * time.Minute, operations.OperationFailed,
			"no progress for 30m0s: last 12 of 100 GiB at 12:00:00Z", nil, []string{"a"}},
		{"completed past both", done, 31 * time.Minute, operations.OperationCompleted, "", nil, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := newOneOp(t, monitor.WithStallTimeout(30*time.Minute), monitor.WithDefaultOperationTimeout(30*time.Minute))
			c.pass(t, 0)
			c.set(func(p *operations.Progress) { *p = tc.report })
			c.pass(t, tc.at)
			got := c.e.op(c.o, "a").Status
			require.Equal(t, tc.wantPhase, got.Phase)
			require.Equal(t, tc.wantErr, got.Error)
			timedOut, stalled := c.obs.get()
			require.Equal(t, tc.timedOut, timedOut)
			require.Equal(t, tc.stalled, stalled)
			wantCancels := 0
			if tc.wantPhase == operations.OperationFailed {
				wantCancels = 1
			}
			require.Equal(t, wantCancels, c.tr.CancelCalls("a"))
		})
	}
}

// TestStallOscillation checks the stall rule on a run of reports, one every 5 minutes
// under a window of 30 minutes, each pass made by a new Monitor so that the rule holds
// on what the store keeps: counts that go back and forth stall at the window of the
// first check; counts that rise never stall; counts that start over from 0 move again
// once they pass the highest before, and stall only a window after that. While the
// reports are below the highest count, the store keeps it (MaxCompleted).
func TestStallOscillation(t *testing.T) {
	tests := []struct {
		name      string
		counts    []int64 // reported at t0, t0+5m, t0+10m, ...
		stalledAt time.Duration
	}{
		{"back and forth", []int64{12, 11, 12, 11, 12, 11, 12, 11, 12, 11, 12, 11, 12, 11}, 30 * time.Minute},
		{"rising", []int64{12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25}, 0},
		{"starting over", []int64{12, 0, 4, 8, 13, 13, 13, 13, 13, 13, 13, 13, 13, 13}, 50 * time.Minute},
		{"starting over, not passing the highest", []int64{12, 0, 4, 8, 11, 11, 12, 12, 12, 12, 12, 12, 12, 12}, 30 * time.Minute},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			const window = 30 * time.Minute
			c := newOneOp(t, monitor.WithStallTimeout(window))
			highest := int64(0)
			for i, n := range tc.counts {
				at := time.Duration(i) * 5 * time.Minute
				c.set(func(p *operations.Progress) { p.NCompleted = n })
				c.e.clock.AdvanceTo(t0.Add(at))
				_, err := c.e.monitor(monitor.WithStallTimeout(window)).RunOnce(context.Background())
				require.NoError(t, err)
				got := c.e.op(c.o, "a")
				if tc.stalledAt != 0 && at >= tc.stalledAt {
					require.Equal(t, operations.OperationFailed, got.Status.Phase, "at t0+%s", at)
					require.Contains(t, got.Status.Error, monitor.StallPrefix+"30m0s: ")
					return
				}
				require.Equal(t, operations.OperationInProgress, got.Status.Phase, "at t0+%s", at)
				highest = max(highest, n)
				wantMax := int64(0)
				if n < highest {
					wantMax = highest
				}
				require.Equal(t, wantMax, got.Monitor.MaxCompleted, "at t0+%s", at)
			}
			require.Zero(t, tc.stalledAt, "never stalled")
		})
	}
}

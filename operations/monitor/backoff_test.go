package monitor_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/itemops/itemops/clock/clocktest"
	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/operations/monitor"
	"github.com/itemops/itemops/operations/operationstest"
	"github.com/itemops/itemops/phase"
	"github.com/itemops/itemops/storage/boltstore"
	"github.com/itemops/itemops/storage/memstore"
)

// failing returns a tracker whose Progress returns the errors of errs in turn, then
// answers report; and the count of its calls.
func failing(report operations.Progress, errs ...error) (*operationstest.Tracker, *atomic.Int32) {
	var n atomic.Int32
	return &operationstest.Tracker{ProgressFunc: func(context.Context, operations.Operation) (operations.Progress, error) {
		if i := int(n.Add(1)) - 1; i < len(errs) {
			return operations.Progress{}, errs[i]
		}
		return report, nil
	}}, &n
}

// retries records what the Observer is told of retries.
type retries struct {
	mu  sync.Mutex
	got []monitor.RetryStats
}

func (r *retries) observer() monitor.Observer {
	return monitor.Observer{Retry: func(s monitor.RetryStats) {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.got = append(r.got, s)
	}}
}

func (r *retries) stats() []monitor.RetryStats {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]monitor.RetryStats(nil), r.got...)
}

// backoff is the policy of the tests below: waits of 10s, 20s, 40s, then 60s.
var backoff = monitor.RetryPolicy{InitialInterval: 10 * time.Second, MaxInterval: time.Minute, MaxAttempts: 10}

// TestRetryBackoff checks, for each kind of transient error, that an operation is asked
// again only when its wait is over, with waits that double up to the cap; that its state
// in the store says so after each error; that no pass within a wait calls the plugin;
// and that the answer after five errors clears the state and the operation completes.
func TestRetryBackoff(t *testing.T) {
	tests := []struct {
		name string
		err  error
	}{
		{"Retryable", operations.Retryable(errors.New("busy"))},
		{"gRPC Unavailable, marked by its client", markedGRPC(14)},
		{"a wrapped deadline", fmt.Errorf("snapshot status: %w", context.DeadlineExceeded)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			errs := []error{tc.err, tc.err, tc.err, tc.err, tc.err}
			tr, calls := failing(done, errs...)
			e.trackers["p"] = tr
			o := e.run(phase.Backup, "b1", phase.WaitingForPluginOperations, phase.Profile{}, ops("a")...)
			var obs retries
			m := e.monitor(monitor.WithRetryPolicy(backoff), monitor.WithObserver(obs.observer()))
			ctx := context.Background()

			var want []monitor.RetryStats
			for i, wait := range []time.Duration{10 * time.Second, 20 * time.Second, 40 * time.Second, time.Minute, time.Minute} {
				_, err := m.RunOnce(ctx)
				require.NoError(t, err)
				now := e.clock.Now()
				wantState := operations.MonitorState{Attempts: i + 1, ErrorSince: t0, NextPoll: now.Add(wait), LastError: tc.err.Error()}
				if d := cmp.Diff(wantState, e.op(o, "a").Monitor); d != "" {
					t.Fatalf("after error %d (-want +got):\n%s", i+1, d)
				}
				want = append(want, monitor.RetryStats{Action: "p", Attempt: i + 1, Delay: wait, Outcome: monitor.RetryScheduled})

				e.clock.Advance(wait - time.Nanosecond)
				stats, err := m.RunOnce(ctx)
				require.NoError(t, err)
				require.Equal(t, i+1, int(calls.Load()), "a pass within the wait after error %d calls the plugin", i+1)
				require.Equal(t, 1, stats.OperationsDeferred)
				require.Equal(t, now.Add(wait), stats.NextDue)
				require.Zero(t, stats.Operations, "a deferred operation is not checked")
				e.clock.Advance(time.Nanosecond)
			}
			stats, err := m.RunOnce(ctx)
			require.NoError(t, err)
			require.Equal(t, 1, stats.Completed)
			got := e.op(o, "a")
			require.Equal(t, operations.OperationCompleted, got.Status.Phase)
			require.Zero(t, got.Monitor)
			want = append(want, monitor.RetryStats{Action: "p", Attempt: 5, Outcome: monitor.RetryRecovered})
			if d := cmp.Diff(want, obs.stats()); d != "" {
				t.Errorf("Observer.Retry (-want +got):\n%s", d)
			}
		})
	}
}

// TestRetryRecoveredKeepsRunning checks that an answer that does not end the operation
// clears the retry state in one write, and that the count of a later row starts at 1.
func TestRetryRecoveredKeepsRunning(t *testing.T) {
	e := newEnv(t)
	unavailable := markedGRPC(14)
	var n atomic.Int32
	e.trackers["p"] = &operationstest.Tracker{ProgressFunc: func(context.Context, operations.Operation) (operations.Progress, error) {
		if n.Add(1) == 2 {
			return running, nil
		}
		return operations.Progress{}, unavailable
	}}
	o := e.run(phase.Backup, "b1", phase.WaitingForPluginOperations, phase.Profile{}, ops("a")...)
	m := e.monitor(monitor.WithRetryPolicy(backoff))
	ctx := context.Background()
	for _, want := range []operations.MonitorState{
		{Attempts: 1, ErrorSince: t0, NextPoll: t0.Add(10 * time.Second), LastError: unavailable.Error()},
		{},
		{Attempts: 1, ErrorSince: t0.Add(20 * time.Second), NextPoll: t0.Add(30 * time.Second), LastError: unavailable.Error()},
	} {
		_, err := m.RunOnce(ctx)
		require.NoError(t, err)
		require.Equal(t, want, e.op(o, "a").Monitor)
		e.clock.Advance(10 * time.Second)
	}
	require.Equal(t, operations.OperationInProgress, e.op(o, "a").Status.Phase)
}

// TestRetryExhausted checks that the attempts and the time a policy allows fail the
// operation, with the plugin's text and how many attempts were made over how long, and
// that the Observer is told.
func TestRetryExhausted(t *testing.T) {
	unavailable := markedGRPC(14)
	tests := []struct {
		name    string
		policy  monitor.RetryPolicy
		at      []time.Duration // when the errors come, from t0: each at its next poll
		wantErr string
	}{
		{"MaxAttempts", monitor.RetryPolicy{InitialInterval: 10 * time.Second, MaxAttempts: 3},
			[]time.Duration{0, 10 * time.Second, 30 * time.Second}, unavailable.Error() + " (after 3 attempts over 30s)"},
		{"MaxAttempts 1", monitor.RetryPolicy{InitialInterval: 10 * time.Second, MaxAttempts: 1},
			[]time.Duration{0}, unavailable.Error() + " (after 1 attempt over 0s)"},
		{"MaxElapsed: the last wait is cut to the bound", monitor.RetryPolicy{InitialInterval: 10 * time.Second, MaxElapsed: 25 * time.Second},
			[]time.Duration{0, 10 * time.Second, 25 * time.Second}, unavailable.Error() + " (after 3 attempts over 25s)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			tr, calls := failing(done, unavailable, unavailable, unavailable, unavailable)
			e.trackers["p"] = tr
			o := e.run(phase.Backup, "b1", phase.WaitingForPluginOperations, phase.Profile{}, ops("a")...)
			var obs retries
			m := e.monitor(monitor.WithRetryPolicy(tc.policy), monitor.WithObserver(obs.observer()))
			ctx := context.Background()
			for _, at := range tc.at {
				e.clock.AdvanceTo(t0.Add(at))
				_, err := m.RunOnce(ctx)
				require.NoError(t, err)
			}
			require.Equal(t, len(tc.at), int(calls.Load()))
			got := e.op(o, "a")
			require.Equal(t, operations.OperationFailed, got.Status.Phase)
			require.Equal(t, tc.wantErr, got.Status.Error)
			require.Zero(t, got.Monitor)
			s := obs.stats()
			require.Equal(t, monitor.RetryStats{Action: "p", Attempt: len(tc.at), Outcome: monitor.RetryExhausted}, s[len(s)-1])
			require.Zero(t, tr.CancelCalls("a"), "an operation whose retries are used up is not cancelled, as one that errs in Velero")
		})
	}
}

// TestRetryNonRetryable checks that under a policy, an error the policy does not call
// transient fails the operation at its first error with the plugin's text, as Velero
// fails it, and the Observer is told that the policy refused it.
func TestRetryNonRetryable(t *testing.T) {
	tests := []struct {
		name    string
		err     error
		panics  bool
		wantErr string
	}{
		{"a plain error", errors.New("bucket gone"), false, "bucket gone"},
		{"invalid operation ID", operations.InvalidOperationID("p", "a"), false, `p: operation "a": invalid operation ID`},
		{"not supported, made retryable", operations.Retryable(operations.AsyncOperationsNotSupported("p", "a")), false,
			`p: operation "a": asynchronous operations not supported`},
		{"gRPC Unknown", grpcErr(2), false, "rpc error: code = 2"},
		{"gRPC Unavailable, unmarked", grpcErr(14), false, "rpc error: code = 14"},
		{"a panic", nil, true, "progress: plugin panicked: boom"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			e.trackers["p"] = &operationstest.Tracker{ProgressFunc: func(context.Context, operations.Operation) (operations.Progress, error) {
				if tc.panics {
					panic("boom")
				}
				return operations.Progress{}, tc.err
			}}
			o := e.run(phase.Backup, "b1", phase.WaitingForPluginOperations, phase.Profile{}, ops("a")...)
			var obs retries
			m := e.monitor(monitor.WithRetryPolicy(backoff), monitor.WithObserver(obs.observer()))
			_, err := m.RunOnce(context.Background())
			require.NoError(t, err)
			got := e.op(o, "a")
			require.Equal(t, operations.Status{Phase: operations.OperationFailed, Error: tc.wantErr, Created: t0}, got.Status)
			require.Zero(t, got.Monitor)
			require.Equal(t, []monitor.RetryStats{{Action: "p", Attempt: 1, Outcome: monitor.RetryRefused}}, obs.stats())
		})
	}
}

// TestRetryableOfOnesOwn checks the other way a caller of gRPC plugins gets their
// transient codes retried: a policy's Retryable that reads the status code. It retries
// an unmarked Unavailable, fails an Unknown at once, and cannot retry an error that
// wraps operations.ErrAsyncOperationsNotSupported whatever it says.
func TestRetryableOfOnesOwn(t *testing.T) {
	transientCode := func(err error) bool {
		var st interface{ GRPCStatus() *grpcStatus }
		if errors.As(err, &st) && st.GRPCStatus() != nil {
			return st.GRPCStatus().Code() == 14
		}
		return monitor.Transient(err)
	}
	policy := backoff
	policy.Retryable = transientCode
	tests := []struct {
		name      string
		err       error
		wantPhase operations.OperationPhase
		wantError string
	}{
		{"gRPC Unavailable", grpcErr(14), operations.OperationNew, ""},
		{"gRPC Unknown", grpcErr(2), operations.OperationFailed, "rpc error: code = 2"},
		{"a call given up", fmt.Errorf("progress: %w", monitor.NoAnswer(time.Second)), operations.OperationNew, ""},
		{"not supported, over gRPC Unavailable", errors.Join(grpcErr(14), operations.ErrAsyncOperationsNotSupported),
			operations.OperationFailed, "rpc error: code = 14\nasynchronous operations not supported"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			e.trackers["p"] = &operationstest.Tracker{ProgressFunc: func(context.Context, operations.Operation) (operations.Progress, error) {
				return operations.Progress{}, tc.err
			}}
			o := e.run(phase.Backup, "b1", phase.WaitingForPluginOperations, phase.Profile{}, ops("a")...)
			_, err := e.monitor(monitor.WithRetryPolicy(policy)).RunOnce(context.Background())
			require.NoError(t, err)
			got := e.op(o, "a")
			require.Equal(t, tc.wantPhase, got.Status.Phase)
			require.Equal(t, tc.wantError, got.Status.Error)
			if tc.wantError == "" {
				require.Equal(t, 1, got.Monitor.Attempts, "the error is counted for a retry")
			}
		})
	}
}

// TestRetryPastTimeoutOrStall checks that a transient error that comes past the
// operation's timeout, or past the end of its stall window, is not retried: the
// operation is cancelled and failed as timed out or stalled, with the error appended.
func TestRetryPastTimeoutOrStall(t *testing.T) {
	unavailable := markedGRPC(14)
	tests := []struct {
		name     string
		at       time.Duration // of the error after the first
		wantErr  string
		timedOut []string
		stalled  []string
	}{
		{"past the timeout", time.Hour + time.Nanosecond, monitor.TimeoutMessage + "; " + unavailable.Error(), []string{"a"}, nil},
		{"past the stall window", 30 * time.Minute,
			"no progress for 30m0s: last 0 of 0 at 12:00:00Z; last error: " + unavailable.Error(), nil, []string{"a"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			tr, _ := failing(done, unavailable, unavailable)
			e.trackers["p"] = tr
			o := e.run(phase.Backup, "b1", phase.WaitingForPluginOperations, phase.Profile{}, ops("a")...)
			var obs ended
			stall := 30 * time.Minute
			if tc.stalled == nil {
				stall = 0
			}
			m := e.monitor(monitor.WithRetryPolicy(monitor.RetryPolicy{InitialInterval: 2 * time.Hour, MaxAttempts: 10}),
				monitor.WithStallTimeout(stall), monitor.WithDefaultOperationTimeout(time.Hour), monitor.WithObserver(obs.observer()))
			ctx := context.Background()
			_, err := m.RunOnce(ctx)
			require.NoError(t, err)
			e.clock.AdvanceTo(t0.Add(tc.at)) // within the wait of 2h: due all the same
			_, err = m.RunOnce(ctx)
			require.NoError(t, err)
			got := e.op(o, "a")
			require.Equal(t, operations.OperationFailed, got.Status.Phase)
			require.Equal(t, tc.wantErr, got.Status.Error)
			require.Equal(t, 1, tr.CancelCalls("a"))
			timedOut, stalled := obs.get()
			require.Equal(t, tc.timedOut, timedOut)
			require.Equal(t, tc.stalled, stalled)
		})
	}
}

// TestBackoffNotCalled checks that a pass leaves the operations that wait for their next
// poll alone (no plugin call and no store write, counted in OperationsDeferred, the
// earliest due time in NextDue), and that an operation is checked within its wait when
// its run is being cancelled or its timeout has passed.
func TestBackoffNotCalled(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	store := &countingStore{Store: e.store}
	unavailable := markedGRPC(14)
	tr := &operationstest.Tracker{ProgressFunc: func(context.Context, operations.Operation) (operations.Progress, error) {
		return operations.Progress{}, unavailable
	}}
	e.trackers["p"] = tr
	waits := e.run(phase.Backup, "waits", phase.WaitingForPluginOperations, phase.Profile{}, ops("a", "b", "c")...)
	cancelled := e.run(phase.Backup, "cancelled", phase.WaitingForPluginOperations, phase.Profile{}, ops("d")...)
	policy := monitor.RetryPolicy{InitialInterval: 10 * time.Minute, MaxInterval: time.Hour, MaxAttempts: 10}
	m := monitor.New(store, operationstest.Resolver(e.trackers), monitor.WithClock(e.clock), monitor.WithRetryPolicy(policy),
		monitor.WithDefaultOperationTimeout(time.Hour))

	_, err := m.RunOnce(ctx)
	require.NoError(t, err)
	require.Equal(t, 4, callsOf(tr, "a", "b", "c", "d"))
	for range 3 {
		e.clock.Advance(time.Minute)
		puts := store.puts.Load()
		stats, err := m.RunOnce(ctx)
		require.NoError(t, err)
		require.Equal(t, 4, callsOf(tr, "a", "b", "c", "d"), "no call within the wait")
		require.Equal(t, puts, store.puts.Load(), "no write within the wait")
		require.Equal(t, 4, stats.OperationsDeferred)
		require.Equal(t, t0.Add(10*time.Minute), stats.NextDue)
	}

	// A cancel request makes the run's operations due.
	_, err = operations.RequestCancel(ctx, e.store, cancelled, "jane", e.clock.Now())
	require.NoError(t, err)
	stats, err := m.RunOnce(ctx)
	require.NoError(t, err)
	require.Equal(t, 3, stats.OperationsDeferred)
	require.Equal(t, 1, tr.CancelCalls("d"))
	require.Equal(t, phase.Failed, e.get(cancelled).Phase)

	// At t0+1h their wait is over: the second error, and a wait of 20m.
	e.clock.AdvanceTo(t0.Add(time.Hour))
	stats, err = m.RunOnce(ctx)
	require.NoError(t, err)
	require.Zero(t, stats.OperationsDeferred)
	require.Equal(t, 7, callsOf(tr, "a", "b", "c", "d"))
	for _, id := range []string{"a", "b", "c"} {
		require.Equal(t, t0.Add(time.Hour+20*time.Minute), e.op(waits, id).Monitor.NextPoll)
	}

	// A nanosecond later, past their timeout, they are due within their wait, and time out.
	e.clock.Advance(time.Nanosecond)
	stats, err = m.RunOnce(ctx)
	require.NoError(t, err)
	require.Equal(t, 3, stats.Failed)
	require.Equal(t, 10, callsOf(tr, "a", "b", "c", "d"))
	for _, id := range []string{"a", "b", "c"} {
		require.Equal(t, monitor.TimeoutMessage+"; "+unavailable.Error(), e.op(waits, id).Status.Error)
		require.Equal(t, 1, tr.CancelCalls(id))
	}
}

// callsOf returns the Progress calls of tr for the operations ids, in all.
func callsOf(tr *operationstest.Tracker, ids ...string) int {
	n := 0
	for _, id := range ids {
		n += tr.ProgressCalls(id)
	}
	return n
}

// TestWakeEarliestDue checks how long Run waits between passes: the interval when no
// operation waits for its next poll; until the earliest next poll when that comes
// sooner; and never less than a tenth of the interval.
func TestWakeEarliestDue(t *testing.T) {
	tests := []struct {
		name     string
		initial  time.Duration // the policy's first wait; 0: no operation errs
		wantWait time.Duration
	}{
		{"nothing waits: the interval", 0, time.Minute},
		{"a next poll within the interval", 20 * time.Second, 20 * time.Second},
		{"a next poll past the interval", 5 * time.Minute, time.Minute},
		{"a next poll below the floor", time.Second, 6 * time.Second},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			var err error
			if tc.initial > 0 {
				err = markedGRPC(14)
			}
			e.trackers["p"] = &operationstest.Tracker{ProgressFunc: func(context.Context, operations.Operation) (operations.Progress, error) {
				return running, err
			}}
			e.run(phase.Backup, "b1", phase.WaitingForPluginOperations, phase.Profile{}, ops("a")...)
			passes := make(chan monitor.PassStats, 10)
			opts := []monitor.Option{monitor.WithInterval(time.Minute), monitor.WithObserver(monitor.Observer{Pass: func(s monitor.PassStats) { passes <- s }})}
			if tc.initial > 0 {
				opts = append(opts, monitor.WithRetryPolicy(monitor.RetryPolicy{InitialInterval: tc.initial, BackoffCoefficient: 1, MaxAttempts: 100}))
			}
			m := e.monitor(opts...)
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error)
			go func() { done <- m.Run(ctx) }()
			defer func() {
				cancel()
				require.ErrorIs(t, <-done, context.Canceled)
			}()
			<-passes
			e.clock.BlockUntilWaiters(1)
			e.clock.Advance(tc.wantWait - time.Nanosecond)
			select {
			case <-passes:
				t.Fatalf("a pass %s after the first, want %s", tc.wantWait-time.Nanosecond, tc.wantWait)
			case <-time.After(20 * time.Millisecond):
			}
			e.clock.Advance(time.Nanosecond)
			<-passes
		})
	}
}

// TestScheduleAcrossRestart checks that the retry count, the next poll and the stall
// window are kept in the store: a new Monitor on the same store (memstore's, or a
// boltstore closed and opened again) makes no call before the next poll, goes on
// counting to the bound, and stalls an operation from the time of the first check, which
// an earlier Monitor made.
func TestScheduleAcrossRestart(t *testing.T) {
	stores := map[string]func(t *testing.T) (reopen func() operations.Store){
		"memstore": func(*testing.T) func() operations.Store {
			s := memstore.New()
			return func() operations.Store { return s }
		},
		"boltstore": func(t *testing.T) func() operations.Store {
			path := filepath.Join(t.TempDir(), "db")
			var cur *boltstore.Store
			return func() operations.Store {
				if cur != nil {
					require.NoError(t, cur.Close())
				}
				s, err := boltstore.Open(path, nil)
				require.NoError(t, err)
				t.Cleanup(func() { s.Close() })
				cur = s
				return s
			}
		},
	}
	for name, newStore := range stores {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			reopen := newStore(t)
			clk := clocktest.NewClock(t0)
			unavailable := markedGRPC(14)
			var mu sync.Mutex
			report := stuck
			flaky, calls := failing(stuck, unavailable, unavailable, unavailable)
			trackers := operationstest.Resolver(map[string]operations.Tracker{"flaky": flaky, "slow": reporting(&mu, &report)})
			o := operations.Owner{Kind: phase.Backup, Name: "b1"}
			s := reopen()
			_, err := operations.StartRun(ctx, s, operations.Run{Owner: o, Created: t0}, func(context.Context) (operations.MainRun, error) {
				return operations.MainRun{Operations: []operations.Operation{{Action: "flaky", ID: "flaky"}, {Action: "slow", ID: "slow"}}}, nil
			})
			require.NoError(t, err)
			opts := []monitor.Option{monitor.WithClock(clk), monitor.WithRetryPolicy(monitor.RetryPolicy{InitialInterval: time.Minute, MaxAttempts: 3}),
				monitor.WithStallTimeout(30 * time.Minute)}
			pass := func(at time.Duration) {
				t.Helper()
				clk.AdvanceTo(t0.Add(at))
				_, err := monitor.New(s, trackers, opts...).RunOnce(ctx)
				require.NoError(t, err)
			}
			get := func(id string) operations.Operation {
				t.Helper()
				op, err := s.GetOperation(ctx, o, id)
				require.NoError(t, err)
				return op
			}
			pass(0)
			require.Equal(t, 1, int(calls.Load()))

			// Each pass below is a new Monitor over the store opened again: nothing is
			// called before the next poll, at t0+1m, then at t0+3m.
			s = reopen()
			pass(time.Minute - time.Nanosecond)
			require.Equal(t, 1, int(calls.Load()))
			s = reopen()
			pass(time.Minute)
			require.Equal(t, 2, int(calls.Load()))
			require.Equal(t, t0.Add(3*time.Minute), get("flaky").Monitor.NextPoll)
			s = reopen()
			pass(3*time.Minute - time.Nanosecond)
			require.Equal(t, 2, int(calls.Load()))
			s = reopen()
			pass(3 * time.Minute)
			require.Equal(t, 3, int(calls.Load()))
			require.Equal(t, unavailable.Error()+" (after 3 attempts over 3m0s)", get("flaky").Status.Error)

			s = reopen()
			pass(30*time.Minute - time.Nanosecond)
			require.Equal(t, operations.OperationInProgress, get("slow").Status.Phase)
			s = reopen()
			pass(30 * time.Minute)
			require.Equal(t, "no progress for 30m0s: last 12 of 100 GiB at 12:00:00Z", get("slow").Status.Error)
		})
	}
}

// untouchable is a store that panics on any call: its Store is nil.
type untouchable struct{ operations.Store }

// TestInvalidOptions checks that an option given an invalid value makes every method
// that works on the store (Run, RunOnce, Poll, Finalize, Recover, StartRun, RequestCancel)
// return an error wrapping operations.ErrInvalid that names the option, before any call
// to the store, and that New does not panic.
func TestInvalidOptions(t *testing.T) {
	tests := []struct {
		name     string
		opt      monitor.Option
		wantText string
	}{
		{"negative stall timeout", monitor.WithStallTimeout(-time.Second), "WithStallTimeout: negative stall timeout -1s"},
		{"negative stall timeout of a plugin", monitor.WithActionStallTimeout("p", -1), "WithActionStallTimeout(p)"},
		{"a policy without a bound", monitor.WithRetryPolicy(monitor.RetryPolicy{InitialInterval: time.Second}), "WithRetryPolicy: retry policy: no bound"},
		{"a plugin's coefficient below 1", monitor.WithActionRetryPolicy("p", monitor.RetryPolicy{MaxAttempts: 1, BackoffCoefficient: 0.5}),
			"WithActionRetryPolicy(p): retry policy: backoff coefficient 0.5"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := monitor.New(untouchable{}, nil, tc.opt, monitor.WithClock(clocktest.NewClock(t0)))
			ctx := context.Background()
			o := operations.Owner{Kind: phase.Backup, Name: "b", UID: "u"}
			_, errOnce := m.RunOnce(ctx)
			_, errPoll := m.Poll(ctx, o)
			_, errFinalize := m.Finalize(ctx, o)
			_, errRecover := m.Recover(ctx)
			_, errStart := m.StartRun(ctx, operations.Run{Owner: o}, func(context.Context) (operations.MainRun, error) {
				t.Fatal("StartRun ran main")
				return operations.MainRun{}, nil
			})
			_, errCancel := m.RequestCancel(ctx, o, "cancelled")
			for _, err := range []error{m.Run(ctx), errOnce, errPoll, errFinalize, errRecover, errStart, errCancel} {
				require.ErrorIs(t, err, operations.ErrInvalid)
				require.ErrorContains(t, err, tc.wantText)
			}
		})
	}
}

// TestNoOptionClearsState checks the way back from the options: a Monitor without them
// writes an operation it checks without the Monitor's state the options left, so that
// its record is again of the first format, and does not defer an operation that was
// waiting for its next poll.
func TestNoOptionClearsState(t *testing.T) {
	e := newEnv(t)
	tr := scripted(map[string]operations.Progress{"a": running}, nil)
	e.trackers["p"] = tr
	waiting := ops("a")
	waiting[0].Monitor = operations.MonitorState{ProgressAt: t0, Attempts: 2, ErrorSince: t0, NextPoll: t0.Add(time.Hour), LastError: "unavailable"}
	o := e.run(phase.Backup, "b1", phase.WaitingForPluginOperations, phase.Profile{}, waiting...)
	_, err := e.monitor().RunOnce(context.Background())
	require.NoError(t, err)
	require.Equal(t, 1, tr.ProgressCalls("a"))
	got := e.op(o, "a")
	require.Equal(t, operations.OperationInProgress, got.Status.Phase)
	require.Zero(t, got.Monitor)
}

// TestRetryLongError checks that a retried error longer than operations.MaxTextBytes is
// kept cut to that size, visibly, rather than making the store refuse the write.
func TestRetryLongError(t *testing.T) {
	e := newEnv(t)
	long := operations.Retryable(errors.New(strings.Repeat("x", operations.MaxTextBytes+100)))
	tr, _ := failing(running, long)
	e.trackers["p"] = tr
	o := e.run(phase.Backup, "b1", phase.WaitingForPluginOperations, phase.Profile{}, ops("a")...)
	_, err := e.monitor(monitor.WithRetryPolicy(backoff)).RunOnce(context.Background())
	require.NoError(t, err)
	got := e.op(o, "a").Monitor
	require.Equal(t, 1, got.Attempts)
	require.LessOrEqual(t, len(got.LastError), operations.MaxTextBytes)
	require.True(t, strings.HasPrefix(got.LastError, "xxx"), got.LastError[:10])
	require.True(t, strings.HasSuffix(got.LastError, " bytes cut]"), got.LastError[len(got.LastError)-30:])
}

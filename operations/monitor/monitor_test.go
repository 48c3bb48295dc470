package monitor_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/itemops/itemops/clock/clocktest"
	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/operations/monitor"
	"github.com/itemops/itemops/operations/operationstest"
	"github.com/itemops/itemops/phase"
	"github.com/itemops/itemops/storage/memstore"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// env is a Monitor's world: a real memstore, a fake clock, and scriptable trackers.
type env struct {
	t        *testing.T
	store    *memstore.Store
	clock    *clocktest.Clock
	trackers map[string]operations.Tracker
}

func newEnv(t *testing.T) *env {
	return &env{t: t, store: memstore.New(), clock: clocktest.NewClock(t0), trackers: map[string]operations.Tracker{}}
}

func (e *env) monitor(opts ...monitor.Option) *monitor.Monitor {
	opts = append([]monitor.Option{monitor.WithClock(e.clock)}, opts...)
	return monitor.New(e.store, operationstest.Resolver(e.trackers), opts...)
}

// run stores a run of kind in phase p (reached through the machine's path from New) and
// its operations, all created at t0 by plugin "p" unless they say otherwise.
func (e *env) run(kind phase.Kind, name string, p phase.Phase, profile phase.Profile, ops ...operations.Operation) operations.Owner {
	e.t.Helper()
	ctx := context.Background()
	o := operations.Owner{Kind: kind, Name: name, UID: "uid-" + name}
	r := operations.Run{Owner: o, Phase: phase.New, Profile: profile, Created: t0}
	require.NoError(e.t, r.SetPhase(phase.InProgress, "started", t0))
	require.NoError(e.t, e.store.CreateRun(ctx, r))
	for i := range ops {
		ops[i].Owner = o
		if ops[i].Action == "" {
			ops[i].Action = "p"
		}
		if ops[i].Status.Phase == "" {
			ops[i].Status.Phase = operations.OperationNew
		}
		if ops[i].Status.Created.IsZero() {
			ops[i].Status.Created = t0
		}
	}
	require.NoError(e.t, e.store.PutOperations(ctx, o, ops))
	if p != phase.InProgress {
		_, err := e.store.UpdateRun(ctx, o, func(r *operations.Run) error { return r.SetPhase(p, "main run ended", t0) })
		require.NoError(e.t, err)
	}
	return o
}

func (e *env) get(o operations.Owner) operations.Run {
	e.t.Helper()
	r, err := e.store.GetRun(context.Background(), o)
	require.NoError(e.t, err)
	return r
}

func (e *env) op(o operations.Owner, id string) operations.Operation {
	e.t.Helper()
	op, err := e.store.GetOperation(context.Background(), o, id)
	require.NoError(e.t, err)
	return op
}

// scripted returns a tracker whose Progress answers from a table of operation IDs.
func scripted(answers map[string]operations.Progress, errs map[string]error) *operationstest.Tracker {
	return &operationstest.Tracker{ProgressFunc: func(ctx context.Context, op operations.Operation) (operations.Progress, error) {
		if err := errs[op.ID]; err != nil {
			return operations.Progress{}, err
		}
		return answers[op.ID], nil
	}}
}

func ops(ids ...string) []operations.Operation {
	out := make([]operations.Operation, len(ids))
	for i, id := range ids {
		out[i] = operations.Operation{ID: id, Resource: operations.ResourceIdentifier{Resource: "persistentvolumeclaims", Namespace: "ns", Name: "pvc-" + id}}
	}
	return out
}

var (
	t0      = time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)
	started = t0.Add(time.Minute)
	running = operations.Progress{NCompleted: 10, NTotal: 100, OperationUnits: "Bytes", Started: started, Updated: t0.Add(2 * time.Minute)}
	done    = operations.Progress{Completed: true, NCompleted: 100, NTotal: 100, OperationUnits: "Bytes", Started: started, Updated: t0.Add(3 * time.Minute)}
	broken  = operations.Progress{Completed: true, Err: "upload failed: bucket gone", NCompleted: 40, NTotal: 100, OperationUnits: "Bytes", Started: started}
)

// TestPollVeleroCases follows the cases of Velero's operations controller tests, for
// backups and restores and the restore-finalizing profile.
func TestPollVeleroCases(t *testing.T) {
	type kindCase struct {
		kind    phase.Kind
		profile phase.Profile
		// where a waiting run goes when everything ended without and with errors
		ended, endedPF phase.Phase
	}
	kinds := []kindCase{
		{phase.Backup, phase.Profile{}, phase.Finalizing, phase.FinalizingPartiallyFailed},
		{phase.Restore, phase.Profile{}, phase.Completed, phase.PartiallyFailed},
		{phase.Restore, phase.Profile{RestoreFinalizing: true}, phase.Finalizing, phase.FinalizingPartiallyFailed},
	}
	const wait, waitPF = phase.WaitingForPluginOperations, phase.WaitingForPluginOperationsPartiallyFailed
	tests := []struct {
		name      string
		ids       []string
		answers   map[string]operations.Progress
		advance   time.Duration // clock moved before the poll
		want      monitor.PollResult
		wantPhase func(kindCase) phase.Phase
		wantOps   map[string]operations.OperationPhase
		wantErrs  int
		cancelled []string
	}{
		{
			name:      "no operations",
			want:      monitor.PollResult{},
			wantPhase: func(k kindCase) phase.Phase { return k.ended },
		},
		{
			name:      "one still running",
			ids:       []string{"a"},
			answers:   map[string]operations.Progress{"a": running},
			want:      monitor.PollResult{Running: 1},
			wantPhase: func(kindCase) phase.Phase { return wait },
			wantOps:   map[string]operations.OperationPhase{"a": operations.OperationInProgress},
		},
		{
			name:      "one completed",
			ids:       []string{"a"},
			answers:   map[string]operations.Progress{"a": done},
			want:      monitor.PollResult{Completed: 1},
			wantPhase: func(k kindCase) phase.Phase { return k.ended },
			wantOps:   map[string]operations.OperationPhase{"a": operations.OperationCompleted},
		},
		{
			name:      "one failed",
			ids:       []string{"a"},
			answers:   map[string]operations.Progress{"a": broken},
			want:      monitor.PollResult{Failed: 1, NewErrors: 1},
			wantPhase: func(k kindCase) phase.Phase { return k.endedPF },
			wantOps:   map[string]operations.OperationPhase{"a": operations.OperationFailed},
			wantErrs:  1,
		},
		{
			name:      "a mix",
			ids:       []string{"a", "b", "c"},
			answers:   map[string]operations.Progress{"a": running, "b": done, "c": broken},
			want:      monitor.PollResult{Running: 1, Completed: 1, Failed: 1, NewErrors: 1},
			wantPhase: func(kindCase) phase.Phase { return waitPF },
			wantOps:   map[string]operations.OperationPhase{"a": operations.OperationInProgress, "b": operations.OperationCompleted, "c": operations.OperationFailed},
			wantErrs:  1,
		},
		{
			name:      "timed out",
			ids:       []string{"a", "b"},
			answers:   map[string]operations.Progress{"a": running, "b": done},
			advance:   time.Hour + time.Second,
			want:      monitor.PollResult{Completed: 1, Failed: 1, NewErrors: 1},
			wantPhase: func(k kindCase) phase.Phase { return k.endedPF },
			wantOps:   map[string]operations.OperationPhase{"a": operations.OperationFailed, "b": operations.OperationCompleted},
			wantErrs:  1,
			cancelled: []string{"a"},
		},
		{
			name:      "not yet timed out",
			ids:       []string{"a"},
			answers:   map[string]operations.Progress{"a": running},
			advance:   time.Hour,
			want:      monitor.PollResult{Running: 1},
			wantPhase: func(kindCase) phase.Phase { return wait },
			wantOps:   map[string]operations.OperationPhase{"a": operations.OperationInProgress},
		},
	}
	for _, k := range kinds {
		for _, tc := range tests {
			t.Run(fmt.Sprintf("%s/%s/%s", k.kind, k.profile, tc.name), func(t *testing.T) {
				e := newEnv(t)
				tr := scripted(tc.answers, nil)
				e.trackers["p"] = tr
				o := e.run(k.kind, "r", wait, k.profile, ops(tc.ids...)...)
				_, err := e.store.UpdateRun(context.Background(), o, func(r *operations.Run) error {
					r.OperationTimeout = time.Hour
					return nil
				})
				require.NoError(t, err)
				e.clock.Advance(tc.advance)
				m := e.monitor()

				got, err := m.Poll(context.Background(), o)
				require.NoError(t, err)
				want := tc.want
				want.Phase = tc.wantPhase(k)
				if diff := cmp.Diff(want, got); diff != "" {
					t.Fatalf("Poll (-want +got):\n%s", diff)
				}
				r := e.get(o)
				require.Equal(t, want.Phase, r.Phase)
				require.Equal(t, tc.wantErrs, r.Errors)
				for id, p := range tc.wantOps {
					require.Equal(t, p, e.op(o, id).Status.Phase, "operation %s", id)
				}
				for _, id := range tc.ids {
					want := 0
					for _, c := range tc.cancelled {
						if c == id {
							want = 1
						}
					}
					require.Equal(t, want, tr.CancelCalls(id), "Cancel calls of %s", id)
				}
				if want.Phase != wait {
					last := r.History[len(r.History)-1]
					require.Equal(t, want.Phase, last.To)
					require.Equal(t, e.clock.Now(), last.Time)
					require.NotEmpty(t, last.Reason)
				}

				// A second poll changes nothing more and never cancels twice.
				again, err := m.Poll(context.Background(), o)
				require.NoError(t, err)
				require.Equal(t, want.Phase, again.Phase)
				require.Equal(t, tc.wantErrs, e.get(o).Errors)
				for _, id := range tc.cancelled {
					require.Equal(t, 1, tr.CancelCalls(id), "Cancel must be called exactly once")
				}
			})
		}
	}
}

func TestPollCopiesProgress(t *testing.T) {
	e := newEnv(t)
	e.trackers["p"] = scripted(map[string]operations.Progress{"a": running, "b": {NCompleted: 5, NTotal: 50, OperationUnits: "Files", Description: "scanning", Started: time.Unix(0, 0)}}, nil)
	o := e.run(phase.Backup, "b1", phase.WaitingForPluginOperations, phase.Profile{}, ops("a", "b")...)
	_, err := e.monitor().Poll(context.Background(), o)
	require.NoError(t, err)

	a := e.op(o, "a")
	require.Equal(t, operations.Status{
		Phase: operations.OperationInProgress, NCompleted: 10, NTotal: 100, OperationUnits: "Bytes",
		Created: t0, Started: started, Updated: t0.Add(2 * time.Minute),
	}, a.Status)
	b := e.op(o, "b")
	require.Equal(t, operations.OperationNew, b.Status.Phase, "no start time reported: still New")
	require.True(t, b.Status.Started.IsZero(), "the Unix epoch means unknown")
	require.Equal(t, "scanning", b.Status.Description)
	require.Equal(t, int64(5), b.Status.NCompleted)
}

// hang blocks until its context ends or the test ends, whichever is first; a plugin that
// ignores its context is modelled by ignoreCtx.
func hang(t *testing.T, ignoreCtx bool) func(ctx context.Context) {
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	return func(ctx context.Context) {
		if ignoreCtx {
			<-release
			return
		}
		select {
		case <-ctx.Done():
		case <-release:
		}
	}
}

// TestPollMisbehavingPlugins gives each operation of one run its own kind of misbehaviour:
// each fails alone, with a clear error, and the healthy one completes.
func TestPollMisbehavingPlugins(t *testing.T) {
	e := newEnv(t)
	hangs, hangsHard := hang(t, false), hang(t, true)
	e.trackers["p"] = &operationstest.Tracker{
		ProgressFunc: func(ctx context.Context, op operations.Operation) (operations.Progress, error) {
			switch op.ID {
			case "errors":
				return operations.Progress{}, errors.New("connection refused")
			case "hangs":
				hangs(ctx)
				return operations.Progress{}, ctx.Err()
			case "ignores-context":
				hangsHard(ctx)
				return done, nil
			case "panics":
				panic("nil map write")
			case "negative":
				return operations.Progress{NCompleted: -1}, nil
			case "unknown-id":
				return operations.Progress{}, operations.InvalidOperationID("p", op.ID)
			case "not-async":
				return operations.Progress{}, operations.AsyncOperationsNotSupported("p", op.ID)
			}
			return done, nil
		},
	}
	o := e.run(phase.Restore, "r1", phase.WaitingForPluginOperations, phase.Profile{},
		append(ops("errors", "hangs", "ignores-context", "panics", "negative", "unknown-id", "not-async", "healthy"),
			operations.Operation{ID: "no-plugin", Action: "velero.io/missing"})...)

	m := e.monitor(monitor.WithCallTimeout(50*time.Millisecond), monitor.WithWorkers(4))
	res, err := m.Poll(context.Background(), o)
	require.NoError(t, err)
	require.Equal(t, monitor.PollResult{Completed: 1, Failed: 8, NewErrors: 8, Phase: phase.PartiallyFailed}, res)

	wantErrs := map[string]string{
		"errors":          "connection refused", // the plugin's text, as Velero records it
		"hangs":           "progress: no answer within 50ms",
		"ignores-context": "progress: no answer within 50ms",
		"panics":          "progress: plugin panicked: nil map write",
		"negative":        "progress: plugin reported negative progress (-1 of 0): invalid record",
		"unknown-id":      `p: operation "unknown-id": invalid operation ID`,
		"not-async":       `p: operation "not-async": asynchronous operations not supported`,
		"no-plugin":       `resolve plugin "velero.io/missing": no plugin registered as "velero.io/missing"`,
	}
	for id, want := range wantErrs {
		op := e.op(o, id)
		require.Equal(t, operations.OperationFailed, op.Status.Phase, id)
		require.Equal(t, want, op.Status.Error, id)
	}
	require.Equal(t, operations.OperationCompleted, e.op(o, "healthy").Status.Phase)
	r := e.get(o)
	require.Equal(t, 8, r.Errors)
	require.Equal(t, 8, r.FailedOperations)
}

// TestProgressBeyondTotalIsRecorded checks that a report with NCompleted above NTotal,
// which a plugin whose total is an estimate makes, is recorded as reported, as Velero
// records it: the running operation keeps running, the completed one completes, and the
// run ends Completed with no error.
func TestProgressBeyondTotalIsRecorded(t *testing.T) {
	e := newEnv(t)
	over := running
	over.NCompleted, over.NTotal = 150, 100
	overDone := done
	overDone.NCompleted, overDone.NTotal = 1<<62, 1
	o := e.run(phase.Restore, "r1", phase.WaitingForPluginOperations, phase.Profile{}, ops("estimate", "ends-over")...)
	m := e.monitor()
	e.trackers["p"] = scripted(map[string]operations.Progress{"estimate": over, "ends-over": overDone}, nil)
	res, err := m.Poll(context.Background(), o)
	require.NoError(t, err)
	require.Equal(t, monitor.PollResult{Running: 1, Completed: 1, Phase: phase.WaitingForPluginOperations}, res)
	want := operations.Status{Phase: operations.OperationInProgress, NCompleted: 150, NTotal: 100, OperationUnits: "Bytes",
		Created: t0, Started: started, Updated: over.Updated}
	if diff := cmp.Diff(want, e.op(o, "estimate").Status); diff != "" {
		t.Errorf("operation reporting 150 of 100 (-want +got):\n%s", diff)
	}
	want = operations.Status{Phase: operations.OperationCompleted, NCompleted: 1 << 62, NTotal: 1, OperationUnits: "Bytes",
		Created: t0, Started: started, Updated: overDone.Updated}
	if diff := cmp.Diff(want, e.op(o, "ends-over").Status); diff != "" {
		t.Errorf("operation completing with 2^62 of 1 (-want +got):\n%s", diff)
	}

	over.Completed = true
	e.trackers["p"] = scripted(map[string]operations.Progress{"estimate": over}, nil)
	res, err = m.Poll(context.Background(), o)
	require.NoError(t, err)
	require.Equal(t, monitor.PollResult{Completed: 1, Phase: phase.Completed}, res)
	require.Equal(t, 0, e.get(o).Errors)
}

func TestPollCancelMisbehaves(t *testing.T) {
	e := newEnv(t)
	hangs := hang(t, false)
	tr := &operationstest.Tracker{
		ProgressFunc: func(ctx context.Context, op operations.Operation) (operations.Progress, error) { return running, nil },
		CancelFunc: func(ctx context.Context, op operations.Operation) error {
			switch op.ID {
			case "cancel-errors":
				return errors.New("permission denied")
			case "cancel-hangs":
				hangs(ctx)
				return ctx.Err()
			case "cancel-panics":
				panic("boom")
			}
			return nil
		},
	}
	e.trackers["p"] = tr
	o := e.run(phase.Backup, "b1", phase.WaitingForPluginOperations, phase.Profile{}, ops("cancel-errors", "cancel-hangs", "cancel-panics", "cancel-ok")...)
	e.clock.Advance(monitor.DefaultOperationTimeout + time.Second)
	res, err := e.monitor(monitor.WithCallTimeout(50*time.Millisecond)).Poll(context.Background(), o)
	require.NoError(t, err)
	require.Equal(t, monitor.PollResult{Failed: 4, NewErrors: 4, Phase: phase.FinalizingPartiallyFailed}, res)
	for id, want := range map[string]string{
		"cancel-errors": monitor.TimeoutMessage + "; cancel: permission denied",
		"cancel-hangs":  monitor.TimeoutMessage + "; cancel: no answer within 50ms",
		"cancel-panics": monitor.TimeoutMessage + "; cancel: plugin panicked: boom",
		"cancel-ok":     monitor.TimeoutMessage,
	} {
		require.Equal(t, want, e.op(o, id).Status.Error, id)
		require.Equal(t, 1, tr.CancelCalls(id), id)
	}
}

// TestPollHungPluginsHoldNoWorker gives a Monitor a single worker and two plugin calls
// that ignore their context: each is given up after the call timeout, and the worker goes
// on with the other operations and then with another run.
func TestPollHungPluginsHoldNoWorker(t *testing.T) {
	e := newEnv(t)
	hangsHard := hang(t, true)
	var stuck atomic.Int32
	e.trackers["p"] = &operationstest.Tracker{ProgressFunc: func(ctx context.Context, op operations.Operation) (operations.Progress, error) {
		if strings.HasPrefix(op.ID, "stuck") {
			stuck.Add(1)
			hangsHard(ctx)
		}
		return done, nil
	}}
	o := e.run(phase.Backup, "b1", phase.WaitingForPluginOperations, phase.Profile{}, ops("a", "stuck-1", "b", "stuck-2", "c")...)
	other := e.run(phase.Backup, "b2", phase.WaitingForPluginOperations, phase.Profile{}, ops("d")...)
	m := e.monitor(monitor.WithWorkers(1), monitor.WithCallTimeout(20*time.Millisecond))

	res, err := m.Poll(context.Background(), o)
	require.NoError(t, err)
	require.Equal(t, monitor.PollResult{Completed: 3, Failed: 2, NewErrors: 2, Phase: phase.FinalizingPartiallyFailed}, res)
	require.Equal(t, int32(2), stuck.Load(), "both plugin calls are still hanging")
	require.Zero(t, m.WorkersBusy(), "the hanging calls hold no worker")
	for _, id := range []string{"stuck-1", "stuck-2"} {
		require.Equal(t, "progress: no answer within 20ms", e.op(o, id).Status.Error, id)
	}
	// The only worker goes on to the next run.
	res, err = m.Poll(context.Background(), other)
	require.NoError(t, err)
	require.Equal(t, monitor.PollResult{Completed: 1, Phase: phase.Finalizing}, res)
}

// TestPluginCallContext checks the context a plugin gets: it carries the call's deadline,
// and a context the plugin derives from it (as a gRPC client does) ends with
// DeadlineExceeded when the call is given up.
func TestPluginCallContext(t *testing.T) {
	e := newEnv(t)
	deadlines := make(chan time.Time, 1)
	derivedErr := make(chan error, 1)
	e.trackers["p"] = &operationstest.Tracker{ProgressFunc: func(ctx context.Context, op operations.Operation) (operations.Progress, error) {
		d, ok := ctx.Deadline()
		if !ok {
			return operations.Progress{}, errors.New("no deadline")
		}
		deadlines <- d
		return done, nil
	}}
	o := e.run(phase.Backup, "b1", phase.WaitingForPluginOperations, phase.Profile{}, ops("a")...)
	const timeout = 5 * time.Minute
	before := time.Now()
	_, err := e.monitor(monitor.WithCallTimeout(timeout)).Poll(context.Background(), o)
	after := time.Now()
	require.NoError(t, err)
	require.Equal(t, operations.OperationCompleted, e.op(o, "a").Status.Phase)
	d := <-deadlines
	require.False(t, d.Before(before.Add(timeout)) || d.After(after.Add(timeout)), "deadline %v not within the call timeout of the call", d)

	e.trackers["p"] = &operationstest.Tracker{ProgressFunc: func(ctx context.Context, op operations.Operation) (operations.Progress, error) {
		derived, cancel := context.WithCancel(ctx)
		defer cancel()
		<-derived.Done()
		derivedErr <- derived.Err()
		return operations.Progress{}, derived.Err()
	}}
	o = e.run(phase.Backup, "b2", phase.WaitingForPluginOperations, phase.Profile{}, ops("a")...)
	_, err = e.monitor(monitor.WithCallTimeout(20*time.Millisecond)).Poll(context.Background(), o)
	require.NoError(t, err)
	require.Equal(t, "progress: no answer within 20ms", e.op(o, "a").Status.Error)
	require.ErrorIs(t, <-derivedErr, context.DeadlineExceeded)
}

// TestPollCancelledWhilePluginHangs ends a poll while a plugin that ignores its context is
// inside Progress, with a call timeout far away: Poll returns at once, writing nothing.
func TestPollCancelledWhilePluginHangs(t *testing.T) {
	e := newEnv(t)
	hangsHard := hang(t, true)
	entered := make(chan struct{})
	e.trackers["p"] = &operationstest.Tracker{ProgressFunc: func(ctx context.Context, op operations.Operation) (operations.Progress, error) {
		if op.ID == "stuck" {
			close(entered)
			hangsHard(ctx)
		}
		return done, nil
	}}
	o := e.run(phase.Backup, "b1", phase.WaitingForPluginOperations, phase.Profile{}, ops("a", "stuck")...)
	m := e.monitor(monitor.WithWorkers(1), monitor.WithCallTimeout(time.Hour))
	ctx, cancel := context.WithCancel(context.Background())
	polled := make(chan error, 1)
	go func() {
		_, err := m.Poll(ctx, o)
		polled <- err
	}()
	<-entered
	cancel()
	require.ErrorIs(t, <-polled, context.Canceled)
	require.Zero(t, m.WorkersBusy())
	require.Equal(t, phase.WaitingForPluginOperations, e.get(o).Phase)
	for _, id := range []string{"a", "stuck"} {
		require.Equal(t, operations.OperationNew, e.op(o, id).Status.Phase, id)
	}
}

// TestPollAnswersAtTheDeadline has plugins answer around the call timeout, so that many
// answers race the Monitor giving their calls up: every operation ends exactly one way,
// and every worker comes back.
func TestPollAnswersAtTheDeadline(t *testing.T) {
	const n = 300
	e := newEnv(t)
	e.trackers["p"] = &operationstest.Tracker{ProgressFunc: func(ctx context.Context, op operations.Operation) (operations.Progress, error) {
		var i int
		_, _ = fmt.Sscanf(op.ID, "op-%d", &i)
		time.Sleep(time.Duration(i%7) * 300 * time.Microsecond) // 0 to 1.8 ms, the context ignored
		return done, nil
	}}
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("op-%03d", i)
	}
	o := e.run(phase.Restore, "r1", phase.WaitingForPluginOperations, phase.Profile{}, ops(ids...)...)
	m := e.monitor(monitor.WithWorkers(3), monitor.WithCallTimeout(time.Millisecond))
	res, err := m.Poll(context.Background(), o)
	require.NoError(t, err)
	require.Equal(t, n, res.Completed+res.Failed)
	require.Zero(t, res.Running)
	var completed, failed int
	for _, id := range ids {
		op := e.op(o, id)
		switch op.Status.Phase {
		case operations.OperationCompleted:
			completed++
			require.Empty(t, op.Status.Error, id)
		case operations.OperationFailed:
			failed++
			require.Equal(t, "progress: no answer within 1ms", op.Status.Error, id)
		default:
			t.Fatalf("operation %s is %s", id, op.Status.Phase)
		}
	}
	require.Equal(t, [2]int{res.Completed, res.Failed}, [2]int{completed, failed})
	require.Equal(t, failed, e.get(o).Errors)
	require.Zero(t, m.WorkersBusy(), "every worker came back")
}

// retryAll is a policy that retries every error, at every pass, until n errors in a row.
func retryAll(n int) monitor.RetryPolicy {
	return monitor.RetryPolicy{MaxAttempts: n, Retryable: func(error) bool { return true }}
}

// TestRetryEveryPass has a policy that retries every error at the next pass: an
// operation fails at the third error in a row, one answer between errors starts the count
// again, and an unknown operation ID fails at once, whatever the policy says.
func TestRetryEveryPass(t *testing.T) {
	var calls atomic.Int32
	e := newEnv(t)
	e.trackers["p"] = &operationstest.Tracker{ProgressFunc: func(ctx context.Context, op operations.Operation) (operations.Progress, error) {
		n := calls.Add(1)
		switch {
		case op.ID == "bad-id":
			return operations.Progress{}, operations.InvalidOperationID("p", op.ID)
		case n == 3: // one success between errors resets the count
			return running, nil
		}
		return operations.Progress{}, errors.New("transient")
	}}
	o := e.run(phase.Backup, "b1", phase.WaitingForPluginOperations, phase.Profile{}, ops("a")...)
	bad := e.run(phase.Backup, "b2", phase.WaitingForPluginOperations, phase.Profile{}, ops("bad-id")...)
	m := e.monitor(monitor.WithRetryPolicy(retryAll(3)))

	// Calls 1, 2: errors retried; 3: success; 4, 5: retried; 6: the third in a row fails it.
	for poll := 1; poll <= 5; poll++ {
		res, err := m.Poll(context.Background(), o)
		require.NoError(t, err)
		require.Equal(t, 1, res.Running, "poll %d", poll)
		require.NotEqual(t, operations.OperationFailed, e.op(o, "a").Status.Phase, "poll %d", poll)
	}
	res, err := m.Poll(context.Background(), o)
	require.NoError(t, err)
	require.Equal(t, monitor.PollResult{Failed: 1, NewErrors: 1, Phase: phase.FinalizingPartiallyFailed}, res)
	require.Equal(t, "transient (after 3 attempts over 0s)", e.op(o, "a").Status.Error)

	// An unknown operation ID cannot heal: it fails at once, whatever the policy.
	res, err = m.Poll(context.Background(), bad)
	require.NoError(t, err)
	require.Equal(t, 1, res.Failed)
	require.Equal(t, `p: operation "bad-id": invalid operation ID`, e.op(bad, "bad-id").Status.Error)
}

func TestPollLeavesOtherPhasesAlone(t *testing.T) {
	e := newEnv(t)
	tr := scripted(map[string]operations.Progress{"a": done}, nil)
	e.trackers["p"] = tr
	for _, p := range []phase.Phase{phase.InProgress, phase.Finalizing, phase.Completed} {
		o := e.run(phase.Backup, "b-"+string(p), p, phase.Profile{}, ops("a")...)
		before := e.get(o)
		res, err := e.monitor().Poll(context.Background(), o)
		require.NoError(t, err)
		require.Equal(t, monitor.PollResult{Phase: p}, res)
		require.Equal(t, before, e.get(o))
		require.Equal(t, operations.OperationNew, e.op(o, "a").Status.Phase)
	}
	require.Zero(t, tr.ProgressCalls("a"))

	_, err := e.monitor().Poll(context.Background(), operations.Owner{Kind: phase.Backup, Name: "nope"})
	require.ErrorIs(t, err, operations.ErrNotFound)
}

func TestPollCancelledContext(t *testing.T) {
	e := newEnv(t)
	e.trackers["p"] = scripted(map[string]operations.Progress{"a": done}, nil)
	o := e.run(phase.Backup, "b1", phase.WaitingForPluginOperations, phase.Profile{}, ops("a")...)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := e.monitor().Poll(ctx, o)
	require.ErrorIs(t, err, context.Canceled)
	require.Equal(t, phase.WaitingForPluginOperations, e.get(o).Phase)
	require.Equal(t, operations.OperationNew, e.op(o, "a").Status.Phase)
}

// TestTwoMonitors lets two Monitors poll the same runs at once: every failure is counted
// once, every run is advanced once, and no finished operation is overwritten.
func TestTwoMonitors(t *testing.T) {
	e := newEnv(t)
	var calls atomic.Int64
	e.trackers["p"] = &operationstest.Tracker{ProgressFunc: func(ctx context.Context, op operations.Operation) (operations.Progress, error) {
		// Each operation runs a few polls, then ends; those ending in 7 fail.
		if calls.Add(1)%3 != 0 {
			return running, nil
		}
		if strings.HasSuffix(op.ID, "7") {
			return broken, nil
		}
		return done, nil
	}}
	var owners []operations.Owner
	for i := 0; i < 10; i++ {
		var ids []string
		for j := 0; j < 20; j++ {
			ids = append(ids, fmt.Sprintf("op-%d", j))
		}
		owners = append(owners, e.run(phase.Backup, fmt.Sprintf("b%d", i), phase.WaitingForPluginOperations, phase.Profile{}, ops(ids...)...))
	}
	monitors := []*monitor.Monitor{e.monitor(monitor.WithWorkers(3)), e.monitor(monitor.WithWorkers(5))}
	for round := 0; round < 50; round++ {
		var wg sync.WaitGroup
		for _, m := range monitors {
			for _, o := range owners {
				wg.Add(1)
				go func() {
					defer wg.Done()
					_, err := m.Poll(context.Background(), o)
					require.NoError(t, err)
				}()
			}
		}
		wg.Wait()
	}
	for _, o := range owners {
		r := e.get(o)
		require.Equal(t, phase.FinalizingPartiallyFailed, r.Phase, "%s", o)
		require.Equal(t, 2, r.Errors, "%s: op-7 and op-17 fail; each must be counted once", o)
		require.Equal(t, 2, r.FailedOperations)
		seen := map[phase.Phase]int{}
		for _, tr := range r.History {
			seen[tr.To]++
		}
		for p, n := range seen {
			require.Equal(t, 1, n, "%s entered %s %d times", o, p, n)
		}
		all, err := e.store.ListOperations(context.Background(), o, operations.OperationFilter{})
		require.NoError(t, err)
		for _, op := range all {
			want := operations.OperationCompleted
			if strings.HasSuffix(op.ID, "7") {
				want = operations.OperationFailed
			}
			require.Equal(t, want, op.Status.Phase, "%s %s", o, op.ID)
		}
	}
}

func TestRunLoop(t *testing.T) {
	e := newEnv(t)
	e.trackers["p"] = scripted(map[string]operations.Progress{"a": done, "b": broken}, nil)
	items := []operations.ResourceIdentifier{{Group: "velero.io", Resource: "datauploads", Namespace: "velero", Name: "du-1"}}
	more := operations.ResourceIdentifier{Resource: "persistentvolumeclaims", Namespace: "ns", Name: "data"}
	backup := e.run(phase.Backup, "b1", phase.WaitingForPluginOperations, phase.Profile{},
		operations.Operation{ID: "a", PostOperationItems: items},
		operations.Operation{ID: "c", PostOperationItems: append(items, more), Status: operations.Status{Phase: operations.OperationCompleted}})
	restore := e.run(phase.Restore, "r1", phase.WaitingForPluginOperations, phase.Profile{}, ops("b")...)
	failing := e.run(phase.Backup, "b2", phase.Finalizing, phase.Profile{})

	var (
		mu        sync.Mutex
		finalized = map[string][]operations.ResourceIdentifier{}
	)
	finalizer := monitor.FinalizerFunc(func(ctx context.Context, r operations.Run, got []operations.ResourceIdentifier) error {
		if r.Owner.Name == "b2" {
			return errors.New("object store unavailable")
		}
		mu.Lock()
		defer mu.Unlock()
		finalized[r.Owner.Name] = got
		return nil
	})
	passes := make(chan monitor.PassStats)
	m := e.monitor(monitor.WithFinalizer(finalizer), monitor.WithInterval(time.Minute),
		monitor.WithObserver(monitor.Observer{Pass: func(s monitor.PassStats) { passes <- s }}))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stopped := make(chan error)
	go func() { stopped <- m.Run(ctx) }()

	// The first pass starts at once: it polls both waiting runs, moves b1 to Finalizing,
	// and finalizes b1 and b2 in the same pass.
	first := <-passes
	require.Equal(t, t0, first.Start)
	require.Equal(t, 2, first.Runs)
	require.Equal(t, 2, first.Operations)
	require.Equal(t, 1, first.Completed)
	require.Equal(t, 1, first.Failed)
	require.Equal(t, 1, first.NewErrors)
	require.Equal(t, 2, first.Finalized)
	require.Equal(t, 4, first.Advanced)
	require.ErrorContains(t, first.Err, "object store unavailable")

	require.Equal(t, phase.PartiallyFailed, e.get(restore).Phase)
	b1 := e.get(backup)
	require.Equal(t, phase.Completed, b1.Phase)
	require.Equal(t, []phase.Phase{phase.InProgress, phase.WaitingForPluginOperations, phase.Finalizing, phase.Completed}, historyTo(b1))
	mu.Lock()
	require.Equal(t, append(items, more), finalized["b1"], "post-operation items of all operations, without repeats")
	mu.Unlock()
	b2 := e.get(failing)
	require.Equal(t, phase.PartiallyFailed, b2.Phase)
	require.Equal(t, 1, b2.Errors)
	require.Equal(t, "finalize: object store unavailable", b2.History[len(b2.History)-1].Reason)

	// The next pass waits for the interval on the Monitor's clock.
	e.clock.BlockUntilWaiters(1)
	e.clock.Advance(time.Minute)
	second := <-passes
	require.Equal(t, t0.Add(time.Minute), second.Start)
	require.Equal(t, monitor.PassStats{Start: second.Start}, second, "nothing left to do")

	e.clock.BlockUntilWaiters(1)
	cancel()
	require.ErrorIs(t, <-stopped, context.Canceled)
}

// TestRunWithoutFinalizer moves finalizing runs straight to their terminal phase.
func TestRunWithoutFinalizer(t *testing.T) {
	e := newEnv(t)
	ok := e.run(phase.Backup, "b1", phase.Finalizing, phase.Profile{})
	pf := e.run(phase.Restore, "r1", phase.FinalizingPartiallyFailed, phase.Profile{RestoreFinalizing: true})
	passes := make(chan monitor.PassStats, 1)
	ctx, cancel := context.WithCancel(context.Background())
	m := e.monitor(monitor.WithObserver(monitor.Observer{Pass: func(s monitor.PassStats) {
		passes <- s
		cancel()
	}}))
	require.ErrorIs(t, m.Run(ctx), context.Canceled)
	require.Equal(t, 2, (<-passes).Finalized)
	require.Equal(t, phase.Completed, e.get(ok).Phase)
	require.Equal(t, phase.PartiallyFailed, e.get(pf).Phase)
}

// historyTo returns the phases r's history led to, in order.
func historyTo(r operations.Run) []phase.Phase {
	var out []phase.Phase
	for _, tr := range r.History {
		out = append(out, tr.To)
	}
	return out
}

func TestRecover(t *testing.T) {
	e := newEnv(t)
	inProgress := e.run(phase.Backup, "b-running", phase.InProgress, phase.Profile{})
	restoring := e.run(phase.Restore, "r-running", phase.InProgress, phase.Profile{})
	waiting := e.run(phase.Backup, "b-waiting", phase.WaitingForPluginOperationsPartiallyFailed, phase.Profile{})
	finalizing := e.run(phase.Restore, "r-finalizing", phase.Finalizing, phase.Profile{RestoreFinalizing: true})
	done := e.run(phase.Backup, "b-done", phase.Completed, phase.Profile{})
	fresh := operations.Owner{Kind: phase.Backup, Name: "b-new"}
	require.NoError(t, e.store.CreateRun(context.Background(), operations.Run{Owner: fresh, Phase: phase.New}))
	before := map[operations.Owner]operations.Run{}
	for _, o := range []operations.Owner{waiting, finalizing, done, fresh} {
		before[o] = e.get(o)
	}

	e.clock.Advance(time.Hour)
	m := e.monitor()
	res, err := m.Recover(context.Background())
	require.NoError(t, err)
	reasons := map[operations.Owner]string{
		inProgress: `found a backup with status "InProgress" during the server starting, mark it as "Failed"`,
		restoring:  `found a restore with status "InProgress" during the server starting, mark it as "Failed"`,
	}
	if diff := cmp.Diff(monitor.RecoverResult{
		Failed:  []operations.Owner{inProgress, restoring},
		Reasons: []string{reasons[inProgress], reasons[restoring]},
		Resumed: []operations.Owner{waiting, finalizing},
	}, res); diff != "" {
		t.Errorf("Recover (-want +got):\n%s", diff)
	}

	for o, reason := range reasons {
		r := e.get(o)
		require.Equal(t, phase.Failed, r.Phase)
		require.Equal(t, reason, r.FailureReason)
		last := r.History[len(r.History)-1]
		require.Equal(t, operations.Transition{From: phase.InProgress, To: phase.Failed, Event: phase.EventFail, Time: t0.Add(time.Hour), Reason: reason}, last)
		require.Equal(t, t0.Add(time.Hour), r.Completed)
	}
	for o, r := range before {
		require.Equal(t, r, e.get(o), "%s must be untouched", o)
	}

	// Idempotent: a second run fails nothing more and changes nothing.
	snapshot, err := e.store.ListRuns(context.Background(), operations.RunFilter{})
	require.NoError(t, err)
	again, err := m.Recover(context.Background())
	require.NoError(t, err)
	require.Empty(t, again.Failed)
	require.Empty(t, again.Reasons)
	require.Equal(t, res.Resumed, again.Resumed)
	after, err := e.store.ListRuns(context.Background(), operations.RunFilter{})
	require.NoError(t, err)
	require.Equal(t, snapshot, after)
}

// TestPollWritesOnlyChanges checks the writes of a poll: one batch when operations
// changed, a run update only when the run changes, and nothing at all when a poll
// learns nothing new.
func TestPollWritesOnlyChanges(t *testing.T) {
	e := newEnv(t)
	answers := map[string]operations.Progress{"a": running, "b": running}
	e.trackers["p"] = scripted(answers, nil)
	o := e.run(phase.Backup, "b1", phase.WaitingForPluginOperations, phase.Profile{}, ops("a", "b")...)
	s := &countingStore{Store: e.store}
	m := monitor.New(s, operationstest.Resolver(e.trackers), monitor.WithClock(e.clock))

	poll := func() (puts, updates int64) {
		t.Helper()
		s.puts.Store(0)
		s.updates.Store(0)
		_, err := m.Poll(context.Background(), o)
		require.NoError(t, err)
		return s.puts.Load(), s.updates.Load()
	}
	puts, updates := poll()
	require.Equal(t, [2]int64{1, 0}, [2]int64{puts, updates}, "first report: one batch, the run unchanged")
	puts, updates = poll()
	require.Equal(t, [2]int64{0, 0}, [2]int64{puts, updates}, "nothing new: no write at all")
	answers["a"] = done
	puts, updates = poll()
	require.Equal(t, [2]int64{1, 0}, [2]int64{puts, updates}, "one operation completed, one still running")
	answers["b"] = broken
	puts, updates = poll()
	require.Equal(t, [2]int64{1, 1}, [2]int64{puts, updates}, "the last one failed: one batch, one run update")
	require.Equal(t, phase.FinalizingPartiallyFailed, e.get(o).Phase)
}

// TestPollResolvesOncePerCheck checks that a poll resolves each operation's plugin once
// and makes that operation's Progress and Cancel calls on the one Tracker it got, so
// that a Resolver can give a Tracker that serves one check (integrations/velero's
// Cancel reuses the action its Progress looked up, as Velero does).
func TestPollResolvesOncePerCheck(t *testing.T) {
	e := newEnv(t)
	type calls struct {
		mu               sync.Mutex
		progress, cancel []string
	}
	var (
		mu       sync.Mutex
		resolved []*calls
	)
	r := operations.ResolverFunc(func(action string) (operations.Tracker, error) {
		c := &calls{}
		mu.Lock()
		resolved = append(resolved, c)
		mu.Unlock()
		return &operationstest.Tracker{
			ProgressFunc: func(ctx context.Context, op operations.Operation) (operations.Progress, error) {
				c.mu.Lock()
				defer c.mu.Unlock()
				c.progress = append(c.progress, op.ID)
				if op.ID == "done" {
					return done, nil
				}
				return running, nil
			},
			CancelFunc: func(ctx context.Context, op operations.Operation) error {
				c.mu.Lock()
				defer c.mu.Unlock()
				c.cancel = append(c.cancel, op.ID)
				return nil
			},
		}, nil
	})
	late := ops("late")[0]
	late.Status.Created = t0.Add(-monitor.DefaultOperationTimeout - time.Second)
	o := e.run(phase.Backup, "b1", phase.WaitingForPluginOperations, phase.Profile{}, append(ops("done", "runs"), late)...)
	m := monitor.New(e.store, r, monitor.WithClock(e.clock))
	for pass := 1; pass <= 2; pass++ {
		resolved = nil
		_, err := m.Poll(context.Background(), o)
		require.NoError(t, err)
		var got [][2][]string
		for _, c := range resolved {
			got = append(got, [2][]string{c.progress, c.cancel})
		}
		slices.SortFunc(got, func(a, b [2][]string) int { return strings.Compare(a[0][0], b[0][0]) })
		want := [][2][]string{{{"done"}, nil}, {{"late"}, {"late"}}, {{"runs"}, nil}}
		if pass == 2 { // only "runs" is left
			want = [][2][]string{{{"runs"}, nil}}
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("pass %d: each Tracker's Progress and Cancel calls (-want +got):\n%s", pass, diff)
		}
	}
}

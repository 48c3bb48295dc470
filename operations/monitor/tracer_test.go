package monitor_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/operations/monitor"
	"github.com/itemops/itemops/operations/operationstest"
	"github.com/itemops/itemops/phase"
)

// traceKey is the key under which a recorder puts its name and what it wraps into the
// contexts it returns.
type traceKey string

// recorder is a Tracer that logs each start and end, in order, as lines, and puts
// "name: what" under traceKey(name + "/" + level) into each context it returns.
type recorder struct {
	name  string
	mu    sync.Mutex
	lines []string
	calls []monitor.CallStart
	ends  []monitor.CallStats
	runs  []monitor.RunEnd
	pass  []error
}

func (r *recorder) log(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lines = append(r.lines, r.name+": "+fmt.Sprintf(format, args...))
}

func (r *recorder) Lines() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.lines...)
}

func (r *recorder) with(ctx context.Context, level, what string) context.Context {
	return context.WithValue(ctx, traceKey(r.name+"/"+level), what)
}

func (r *recorder) tracer() monitor.Tracer {
	return monitor.Tracer{
		Pass: func(ctx context.Context, start time.Time) (context.Context, func(monitor.PassStats)) {
			r.log("pass start")
			return r.with(ctx, "pass", "pass"), func(s monitor.PassStats) {
				r.mu.Lock()
				r.pass = append(r.pass, s.Err)
				r.mu.Unlock()
				r.log("pass end: %d runs", s.Runs)
			}
		},
		Run: func(ctx context.Context, s monitor.RunStart) (context.Context, func(monitor.RunEnd)) {
			what := "poll"
			if s.Finalize {
				what = "finalize"
			}
			r.log("run start: %s %s in %s", what, s.Owner.Name, s.Phase)
			return r.with(ctx, "run", s.Owner.Name), func(e monitor.RunEnd) {
				r.mu.Lock()
				r.runs = append(r.runs, e)
				r.mu.Unlock()
				r.log("run end: %s %s to %s", what, s.Owner.Name, e.Phase)
			}
		},
		Call: func(ctx context.Context, s monitor.CallStart) (context.Context, func(monitor.CallStats)) {
			what := "progress"
			if s.Cancel {
				what = "cancel"
			}
			r.mu.Lock()
			r.calls = append(r.calls, s)
			r.mu.Unlock()
			r.log("call start: %s %s/%s", what, s.Owner.Name, s.OperationID)
			return r.with(ctx, "call", s.OperationID), func(e monitor.CallStats) {
				r.mu.Lock()
				r.ends = append(r.ends, e)
				r.mu.Unlock()
				r.log("call end: %s %s/%s %s", what, s.Owner.Name, s.OperationID, e.Outcome)
			}
		},
		Finalize: func(ctx context.Context, run operations.Run) (context.Context, func(monitor.FinalizeStats)) {
			r.log("finalize start: %s", run.Owner.Name)
			return r.with(ctx, "finalize", run.Owner.Name), func(s monitor.FinalizeStats) {
				r.log("finalize end: %s err %v", run.Owner.Name, s.Err)
			}
		},
	}
}

// values returns what the recorders named put into ctx, level by level.
func values(ctx context.Context, names ...string) []string {
	var got []string
	for _, n := range names {
		for _, level := range []string{"pass", "run", "call", "finalize"} {
			if v, ok := ctx.Value(traceKey(n + "/" + level)).(string); ok {
				got = append(got, n+"/"+level+"="+v)
			}
		}
	}
	return got
}

// TestTracerWrapsAPass makes a pass over a run whose one operation completes, and
// which the same pass finalizes: the tracer's starts and ends nest (pass, run, call;
// pass, run, finalizer), and the contexts the plugin and the finalizer receive carry
// what the tracer put in at each level.
func TestTracerWrapsAPass(t *testing.T) {
	e := newEnv(t)
	var pluginCtx, finalizerCtx []string
	e.trackers["p"] = &operationstest.Tracker{ProgressFunc: func(ctx context.Context, op operations.Operation) (operations.Progress, error) {
		pluginCtx = values(ctx, "t")
		return done, nil
	}}
	o := e.run(phase.Backup, "b1", phase.WaitingForPluginOperations, phase.Profile{}, ops("a")...)
	rec := &recorder{name: "t"}
	m := e.monitor(monitor.WithTracer(rec.tracer()), monitor.WithFinalizer(monitor.FinalizerFunc(
		func(ctx context.Context, r operations.Run, items []operations.ResourceIdentifier) error {
			finalizerCtx = values(ctx, "t")
			return nil
		})))
	_, err := m.RunOnce(context.Background())
	require.NoError(t, err)
	require.Equal(t, phase.Completed, e.get(o).Phase)

	require.Equal(t, []string{
		"t: pass start",
		"t: run start: poll b1 in WaitingForPluginOperations",
		"t: call start: progress b1/a",
		"t: call end: progress b1/a succeeded",
		"t: run end: poll b1 to Finalizing",
		"t: run start: finalize b1 in Finalizing",
		"t: finalize start: b1",
		"t: finalize end: b1 err <nil>",
		"t: run end: finalize b1 to Completed",
		"t: pass end: 1 runs",
	}, rec.Lines())
	require.Equal(t, []string{"t/pass=pass", "t/run=b1", "t/call=a"}, pluginCtx)
	require.Equal(t, []string{"t/pass=pass", "t/run=b1", "t/finalize=b1"}, finalizerCtx)

	require.Len(t, rec.calls, 1)
	c := rec.calls[0]
	require.Equal(t, monitor.CallStart{Owner: o, OperationID: "a", Action: "p", Queued: t0, Started: t0}, c,
		"on a clock that does not move, the call was queued and started at t0")
	require.NoError(t, rec.ends[0].Err)
}

// TestTracerCallEnds checks how the tracer is told that plugin calls ended: with the
// plugin's error, after the call timeout for a plugin that hangs (once, although the
// plugin returns later), and as hung for the next call that is not made. A run whose
// cancel was requested shows the request at its end, and its calls are Cancel calls.
func TestTracerCallEnds(t *testing.T) {
	e := newEnv(t)
	hangs := hang(t, true)
	e.trackers["p"] = &operationstest.Tracker{ProgressFunc: func(ctx context.Context, op operations.Operation) (operations.Progress, error) {
		switch op.ID {
		case "err":
			return operations.Progress{}, errors.New("mover gone")
		case "hang":
			hangs(ctx)
		}
		return running, nil
	}}
	o := e.run(phase.Backup, "b1", phase.WaitingForPluginOperations, phase.Profile{}, ops("err")...)
	h := e.run(phase.Backup, "b2", phase.WaitingForPluginOperations, phase.Profile{}, ops("hang")...)
	rec := &recorder{name: "t"}
	// Errors are retried, so that the operations stay unfinished from one poll to the
	// next.
	m := e.monitor(monitor.WithTracer(rec.tracer()), monitor.WithCallTimeout(20*time.Millisecond),
		monitor.WithRetryPolicy(retryAll(5)))

	_, err := m.Poll(context.Background(), o)
	require.NoError(t, err)
	require.Len(t, rec.ends, 1)
	require.Equal(t, monitor.CallErrored, rec.ends[0].Outcome)
	require.EqualError(t, rec.ends[0].Err, "mover gone")

	_, err = m.Poll(context.Background(), h)
	require.NoError(t, err)
	require.Len(t, rec.ends, 2)
	require.Equal(t, monitor.CallTimedOut, rec.ends[1].Outcome)
	require.EqualError(t, rec.ends[1].Err, "no answer within 20ms")

	// The plugin still hangs: the next poll makes no call, and the tracer hears of it.
	_, err = m.RequestCancel(context.Background(), o, "user asked")
	require.NoError(t, err)
	_, err = m.Poll(context.Background(), h)
	require.NoError(t, err)
	require.Len(t, rec.ends, 3)
	require.Equal(t, monitor.CallHung, rec.ends[2].Outcome)
	require.Equal(t, 1, rec.calls[2].Attempts, "the call after a retried error is a retry")

	// A pass acts on b1's cancel request: the run's end shows it.
	_, err = m.RunOnce(context.Background())
	require.NoError(t, err)
	var cancelled *monitor.RunEnd
	for i := range rec.runs {
		if rec.runs[i].Cancel.Reason != "" {
			cancelled = &rec.runs[i]
		}
	}
	require.NotNil(t, cancelled, "a run end with the cancel request")
	require.Equal(t, "user asked", cancelled.Cancel.Reason)
	require.Equal(t, phase.Failed, cancelled.Phase)
	last := rec.calls[len(rec.calls)-1]
	if last.OperationID != "err" {
		last = rec.calls[len(rec.calls)-2] // the pass polled b1 and b2 at once
	}
	require.True(t, last.Cancel, "b1's operation is cancelled: %+v", last)
	require.Equal(t, monitor.CanceledPrefix+"user asked", last.Reason)
}

// TestTracersCompose gives a Monitor two tracers: each piece of work starts with the
// first, then the second under the first's context, and ends with the second, then the
// first; the plugin's context carries what both put in.
func TestTracersCompose(t *testing.T) {
	e := newEnv(t)
	var pluginCtx []string
	e.trackers["p"] = &operationstest.Tracker{ProgressFunc: func(ctx context.Context, op operations.Operation) (operations.Progress, error) {
		pluginCtx = values(ctx, "one", "two")
		return running, nil
	}}
	o := e.run(phase.Backup, "b1", phase.WaitingForPluginOperations, phase.Profile{}, ops("a")...)
	var (
		mu    sync.Mutex
		lines []string
	)
	one, two := &recorder{name: "one"}, &recorder{name: "two"}
	logged := func(r *recorder) monitor.Tracer {
		tr := r.tracer()
		start := tr.Call
		tr.Call = func(ctx context.Context, s monitor.CallStart) (context.Context, func(monitor.CallStats)) {
			mu.Lock()
			lines = append(lines, fmt.Sprintf("%s start, sees %v", r.name, values(ctx, "one", "two")))
			mu.Unlock()
			ctx, end := start(ctx, s)
			return ctx, func(c monitor.CallStats) {
				mu.Lock()
				lines = append(lines, r.name+" end")
				mu.Unlock()
				end(c)
			}
		}
		return tr
	}
	m := e.monitor(monitor.WithTracer(logged(one)), monitor.WithTracer(logged(two)))
	_, err := m.Poll(context.Background(), o)
	require.NoError(t, err)
	require.Equal(t, []string{
		"one start, sees []",
		"two start, sees [one/call=a]",
		"two end",
		"one end",
	}, lines)
	require.Equal(t, []string{"one/call=a", "two/call=a"}, pluginCtx)
}

// TestTracerPartial sets a Tracer with only Call, whose end function is nil, and one
// with nothing: the Monitor calls what is set, and nothing else.
func TestTracerPartial(t *testing.T) {
	e := newEnv(t)
	e.trackers["p"] = scripted(map[string]operations.Progress{"a": done}, nil)
	o := e.run(phase.Backup, "b1", phase.WaitingForPluginOperations, phase.Profile{}, ops("a")...)
	var calls []string
	m := e.monitor(monitor.WithTracer(monitor.Tracer{}), monitor.WithTracer(monitor.Tracer{
		Call: func(ctx context.Context, s monitor.CallStart) (context.Context, func(monitor.CallStats)) {
			calls = append(calls, s.OperationID)
			return ctx, nil
		},
	}), monitor.WithTracer(monitor.Tracer{}))
	_, err := m.RunOnce(context.Background())
	require.NoError(t, err)
	require.Equal(t, []string{"a"}, calls)
	require.Equal(t, phase.Completed, e.get(o).Phase)
}

// TestTracerPassEndsWithContext ends a pass's context before the pass: the tracer's
// pass ends all the same, with the context's error.
func TestTracerPassEndsWithContext(t *testing.T) {
	e := newEnv(t)
	rec := &recorder{name: "t"}
	m := e.monitor(monitor.WithTracer(rec.tracer()))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := m.RunOnce(ctx)
	require.ErrorIs(t, err, context.Canceled)
	require.Equal(t, []string{"t: pass start", "t: pass end: 0 runs"}, rec.Lines())
	require.ErrorIs(t, rec.pass[0], context.Canceled)
}

package monitor

import (
	"context"
	"time"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/phase"
)

// A Tracer wraps what a [Monitor] does, for tracing: each field is a function the
// Monitor calls as a piece of work starts, with the context the work would run under
// and what starts. It returns the context the work runs under instead (ctx itself, or
// a context derived from it, one that carries a span for instance) and a function,
// which may be nil, that the Monitor calls once, with how the work ended. Each field
// may be nil: that work is not wrapped, and costs nothing more. Set one with
// [WithTracer]; integrations/otel is one, in a module of its own.
//
// The work nests: a pass holds the runs it polls and finalizes, a poll holds the
// plugin calls of its operations, a finalize holds the call of the [Finalizer]. Each
// starts under the context its parent's function returned, so that a span started by
// Call is a child of the span Run started, and the context a plugin's Progress and
// Cancel receive carries what Call put in it (with the call's deadline, and the
// Monitor's own values, added on top). The functions are called from the Monitor's
// goroutines, several at once, so they must be safe for concurrent use; none may
// block, as the Monitor waits for each to return.
//
// What an Observer is told is told to a Tracer too, at the end of each piece of work:
// a run's phase change (RunEnd's Phase against RunStart's) and a cancel request acted
// upon (RunEnd.Cancel) are the events of a run; how a plugin call ended, error included,
// is its CallStats.
type Tracer struct {
	// Pass wraps each pass of [Monitor.Run] and each [Monitor.RunOnce]; start is when
	// it starts, by the Monitor's clock. The end function gets what the pass did; when
	// ctx ended during the pass (the Observer is not told of such a pass), its Err
	// wraps ctx.Err().
	Pass func(ctx context.Context, start time.Time) (context.Context, func(PassStats))
	// Run wraps each run a pass polls or finalizes, from before the Monitor claims it
	// to after it wrote it. A run that [Monitor.Poll] or [Monitor.Finalize] works on,
	// called by a program itself, is not wrapped: the program holds the context.
	Run func(ctx context.Context, r RunStart) (context.Context, func(RunEnd))
	// Call wraps each Progress and Cancel call to a plugin, as the Observer's Call
	// sees them, and each call that a check does not make because the operation's
	// previous call hangs ([CallHung]); the context that Call returns is the parent of
	// the one the plugin receives. (The Cancel not made for an operation that times
	// out or stalls while its Progress call hangs, which the Observer hears of as
	// CallHung, has no start and no end: it is not a check's.) The end function is called once: when the call returns, when the
	// Monitor gives it up after the call timeout (the plugin may return later; its
	// answer is dropped), or when the poll's context ends first (the Outcome is then
	// empty and Err is the context's error).
	Call func(ctx context.Context, c CallStart) (context.Context, func(CallStats))
	// Finalize wraps each call of the [Finalizer], r being the run it is given. The
	// end function gets what the Observer's Finalized gets.
	Finalize func(ctx context.Context, r operations.Run) (context.Context, func(FinalizeStats))
}

// WithTracer adds t to the Monitor's tracers: each WithTracer adds one. The Monitor
// starts the work of each with the functions of every tracer, in the order they were
// added, each given the context the one before returned, and ends it in the reverse
// order, as nested spans end. By default there is none.
func WithTracer(t Tracer) Option {
	return optionFunc(func(c *config) {
		c.tracer = Tracer{
			Pass:     nest(c.tracer.Pass, t.Pass),
			Run:      nest(c.tracer.Run, t.Run),
			Call:     nest(c.tracer.Call, t.Call),
			Finalize: nest(c.tracer.Finalize, t.Finalize),
		}
	})
}

// nest returns a start function that starts with f, then with g under the context f
// returned, and whose end function ends g's work, then f's; either may be nil, and so
// may the end functions they return.
func nest[S, E any](f, g func(context.Context, S) (context.Context, func(E))) func(context.Context, S) (context.Context, func(E)) {
	switch {
	case f == nil:
		return g
	case g == nil:
		return f
	}
	return func(ctx context.Context, s S) (context.Context, func(E)) {
		ctx, endF := f(ctx, s)
		ctx, endG := g(ctx, s)
		switch {
		case endF == nil:
			return ctx, endG
		case endG == nil:
			return ctx, endF
		}
		return ctx, func(e E) { endG(e); endF(e) }
	}
}

// RunStart is what a [Tracer]'s Run is told of a run a pass is about to work on.
type RunStart struct {
	Owner operations.Owner
	// Phase is the run's phase as the pass listed it.
	Phase phase.Phase
	// Finalize is true for a run the pass finalizes; else the pass polls it.
	Finalize bool
}

// RunEnd is how a pass's work on a run ended, for a [Tracer]'s Run.
type RunEnd struct {
	// Phase is the run's phase afterwards: RunStart.Phase when the pass did not move
	// it; empty when Err is set, when the run is gone, and when it was skipped before
	// it was read.
	Phase phase.Phase
	// Skipped is true when another Monitor holds the run's claim: nothing was done.
	Skipped bool
	// Gone is true when the store no longer holds the run (deleted, or replaced by the
	// run of a new owner of its name): nothing was done, and nothing failed.
	Gone bool
	// Cancel is the run's cancel request, when the pass found one and acted upon it:
	// it cancelled the run's operations, or failed the run; else the zero value.
	Cancel operations.CancelRequest
	// Poll is what the poll found, for a run polled; for a run finalized, only its
	// Phase and Skipped are set.
	Poll PollResult
	// Err is what went wrong with the store or the finalizer.
	Err error
}

// CallStart is what a [Tracer]'s Call is told of a plugin call about to start.
type CallStart struct {
	Owner       operations.Owner // the run of the operation
	OperationID string
	Action      string // the plugin's registered name
	Cancel      bool   // a Cancel call; else a Progress call
	// Reason is, for a Cancel call, the error the operation fails with: it begins with
	// [TimeoutMessage] for an operation that ran past its timeout, [StallPrefix] for
	// one that stalled, and [CanceledPrefix] when its run is being cancelled or failed
	// on a restart. Empty for a Progress call.
	Reason string
	// Attempts is, for a Progress call, how many Progress errors in a row a retry
	// policy retried before this call ([operations.MonitorState.Attempts]): a call with
	// Attempts above zero is a retry.
	Attempts int
	// Queued is when the operation's check was queued for a worker, and Started when
	// the call starts, both by the Monitor's clock: Started minus Queued is how long
	// the check waited for a worker (see [WithWorkers]) and, for a Cancel after a
	// Progress call, how long the Progress call took.
	Queued, Started time.Time
}

// startRun starts the Tracer's Run, if any, for run r, finalized when fin is set; the
// end function is nil when there is none.
func (m *Monitor) startRun(ctx context.Context, r operations.Run, fin bool) (context.Context, func(RunEnd)) {
	if f := m.cfg.tracer.Run; f != nil {
		return f(ctx, RunStart{Owner: r.Owner, Phase: r.Phase, Finalize: fin})
	}
	return ctx, nil
}

// endRun ends the Tracer's Run with what a poll or a finalize returned.
func endRun(end func(RunEnd), res PollResult, cancel operations.CancelRequest, err error) {
	e := RunEnd{Phase: res.Phase, Skipped: res.Skipped, Cancel: cancel, Poll: res, Err: err}
	if gone(err) {
		e.Gone, e.Err, e.Phase = true, nil, ""
	} else if err != nil {
		e.Phase = ""
	}
	end(e)
}

package monitor

import (
	"time"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/phase"
)

// An Observer is told what a [Monitor] does, for metrics, tracing or a controller's event
// source: each field is a function the Monitor calls, and may be nil. Pass is called
// from the goroutine that made the pass; the others are called from the Monitor's
// goroutines, several at once, so they must be safe for concurrent use. None may block:
// the Monitor waits for each to return. Set one with [WithObserver]; a Monitor also
// logs (see [WithLogger]).
type Observer struct {
	// Pass is called after each pass of [Monitor.Run] and each [Monitor.RunOnce] that
	// ctx did not end, with what the pass did.
	Pass func(PassStats)
	// RunChanged is called during a pass for each run whose phase the pass moved, some
	// of whose operations ended, or whose operations' progress the pass wrote (see
	// [RunChange.Progressed]): to wake a controller's reconcile of its object, for
	// instance (the controller-runtime integration's source does). Under
	// [WithProgressWriteInterval] a run whose progress is held back is not written, and
	// RunChanged is not called for it.
	RunChanged func(RunChange)
	// Call is called after each Progress or Cancel call to a plugin, when the call is
	// given up (see [WithCallTimeout]), and when a call is not made because the
	// operation's previous call hangs ([CallHung]). It is not called for a call cut
	// short by the end of the poll's context.
	Call func(CallStats)
	// TimedOut is called when an operation is failed for running past its timeout (see
	// [TimeoutMessage]), before its plugin's Cancel.
	TimedOut func(operations.Operation)
	// Stalled is called when an operation is failed for making no progress within its
	// stall timeout (see [WithStallTimeout]), before its plugin's Cancel.
	Stalled func(operations.Operation)
	// Retry is called for each Progress error of an operation under a retry policy (see
	// [RetryPolicy]), and for the answer that ends a row of them.
	Retry func(RetryStats)
	// Finalized is called after each call of the [Finalizer].
	Finalized func(FinalizeStats)
}

// WithObserver adds o to the Monitor's observers: each WithObserver adds one, and the
// Monitor calls the functions of every observer, in the order they were added. By default
// there is none.
func WithObserver(o Observer) Option {
	return optionFunc(func(c *config) {
		c.observer = Observer{
			Pass:       both(c.observer.Pass, o.Pass),
			RunChanged: both(c.observer.RunChanged, o.RunChanged),
			Call:       both(c.observer.Call, o.Call),
			TimedOut:   both(c.observer.TimedOut, o.TimedOut),
			Stalled:    both(c.observer.Stalled, o.Stalled),
			Retry:      both(c.observer.Retry, o.Retry),
			Finalized:  both(c.observer.Finalized, o.Finalized),
		}
	})
}

// both returns a function calling f then g, either of which may be nil.
func both[T any](f, g func(T)) func(T) {
	switch {
	case f == nil:
		return g
	case g == nil:
		return f
	}
	return func(v T) { f(v); g(v) }
}

// A RunChange tells that a pass of a [Monitor] changed a run: it moved the run's phase,
// some of its operations ended, or it wrote their progress. From is the phase the run
// had before, To the phase it has after; they are equal when only operations ended or
// progressed. Running counts the run's operations still unfinished; Completed and
// Failed count those that ended in the pass. Progressed is true when the pass wrote
// nothing but the state of unfinished operations (their progress, that they started, a
// Progress error that a retry policy retries): the phase stayed and none ended, a
// change that a status may show later, coalesced with the next.
type RunChange struct {
	Owner      operations.Owner
	From, To   phase.Phase
	Running    int
	Completed  int
	Failed     int
	Progressed bool
}

// A CallOutcome says how a plugin call ended.
type CallOutcome string

// The outcomes of plugin calls.
const (
	CallSucceeded CallOutcome = "succeeded"
	CallErrored   CallOutcome = "errored"   // it returned an error
	CallPanicked  CallOutcome = "panicked"  // it panicked; the Monitor recovered
	CallTimedOut  CallOutcome = "timed_out" // given up after the call timeout
	// CallHung is the outcome of a call not made because the operation's previous call
	// was given up and its plugin has not returned yet: the operation takes the error of
	// a call given up, and the plugin is not called again until it returns.
	CallHung CallOutcome = "hung"
)

// CallStats describes one plugin call.
type CallStats struct {
	Action string // the plugin's registered name
	Cancel bool   // a Cancel call; else a Progress call
	// Duration is how long the call took; for a call not made ([CallHung]), how long
	// the hung call has been running.
	Duration time.Duration
	Outcome  CallOutcome
	// Err is what the call returned (nil when it succeeded); for a call that panicked,
	// an error that says with what value; for a call given up or not made, the error
	// of a call with no answer within the call timeout.
	Err error
}

// A RetryOutcome says what a [RetryPolicy] made of a Progress error, or of the answer
// after a row of them.
type RetryOutcome string

// The outcomes of a retry policy.
const (
	RetryScheduled RetryOutcome = "scheduled" // the error is retried, after Delay
	RetryExhausted RetryOutcome = "exhausted" // the error is retried no more: the operation failed
	RetryRefused   RetryOutcome = "refused"   // the error is not one to retry: the operation failed
	RetryRecovered RetryOutcome = "recovered" // the plugin answered after errors
)

// RetryStats describes what a [RetryPolicy] did with one Progress error or answer.
type RetryStats struct {
	Action string // the plugin's registered name
	// Attempt is the number of the error in its row, counting from 1; for
	// RetryRecovered, how many errors came before the answer.
	Attempt int
	// Delay is how long the operation waits for its next poll (RetryScheduled only);
	// zero means the next pass.
	Delay   time.Duration
	Outcome RetryOutcome
}

// FinalizeStats describes one call of a [Finalizer].
type FinalizeStats struct {
	Owner    operations.Owner
	Duration time.Duration // real time
	Err      error         // what it returned; nil on success
	TimedOut bool          // given up after the finalize timeout (see [WithFinalizeTimeout])
}

// PassStats is what one pass of [Monitor.Run] did.
type PassStats struct {
	Start    time.Time     // by the Monitor's clock
	Duration time.Duration // by the Monitor's clock
	// Runs is the number of waiting runs polled, Operations the number of operations
	// checked (not those deferred, below), Completed and Failed how many of them ended in this pass, NewErrors the
	// errors added to runs, Advanced the runs whose phase changed (finalized included).
	Runs, Operations, Completed, Failed, NewErrors, Advanced int
	// Finalized is the number of runs the pass moved out of a finalizing phase.
	Finalized int
	// Skipped is the number of runs the pass left alone because another Monitor held
	// their claim (see [operations.RunClaimer]).
	Skipped int
	// RunPhases counts the runs the pass found waiting or finalizing, by kind and phase,
	// as it found them (a run it moved from waiting to finalizing is counted once, as
	// waiting); nil when there were none.
	RunPhases []PhaseCount
	// OperationsNew and OperationsInProgress count the operations of the polled runs
	// still unfinished after the pass, by phase.
	OperationsNew, OperationsInProgress int
	// OperationsDeferred counts those the pass left alone because they wait for their
	// next poll after a Progress error (see [RetryPolicy]), and NextDue is the earliest
	// time one of those is due (see [PollResult]); the zero time when none waits.
	OperationsDeferred int
	NextDue            time.Time
	// ProgressHeld counts the polled runs whose progress the pass did not write (see
	// [WithProgressWriteInterval]).
	ProgressHeld int
	// Err joins what went wrong with the store or a finalizer; the pass went on
	// regardless.
	Err error
}

// A PhaseCount is a number of runs of one kind in one phase.
type PhaseCount struct {
	Kind  phase.Kind
	Phase phase.Phase
	Runs  int
}

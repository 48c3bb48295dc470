package monitor

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/itemops/itemops/operations"
)

// checks is the work of one poll: the run's unfinished operations, checked by the
// Monitor's workers (see Monitor.check).
type checks struct {
	m       *Monitor
	ctx     context.Context
	ops     []operations.Operation // each replaced by what its check found
	changed []change               // how the check changed ops[i]
	timeout time.Duration
	// known, under a policy, holds how the checks changed the Monitor state of
	// ops[i], by i, for the poll to keep should the store miss its write (see
	// lostWrites); the workers write it under mu.
	mu    sync.Mutex
	known map[int]lostWrite
	// cancelReason, when set, makes every check cancel its operation instead of asking
	// for its progress: the run's cancel was requested, or the run failed on a restart.
	cancelReason string
	// queued is when the checks were queued for the pool's workers, by the Monitor's
	// clock; set only when a Tracer wraps the calls.
	queued time.Time
}

// check asks the plugin about operation i, a task of the Monitor's pool, and stores the
// operation as it should be written, and whether it changed. Every problem becomes the
// operation's own failure; when the poll's ctx ends, the operation is left as it is.
// When a plugin call is given up, check returns at once: the operation was settled by
// pluginCall.givenUp.
func (c *checks) check(t *task[hungKey], i int) {
	op := c.ops[i]
	now := stamp(c.m.cfg.clock)
	tracker, err := c.m.resolve(op.Action)
	if c.cancelReason != "" {
		// The run is being cancelled: cancel the operation, whatever its progress.
		next := created(op, now)
		msg := CanceledPrefix + c.cancelReason
		if err == nil {
			var ok bool
			if _, ok, err = c.call(t, tracker, i, next, now, msg); !ok {
				return
			}
		}
		c.ops[i], c.changed[i] = c.cancelled(next, msg, err), moved
		return
	}
	var p operations.Progress
	if err == nil {
		var ok bool
		if p, ok, err = c.call(t, tracker, i, op, now, ""); !ok {
			return
		}
	}
	var (
		next operations.Operation
		end  ending
	)
	if err != nil {
		next, end = c.progressFailed(i, op, now, err)
	} else {
		next, end = c.answered(op, now, p)
	}
	if end.msg != "" {
		c.observeEnd(next, end)
		var cancelErr error
		if tracker != nil {
			var ok bool
			if _, ok, cancelErr = c.call(t, tracker, i, next, now, end.msg); !ok {
				return
			}
		}
		next = c.cancelled(next, end.msg, cancelErr)
	}
	c.ops[i], c.changed[i] = next, changeOf(op, next)
	c.know(i, op, next)
}

// know records, under a policy, how the check of ops[i] changed its Monitor state, from
// op's to next's, when next is unfinished (see lostWrites). progressFailed records the
// state of an operation that a retry bound failed itself: a failed operation keeps none.
func (c *checks) know(i int, op, next operations.Operation) {
	if c.m.cfg.policies && !next.Status.Phase.Finished() && next.Monitor != op.Monitor {
		c.keep(i, lostWrite{from: op.Monitor, to: next.Monitor})
	}
}

// keep records w as what the Monitor knows of ops[i].
func (c *checks) keep(i int, w lostWrite) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.known == nil {
		c.known = make(map[int]lostWrite)
	}
	c.known[i] = w
}

// An ending is how a check ends an operation that must be cancelled first: it ran past
// its timeout, or it stalled. msg is the error it fails with; empty, no ending.
type ending struct {
	msg     string
	stalled bool // else it timed out
}

// observeEnd tells the Observer, if any, that op is to be cancelled and failed for end.
func (c *checks) observeEnd(op operations.Operation, end ending) {
	f := c.m.cfg.observer.TimedOut
	if end.stalled {
		f = c.m.cfg.observer.Stalled
	}
	if f != nil {
		f(op.Clone())
	}
}

// A change is how a check changed an operation, which decides when a poll writes it
// (see WithProgressWriteInterval).
type change uint8

const (
	unchanged change = iota
	// progressed: only the plugin's report of progress changed (its counts, units,
	// description and times) and, with it, the Monitor's record of when the report
	// last moved (MonitorState's ProgressAt and MaxCompleted).
	progressed
	// moved: anything else changed too: the phase, the error, or the Monitor's retry
	// state.
	moved
)

// changeOf returns how a check changed op into next.
func changeOf(op, next operations.Operation) change {
	if next.Status == op.Status && next.Monitor == op.Monitor {
		return unchanged
	}
	if next.Status.Phase != op.Status.Phase || next.Status.Error != op.Status.Error {
		return moved
	}
	was := op.Monitor
	was.ProgressAt, was.MaxCompleted = next.Monitor.ProgressAt, next.Monitor.MaxCompleted
	if was != next.Monitor {
		return moved
	}
	return progressed
}

// callName is what the Monitor's log and errors call a plugin call: "cancel" for a
// Cancel call, else "progress".
func callName(cancel bool) string {
	if cancel {
		return "cancel"
	}
	return "progress"
}

// call makes a plugin call for operation i on tracker, a task of the pool (see
// task.call), in its worker's goroutine: Cancel of op when msg is set, op then to fail
// with msg, else Progress of op; now is when the check started. It returns the plugin's
// answer; the error Progress returned, as it is (Velero records a plugin's error text
// alone); or an error that names the call when Cancel failed, or the plugin panicked or
// had not answered by the deadline. A call whose deadline has passed when it returns
// counts as unanswered. When the poll's ctx ends first, it returns ctx.Err(). ok is false
// when the call was given up: pluginCall.givenUp settled the operation (or, when the
// poll's ctx ended, the pool left it as it is), and the caller must leave the poll alone.
//
// The call's context carries the deadline and the values of the poll's ctx. A plugin
// that ignores its context thus keeps only the goroutine it hangs in, never a worker,
// and its late answer is dropped. When an earlier call for the operation was given up
// and has not returned, call makes no call: it reports [CallHung] to the Observer and
// returns the error of a call given up ("no answer within ..."), as if this call had
// hung too.
func (c *checks) call(t *task[hungKey], tracker operations.Tracker, i int, op operations.Operation, now time.Time, msg string) (progress operations.Progress, ok bool, err error) {
	cancel := msg != ""
	pc := &pluginCall{c: c, tracker: tracker, i: i, op: op, now: now, msg: msg}
	parent := c.ctx
	if f := c.m.cfg.tracer.Call; f != nil {
		s := CallStart{Owner: op.Owner, OperationID: op.ID, Action: op.Action, Cancel: cancel, Reason: msg,
			Queued: c.queued, Started: c.m.cfg.clock.Now()}
		if !cancel {
			s.Attempts = op.Monitor.Attempts
		}
		parent, pc.end = f(parent, s)
	}
	r, ok := t.callUnder(parent, hungKeyOf(&op), callName(cancel), pc)
	switch {
	case !ok:
		return operations.Progress{}, false, nil // the call was ended by givenUp or dropped
	case r.outcome == CallHung:
		return operations.Progress{}, true, c.notCalled(pc.end, op, cancel, r.hung, r.took)
	case r.ended:
		pc.endTrace(CallStats{Action: op.Action, Cancel: cancel, Duration: r.took, Err: r.err})
		return operations.Progress{}, true, r.err // the poll ended: not the plugin's doing
	}
	err = r.err
	if r.outcome == CallTimedOut {
		err = c.m.noAnswer()
	}
	c.observeCall(pc.end, op.Action, cancel, r.took, r.outcome, err)
	switch {
	case r.outcome == CallErrored && !cancel:
		// The plugin's own error is recorded as it is, as Velero records it; the
		// Monitor's log and Observer say which call it came from.
		return operations.Progress{}, true, err
	case err != nil:
		return operations.Progress{}, true, fmt.Errorf("%s: %w", callName(cancel), err)
	}
	return pc.progress, true, nil
}

// A pluginCall is a Progress or Cancel call that a check makes through the pool (see
// checks.call): of ops[i], op as listed for Progress, as it is to fail for Cancel.
type pluginCall struct {
	c        *checks
	tracker  operations.Tracker
	i        int
	op       operations.Operation
	now      time.Time           // when the check started
	msg      string              // for Cancel, the error op fails with; empty for Progress
	progress operations.Progress // what Progress answered
	end      func(CallStats)     // ends the Tracer's Call; nil when there is none
}

// endTrace ends the Tracer's Call of pc, if any, with s.
func (pc *pluginCall) endTrace(s CallStats) {
	if pc.end != nil {
		pc.end(s)
	}
}

// dropped ends the Tracer's Call of pc, given up hungFor after it started because the
// poll's ctx ended: the operation is left as it is.
func (pc *pluginCall) dropped(hungFor time.Duration) {
	pc.endTrace(CallStats{Action: pc.op.Action, Cancel: pc.msg != "", Duration: hungFor, Err: pc.c.ctx.Err()})
}

func (pc *pluginCall) call(ctx context.Context) (err error) {
	if pc.msg != "" {
		return pc.tracker.Cancel(ctx, pc.op.Clone())
	}
	pc.progress, err = pc.tracker.Progress(ctx, pc.op.Clone())
	return err
}

// hungKey names an operation among the pool's hung calls.
type hungKey struct {
	run runKey
	id  string
}

func hungKeyOf(op *operations.Operation) hungKey { return hungKey{keyOf(op.Owner), op.ID} }

// observeCall tells the Observer, if any, and end, the end function of the Tracer's
// Call when not nil, how a call for an operation of action ended, a Cancel call when
// cancel is set, after took, with err.
func (c *checks) observeCall(end func(CallStats), action string, cancel bool, took time.Duration, outcome CallOutcome, err error) {
	f := c.m.cfg.observer.Call
	if f == nil && end == nil {
		return
	}
	s := CallStats{Action: action, Cancel: cancel, Duration: took, Outcome: outcome, Err: err}
	if f != nil {
		f(s)
	}
	if end != nil {
		end(s)
	}
}

// notCalled reports to the Observer, and to end (the end function of the Tracer's Call)
// when not nil, that a call of op, a Cancel when cancel is set, is not made because an
// earlier call, hung (a "progress" or "cancel" call), was given up and has not returned
// since hungFor, and returns the error of a call given up.
func (c *checks) notCalled(end func(CallStats), op operations.Operation, cancel bool, hung string, hungFor time.Duration) error {
	what := callName(cancel)
	c.m.cfg.logger.WarnContext(c.ctx, "plugin call not made: an earlier call given up has not returned",
		"run", op.Owner.String(), "operation", op.ID, "call", what, "hung call", hung, "hung for", hungFor)
	c.observeCall(end, op.Action, cancel, hungFor, CallHung, c.m.noAnswer())
	return fmt.Errorf("%s: %w", what, c.m.noAnswer())
}

// noAnswer returns the error of a plugin call that did not answer within the call
// timeout.
func (m *Monitor) noAnswer() error { return &noAnswerError{m.cfg.callTimeout} }

// givenUp settles the operation of pc, whose call the pool gave up after the call
// timeout, hungFor after it started: the operation fails with the error of a call that
// did not answer, or, for Progress, as a retry policy makes of that error. It runs in a
// goroutine of the pool's, while the call hangs on in the worker's.
func (pc *pluginCall) givenUp(hungFor time.Duration) {
	c, i, op, now, msg, cancel := pc.c, pc.i, pc.op, pc.now, pc.msg, pc.msg != ""
	c.observeCall(pc.end, op.Action, cancel, hungFor, CallTimedOut, c.m.noAnswer())
	err := fmt.Errorf("%s: %w", callName(cancel), c.m.noAnswer())
	if cancel {
		c.ops[i], c.changed[i] = c.cancelled(op, msg, err), moved
		return
	}
	next, end := c.progressFailed(i, op, now, err)
	if end.msg != "" {
		// The operation is to be cancelled, but its Progress call hangs: no Cancel is
		// made, as by a check (see call).
		c.observeEnd(next, end)
		next = c.cancelled(next, end.msg, c.notCalled(nil, next, true, callName(false), hungFor))
	}
	c.ops[i], c.changed[i] = next, changeOf(op, next)
	c.know(i, op, next)
}

// progressFailed returns op, the i-th of the poll, as a Progress error err at now leaves
// it, and the ending that fails it after a Cancel, if any. Without a retry policy that
// retries err, the operation fails with err's text. A retried error counts an attempt in
// the operation's MonitorState and sets its next poll, until the policy's bound fails the
// operation (the state it counted is then kept in c.known); one that comes past the
// operation's timeout, or past the end of its stall window, ends it as a timeout or a
// stall, err's text appended. An error that comes from the poll's own end is not the
// plugin's: op is then left as it is.
func (c *checks) progressFailed(i int, op operations.Operation, now time.Time, err error) (operations.Operation, ending) {
	if c.ctx.Err() != nil {
		return op, ending{}
	}
	next := created(op, now)
	pol := c.m.cfg.policyOf(op.Action)
	if !pol.retry.on() {
		return failOperation(next, err.Error()), ending{}
	}
	ms := &next.Monitor
	stats := RetryStats{Action: op.Action, Attempt: ms.Attempts + 1}
	if !pol.retry.retries(err) {
		c.observeRetry(stats, RetryRefused)
		return failOperation(next, err.Error()), ending{}
	}
	if pol.stall == 0 {
		ms.ProgressAt, ms.MaxCompleted = time.Time{}, 0
	} else if ms.ProgressAt.IsZero() {
		ms.ProgressAt = now // the window starts at the first check under it
	}
	switch {
	case now.After(next.Status.Created.Add(c.timeout)):
		return next, ending{msg: TimeoutMessage + "; " + err.Error()}
	case stalled(pol.stall, ms.ProgressAt, now):
		return next, ending{msg: stallMessage(pol.stall, &next.Status, ms.ProgressAt, now) + "; last error: " + err.Error(), stalled: true}
	}
	ms.Attempts++
	if ms.ErrorSince.IsZero() {
		ms.ErrorSince = now
	}
	ms.LastError = err.Error() // cut to size by putBatch
	if pol.retry.exhausted(*ms, now) {
		c.observeRetry(stats, RetryExhausted)
		c.keep(i, lostWrite{from: op.Monitor, to: *ms})
		return failOperation(next, fmt.Sprintf("%s (after %s over %s)", err, attempts(ms.Attempts), now.Sub(ms.ErrorSince))), ending{}
	}
	ms.NextPoll = time.Time{}
	if d := pol.retry.delay(ms.Attempts); d > 0 {
		ms.NextPoll = now.Add(d)
		if pol.retry.MaxElapsed > 0 {
			ms.NextPoll = earliest(ms.NextPoll, ms.ErrorSince.Add(pol.retry.MaxElapsed))
		}
		stats.Delay = ms.NextPoll.Sub(now)
	}
	c.observeRetry(stats, RetryScheduled)
	c.m.cfg.logger.WarnContext(c.ctx, "progress error retried", "run", op.Owner.String(), "operation", op.ID,
		"attempt", ms.Attempts, "next poll", ms.NextPoll, "error", err)
	return next, ending{}
}

// attempts says "1 attempt" or "n attempts".
func attempts(n int) string {
	if n == 1 {
		return "1 attempt"
	}
	return fmt.Sprintf("%d attempts", n)
}

// observeRetry tells the Observer, if any, what a retry policy made of an error or an
// answer.
func (c *checks) observeRetry(s RetryStats, outcome RetryOutcome) {
	if f := c.m.cfg.observer.Retry; f != nil {
		s.Outcome = outcome
		f(s)
	}
}

// answered returns op as report p at now leaves it, and the ending that fails it after a
// Cancel, if any: it ran past its timeout, or, under a stall timeout, its progress has
// not moved for the window. An answer ends a row of retried errors; the time of the last
// move, and the highest count seen while the report is below it, are kept while a stall
// timeout applies (see [WithStallTimeout]). The rest of the operation's MonitorState is
// cleared, so that an operation whose plugin has no policy (any more) keeps none.
func (c *checks) answered(op operations.Operation, now time.Time, p operations.Progress) (operations.Operation, ending) {
	pol := c.m.cfg.policyOf(op.Action)
	if op.Monitor.Attempts > 0 && pol.retry.on() {
		c.observeRetry(RetryStats{Action: op.Action, Attempt: op.Monitor.Attempts}, RetryRecovered)
	}
	next, expired := applyProgress(op, now, p, c.timeout)
	switch {
	case expired:
		return next, ending{msg: TimeoutMessage}
	case next.Status.Phase.Finished():
		return next, ending{}
	}
	next.Monitor = operations.MonitorState{}
	if pol.stall > 0 {
		at, mark := op.Monitor.ProgressAt, highest(&op.Status, &op.Monitor)
		if at.IsZero() || p.NCompleted > mark {
			at = now
		}
		next.Monitor.ProgressAt = at
		if mark > next.Status.NCompleted {
			next.Monitor.MaxCompleted = mark
		}
		if stalled(pol.stall, at, now) {
			return next, ending{msg: stallMessage(pol.stall, &next.Status, at, now), stalled: true}
		}
	}
	return next, ending{}
}

// cancelled returns op failed with msg after its Cancel call, which returned cancelErr:
// for running past its timeout, for stalling, or because its run is being cancelled. A
// plugin that does not cancel (ErrAsyncOperationsNotSupported, an error, a call given
// up) fails the operation all the same, with what it said appended.
func (c *checks) cancelled(op operations.Operation, msg string, cancelErr error) operations.Operation {
	if cancelErr != nil {
		c.m.cfg.logger.WarnContext(c.ctx, "cancel failed", "run", op.Owner.String(), "operation", op.ID, "error", cancelErr)
		msg += "; " + cancelErr.Error()
	}
	return failOperation(op, msg)
}

// applyProgress returns op as report p at now leaves it, and whether op ran past timeout
// and must be canceled.
func applyProgress(op operations.Operation, now time.Time, p operations.Progress, timeout time.Duration) (operations.Operation, bool) {
	next := created(op, now)
	if err := checkProgress(p); err != nil {
		return failOperation(next, err.Error()), false
	}
	next.Status.NCompleted, next.Status.NTotal = p.NCompleted, p.NTotal
	next.Status.OperationUnits, next.Status.Description = p.OperationUnits, p.Description
	if known(p.Started) {
		next.Status.Started = p.Started.Round(0).UTC()
	}
	if known(p.Updated) {
		next.Status.Updated = p.Updated.Round(0).UTC()
	}
	switch {
	case p.Completed && p.Err != "":
		return failOperation(next, p.Err), false
	case p.Completed:
		next.Status.Phase = operations.OperationCompleted
		next.Monitor = operations.MonitorState{}
	case now.After(next.Status.Created.Add(timeout)):
		return next, true
	case next.Status.Phase == operations.OperationNew && known(p.Started):
		next.Status.Phase = operations.OperationInProgress
	}
	return next, false
}

// created returns op with a creation time: without one no timeout can be counted, so
// counting starts at now.
func created(op operations.Operation, now time.Time) operations.Operation {
	if op.Status.Created.IsZero() {
		op.Status.Created = now
	}
	return op
}

// known reports whether a plugin's time is set: plugins report the zero time or the Unix
// epoch when they do not know.
func known(t time.Time) bool { return !t.IsZero() && !t.Equal(time.Unix(0, 0)) }

// failOperation marks op failed with msg. A finished operation keeps no MonitorState.
func failOperation(op operations.Operation, msg string) operations.Operation {
	op.Status.Phase = operations.OperationFailed
	op.Status.Error = msg
	op.Monitor = operations.MonitorState{}
	return op
}

// checkProgress rejects a report that no store accepts: a negative count, or a Started
// or Updated time outside years 0000 to 9999 in UTC, which an itemoperations file
// cannot hold. Were such a time recorded, the run's batch would be refused at every
// poll. NCompleted above NTotal is kept as reported, as Velero keeps it: a plugin
// whose total is an estimate may pass it.
func checkProgress(p operations.Progress) error {
	if err := p.Validate(); err != nil {
		return fmt.Errorf("progress: plugin reported %w", err)
	}
	return nil
}

// resolve finds the tracker of action; a resolver that panics is an error too.
func (m *Monitor) resolve(action string) (t operations.Tracker, err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("resolve plugin %q: panic: %v", action, v)
		}
	}()
	t, err = m.resolver.Resolve(action)
	if err == nil && t == nil {
		err = errors.New("no tracker")
	}
	if err != nil {
		return nil, fmt.Errorf("resolve plugin %q: %w", action, err)
	}
	return t, nil
}

// knew returns what the Monitor knows of ops[i], now op, should the store miss the write
// of the poll: the state the store holds (stored, when the poll recalled the operation's
// state, else what the check started from) and the state the Monitor saw last. ok is
// false when there is nothing to keep: the state is unchanged, or the operation ended
// other than by a retry bound. The poll calls it once every check has returned, when no
// worker writes known any more.
func (c *checks) knew(i int, op *operations.Operation, stored operations.MonitorState, recalled bool) (w lostWrite, ok bool) {
	w, ok = c.known[i]
	if !recalled {
		return w, ok
	}
	if !ok {
		if op.Status.Phase.Finished() {
			return lostWrite{}, false
		}
		w.to = op.Monitor
	}
	w.from = stored
	return w, true
}

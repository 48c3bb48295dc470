package monitor

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/itemops/itemops/operations"
)

// checks is the work of one poll: the run's unfinished operations, checked by the
// Monitor's workers (see Monitor.check).
type checks struct {
	m       *Monitor
	ctx     context.Context
	ops     []operations.Operation // each replaced by what its check found
	changed []bool                 // whether the check changed ops[i]
	timeout time.Duration
	// cancelReason, when set, makes every check cancel its operation instead of asking
	// for its progress: the run's cancel was requested, or the run failed on a restart.
	cancelReason string
	// next is the index of the next operation to check, guarded by the Monitor's
	// queueMu; unchecked counts the operations not yet checked or dropped (see
	// Monitor.check).
	next      int
	unchecked sync.WaitGroup
}

// A worker is what one worker goroutine keeps between its checks.
type worker struct {
	c *checks
	// spare is a call record that no give-up can reach any more, reused for the next
	// call to spare an allocation per call.
	spare *pending
}

// check asks the plugin about operation i and stores the operation as it should be
// written, and whether it changed. Every problem becomes the operation's own failure;
// when the poll's ctx ends, the operation is left as it is. check reports false when a
// plugin call was given up: the operation was settled and another worker took over, and
// the caller must leave without touching the poll.
func (w *worker) check(i int) bool {
	c := w.c
	op := c.ops[i]
	now := stamp(c.m.cfg.clock)
	tracker, err := c.m.resolve(op.Action)
	if c.cancelReason != "" {
		// The run is being cancelled: cancel the operation, whatever its progress.
		next := created(op, now)
		if err == nil {
			var ok bool
			if _, ok, err = w.call(tracker, i, next, now, true); !ok {
				return false
			}
		}
		c.ops[i], c.changed[i] = c.cancelled(next, err), true
		return true
	}
	var p operations.Progress
	if err == nil {
		var ok bool
		if p, ok, err = w.call(tracker, i, op, now, false); !ok {
			return false
		}
	}
	if err != nil {
		c.ops[i], c.changed[i] = c.progressFailed(op, now, err)
		return true
	}
	c.m.streaks.clear(op)
	next, expired := applyProgress(op, now, p, c.timeout)
	if expired {
		if f := c.m.cfg.observer.TimedOut; f != nil {
			f(next.Clone())
		}
		_, ok, err := w.call(tracker, i, next, now, true)
		if !ok {
			return false
		}
		next = c.cancelled(next, err)
	}
	c.ops[i], c.changed[i] = next, next.Status != op.Status
	return true
}

// The states of a plugin call.
const (
	calling int32 = iota
	returned
	givenUp
)

// A pending plugin call of a worker: what is needed to settle its operation if it is
// given up. A worker reuses the record for its next call only when the call's give-up
// was stopped before it ran (context.AfterFunc's stop reported true), so that a give-up
// that comes late never meets a later call.
type pending struct {
	c      *checks
	state  atomic.Int32
	i      int                  // the index of the operation
	op     operations.Operation // for Progress, the operation as listed; for Cancel, as it is to be failed
	now    time.Time            // when its check started
	cancel bool                 // a Cancel call; else a Progress call
	start  time.Time            // when the call started
	onDone func()               // p.giveUp, made once for each record
}

func (p *pending) what() string {
	if p.cancel {
		return "cancel"
	}
	return "progress"
}

// call makes a plugin call for operation i on tracker in the worker's goroutine: Cancel
// of op when cancel is set, else Progress of op. If the call is given up, the operation
// is failed from op (see pending); now is when the check started. It returns the
// plugin's answer; the error Progress returned, as it is (Velero records a plugin's error
// text alone); or an error that names the call when Cancel failed, or the plugin panicked
// or had not answered by the deadline. A call whose deadline has passed when it returns
// counts as unanswered, so that each call ends one way. When the poll's ctx ends first,
// it returns ctx.Err(). ok is false when the call was given up (see pending.giveUp): the
// operation is settled, and the caller must leave the poll alone.
//
// The call is made under context.WithTimeout(poll's ctx, call timeout), and
// context.AfterFunc on that context gives the call up when it outlasts its deadline or
// the poll ends first. The call's state (calling, returned, given up), changed by
// CompareAndSwap, decides who settles the operation: call when the plugin returns in
// time, else pending.giveUp. A plugin that ignores its context thus keeps only the
// goroutine it hangs in, never a worker: when it returns at last, call sees that the call
// was given up and drops the answer. A panic in the plugin is recovered around the call
// and becomes the operation's error.
//
// When an earlier call for the operation was given up and has not returned, call makes
// no call: it reports [CallHung] to the Observer and returns the error of a call given
// up ("no answer within ..."), as if this call had hung too.
func (w *worker) call(tracker operations.Tracker, i int, op operations.Operation, now time.Time, cancel bool) (progress operations.Progress, ok bool, err error) {
	c, p := w.c, w.spare
	if h := c.m.hung.find(&op); h != nil {
		return operations.Progress{}, true, c.notCalled(h, op, cancel)
	}
	if p == nil {
		p = &pending{}
		p.onDone = p.giveUp
	}
	w.spare = nil
	p.c = c
	p.state.Store(calling)
	p.i, p.op, p.now, p.cancel, p.start = i, op, now, cancel, time.Now()
	ctx, stop := context.WithTimeout(c.ctx, c.m.cfg.callTimeout)
	defer stop()
	unwatch := context.AfterFunc(ctx, p.onDone)
	panicked := false
	func() {
		defer func() {
			if v := recover(); v != nil {
				err, panicked = fmt.Errorf("plugin panicked: %v", v), true
			}
		}()
		if p.cancel {
			err = tracker.Cancel(ctx, p.op.Clone())
		} else {
			progress, err = tracker.Progress(ctx, p.op.Clone())
		}
	}()
	if !p.state.CompareAndSwap(calling, returned) {
		c.m.hung.returned(p) // given up: the answer is dropped
		return operations.Progress{}, false, nil
	}
	if unwatch() {
		w.spare = p // the give-up will never run: the record is free
	}
	if err := c.ctx.Err(); err != nil {
		return operations.Progress{}, true, err // the poll ended: not the plugin's doing
	}
	outcome := CallSucceeded
	switch {
	case ctx.Err() != nil:
		err, outcome = fmt.Errorf("no answer within %s", c.m.cfg.callTimeout), CallTimedOut
	case panicked:
		outcome = CallPanicked
	case err != nil:
		outcome = CallErrored
	}
	c.observeCall(p, outcome)
	switch {
	case outcome == CallErrored && !p.cancel:
		// The plugin's own error is recorded as it is, as Velero records it; the
		// Monitor's log and Observer say which call it came from.
		return operations.Progress{}, true, err
	case err != nil:
		return operations.Progress{}, true, fmt.Errorf("%s: %w", p.what(), err)
	}
	return progress, true, nil
}

// observeCall tells the Observer, if any, how call p ended.
func (c *checks) observeCall(p *pending, outcome CallOutcome) {
	if f := c.m.cfg.observer.Call; f != nil {
		f(CallStats{Action: p.op.Action, Cancel: p.cancel, Duration: time.Since(p.start), Outcome: outcome})
	}
}

// notCalled reports to the Observer that a call of op, a Cancel when cancel is set, is
// not made because the call h, given up, has not returned, and returns the error of a
// call given up.
func (c *checks) notCalled(h *pending, op operations.Operation, cancel bool) error {
	what := "progress"
	if cancel {
		what = "cancel"
	}
	hungFor := time.Since(h.start)
	c.m.cfg.logger.WarnContext(c.ctx, "plugin call not made: an earlier call given up has not returned",
		"run", op.Owner.String(), "operation", op.ID, "call", what, "hung call", h.what(), "hung for", hungFor)
	if f := c.m.cfg.observer.Call; f != nil {
		f(CallStats{Action: op.Action, Cancel: cancel, Duration: hungFor, Outcome: CallHung})
	}
	return fmt.Errorf("%s: no answer within %s", what, c.m.cfg.callTimeout)
}

// giveUp runs when the context of call p ends. If the call is still running, it gives
// the call up and lists it among the Monitor's hung calls until it returns. When the
// deadline passed, it records the operation's failure; when the poll's ctx ended, it
// leaves the operation as it is. Either way the operation counts as checked, and a new
// worker takes the place of the one the plugin holds.
func (p *pending) giveUp() {
	c := p.c
	if !c.m.hung.giveUp(p) {
		return // the call returned: its worker settles it
	}
	if c.ctx.Err() == nil {
		c.observeCall(p, CallTimedOut)
		err := fmt.Errorf("%s: no answer within %s", p.what(), c.m.cfg.callTimeout)
		if p.cancel {
			c.ops[p.i], c.changed[p.i] = c.cancelled(p.op, err), true
		} else {
			c.ops[p.i], c.changed[p.i] = c.progressFailed(p.op, p.now, err)
		}
	}
	if next, i, ok := c.m.checked(c); ok {
		go c.m.work(next, i)
	}
}

// progressFailed returns op as a Progress error err at now leaves it, and whether it
// changed: failed once the tolerated errors are used up. An error that comes from the
// poll's own end is not the plugin's: op is then left as it is.
func (c *checks) progressFailed(op operations.Operation, now time.Time, err error) (operations.Operation, bool) {
	if c.ctx.Err() != nil {
		return op, false
	}
	next := created(op, now)
	if !c.m.streaks.fails(op, err) {
		c.m.cfg.logger.WarnContext(c.ctx, "progress error tolerated", "run", op.Owner.String(), "operation", op.ID, "error", err)
		return next, next.Status != op.Status
	}
	return failOperation(next, err.Error()), true
}

// cancelled returns op failed after its Cancel call, which returned cancelErr: for
// running past its timeout, or because its run is being cancelled. A plugin that does
// not cancel (ErrAsyncOperationsNotSupported, an error, a call given up) fails the
// operation all the same, with what it said appended.
func (c *checks) cancelled(op operations.Operation, cancelErr error) operations.Operation {
	msg := TimeoutMessage
	if c.cancelReason != "" {
		msg = CanceledPrefix + c.cancelReason
	}
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

// failOperation marks op failed with msg.
func failOperation(op operations.Operation, msg string) operations.Operation {
	op.Status.Phase = operations.OperationFailed
	op.Status.Error = msg
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

// streaks counts the consecutive Progress errors of each operation, for
// WithProgressErrorTolerance. The counts live in the Monitor's memory, so they start
// over when the Monitor restarts or another Monitor takes the run's claim. They are
// kept by run: an operation's count goes when the operation ends or answers, and a run's
// counts go when a poll finds it or leaves it no longer waiting, and when a pass of Run
// does not find it waiting (ended, cancelled or deleted), so they never outlive their
// run. With no tolerance nothing is counted.
type streaks struct {
	tolerance int
	mu        sync.Mutex
	runs      map[runKey]map[string]int // operation ID → errors in a row
}

// fails records a Progress error err of op and reports whether it fails op: errors that
// cannot heal always do, and others once the tolerance is used up.
func (s *streaks) fails(op operations.Operation, err error) bool {
	if errors.Is(err, operations.ErrInvalidOperationID) || errors.Is(err, operations.ErrAsyncOperationsNotSupported) {
		s.clear(op)
		return true
	}
	if s.tolerance == 0 {
		return true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	k := keyOf(op.Owner)
	ids := s.runs[k]
	if ids == nil {
		ids = make(map[string]int)
		s.runs[k] = ids
	}
	ids[op.ID]++
	if ids[op.ID] > s.tolerance {
		delete(ids, op.ID)
		return true
	}
	return false
}

// clear forgets the errors of op.
func (s *streaks) clear(op operations.Operation) {
	if s.tolerance == 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if ids := s.runs[keyOf(op.Owner)]; ids != nil {
		delete(ids, op.ID)
	}
}

// drop forgets the errors of the operations of the run of o.
func (s *streaks) drop(o operations.Owner) {
	if s.tolerance == 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.runs, keyOf(o))
}

// keepRuns forgets the errors of every run that is not among waiting.
func (s *streaks) keepRuns(waiting []operations.Run) {
	if s.tolerance == 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.runs) == 0 {
		return
	}
	keep := make(map[runKey]bool, len(waiting))
	for _, r := range waiting {
		keep[keyOf(r.Owner)] = true
	}
	for k := range s.runs {
		if !keep[k] {
			delete(s.runs, k)
		}
	}
}

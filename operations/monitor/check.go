package monitor

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/itemops/itemops/operations"
)

// checks is the work of one poll: the run's unfinished operations, each checked in a
// goroutine of its own (see Monitor.check).
type checks struct {
	m       *Monitor
	ctx     context.Context
	ops     []operations.Operation // each replaced by what its check found
	changed []bool                 // whether the check changed ops[i]
	timeout time.Duration
	// cancelReason, when set, makes every check cancel its operation instead of asking
	// for its progress: the run's cancel was requested, or the run failed on a restart.
	cancelReason string
}

// check asks the plugin about operation i and stores the operation as it should be
// written, and whether it changed. Every problem becomes the operation's own failure;
// when the poll's ctx ends, the operation is left as it is.
func (c *checks) check(i int) {
	op := c.ops[i]
	now := stamp(c.m.cfg.clock)
	tracker, err := c.m.resolve(op.Action)
	if c.cancelReason != "" {
		// The run is being cancelled: cancel the operation, whatever its progress.
		if err == nil {
			err = c.cancel(tracker, op)
		}
		c.ops[i], c.changed[i] = c.cancelled(created(op, now), err), true
		return
	}
	var p operations.Progress
	if err == nil {
		p, err = c.call(tracker, op, false)
	}
	if err != nil {
		c.ops[i], c.changed[i] = c.progressFailed(op, now, err)
		return
	}
	c.m.streaks.clear(op)
	next, expired := applyProgress(op, now, p, c.timeout)
	if expired {
		if f := c.m.cfg.observer.TimedOut; f != nil {
			f(next.Clone())
		}
		next = c.cancelled(next, c.cancel(tracker, op))
	}
	c.ops[i], c.changed[i] = next, next.Status != op.Status
}

// cancel calls the plugin's Cancel for op.
func (c *checks) cancel(tracker operations.Tracker, op operations.Operation) error {
	_, err := c.call(tracker, op, true)
	return err
}

// An answer is what a plugin call returned.
type answer struct {
	progress operations.Progress
	err      error
	panicked bool
}

// call asks tracker for the progress of op, or, when cancel is set, cancels op: in a
// goroutine of its own (see ask), with a context that ends after the Monitor's call
// timeout. It returns the plugin's answer, or an error that names the call when the
// plugin failed, panicked or had not answered by the deadline; a call whose deadline has
// passed when its answer is taken counts as unanswered, so that each call ends one way.
// A plugin that ignores its context keeps only its goroutine, until it returns; its late
// answer is dropped. When the poll's ctx ends first, call returns ctx.Err() at once.
func (c *checks) call(tracker operations.Tracker, op operations.Operation, cancel bool) (operations.Progress, error) {
	ctx, stop := context.WithTimeout(c.ctx, c.m.cfg.callTimeout)
	defer stop()
	done := make(chan answer, 1)
	start := time.Now()
	go ask(ctx, tracker, op, cancel, done)
	var a answer
	select {
	case a = <-done:
	case <-ctx.Done():
	}
	if err := c.ctx.Err(); err != nil {
		return operations.Progress{}, err // the poll ended: not the plugin's doing
	}
	outcome := CallSucceeded
	switch {
	case ctx.Err() != nil:
		a.err, outcome = fmt.Errorf("no answer within %s", c.m.cfg.callTimeout), CallTimedOut
	case a.panicked:
		outcome = CallPanicked
	case a.err != nil:
		outcome = CallErrored
	}
	if f := c.m.cfg.observer.Call; f != nil {
		f(CallStats{Action: op.Action, Cancel: cancel, Duration: time.Since(start), Outcome: outcome})
	}
	if a.err != nil {
		what := "progress"
		if cancel {
			what = "cancel"
		}
		return operations.Progress{}, fmt.Errorf("%s: %w", what, a.err)
	}
	return a.progress, nil
}

// ask makes the plugin call of call and sends its answer on done, which has room for it;
// a panic is an answer too.
func ask(ctx context.Context, tracker operations.Tracker, op operations.Operation, cancel bool, done chan<- answer) {
	defer func() {
		if v := recover(); v != nil {
			done <- answer{err: fmt.Errorf("plugin panicked: %v", v), panicked: true}
		}
	}()
	var a answer
	if cancel {
		a.err = tracker.Cancel(ctx, op.Clone())
	} else {
		a.progress, a.err = tracker.Progress(ctx, op.Clone())
	}
	done <- a
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
	msg := TimedOut
	if c.cancelReason != "" {
		msg = CancelledPrefix + c.cancelReason
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

// checkProgress rejects a report that cannot be true.
func checkProgress(p operations.Progress) error {
	switch {
	case p.NCompleted < 0 || p.NTotal < 0:
		return fmt.Errorf("progress: plugin reported negative progress (%d of %d)", p.NCompleted, p.NTotal)
	case p.NTotal > 0 && p.NCompleted > p.NTotal:
		return fmt.Errorf("progress: plugin reported %d of %d %s completed", p.NCompleted, p.NTotal, p.OperationUnits)
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

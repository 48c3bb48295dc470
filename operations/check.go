package operations

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// checks is the work of one [Monitor.Poll]: the run's unfinished operations, checked by
// lanes (see lane).
type checks struct {
	m       *Monitor
	ctx     context.Context
	ops     []Operation // each replaced by what its check found
	changed []bool      // whether the check changed ops[i]
	timeout time.Duration
	next    atomic.Int64 // the index of the next operation to check
	lanes   sync.WaitGroup
}

// A lane checks operations of a poll one after another, calling the plugin in its own
// goroutine, until none is left. It holds one of the Monitor's tokens and is counted in
// the poll's lanes. When a plugin call outlasts the call timeout, or the poll's ctx ends
// first, a watchdog gives the call up and a new lane, in a new goroutine, takes over the
// token and the count: the plugin keeps only the goroutine it hangs in.
type lane struct {
	c   *checks
	dog atomic.Pointer[watchdog]
	// unwatch stops the watch on the poll's ctx, which hurries the watchdog when the
	// poll ends.
	unwatch func() bool
}

// startLane starts a lane in a new goroutine; the caller holds the token and has counted
// the lane in c.lanes.
func (c *checks) startLane() {
	l := &lane{c: c}
	l.dog.Store(newWatchdog(l))
	l.unwatch = context.AfterFunc(c.ctx, func() { l.dog.Load().timer.Reset(0) })
	go l.run()
}

// run checks operations until none is left or the poll's ctx ends, then gives back the
// lane's token and leaves the poll's lanes.
func (l *lane) run() {
	c := l.c
	for c.ctx.Err() == nil {
		i := int(c.next.Add(1) - 1)
		if i >= len(c.ops) {
			break
		}
		if !l.check(i) {
			return // given up: another lane took over
		}
	}
	l.unwatch()
	l.dog.Load().timer.Stop()
	<-c.m.calls
	c.lanes.Done()
}

// check asks the plugin about operation i and stores the operation as it should be
// written, and whether it changed. Every problem becomes the operation's own failure. It
// returns false when one of its plugin calls was given up; the calling goroutine must
// then leave the poll alone.
func (l *lane) check(i int) bool {
	c := l.c
	op := c.ops[i]
	now := stamp(c.m.cfg.clock)
	tracker, err := c.m.resolve(op.Action)
	var p Progress
	if err == nil {
		var ok bool
		p, err, ok = call(l, "progress", func(ctx context.Context) (Progress, error) {
			return tracker.Progress(ctx, op.Clone())
		}, func(err error) {
			c.ops[i], c.changed[i] = c.progressFailed(op, now, err)
		})
		if !ok {
			return false
		}
	}
	if err != nil {
		c.ops[i], c.changed[i] = c.progressFailed(op, now, err)
		return true
	}
	c.m.clearErrors(keyOf(op))
	next, expired := applyProgress(op, now, p, c.timeout)
	if expired {
		var ok bool
		_, err, ok = call(l, "cancel", func(ctx context.Context) (struct{}, error) {
			return struct{}{}, tracker.Cancel(ctx, op.Clone())
		}, func(err error) {
			c.ops[i], c.changed[i] = c.timedOut(next, err), true
		})
		if !ok {
			return false
		}
		next = c.timedOut(next, err)
	}
	c.ops[i], c.changed[i] = next, next.Status != op.Status
	return true
}

// progressFailed returns op as a Progress error err at now leaves it, and whether it
// changed: failed once the tolerated errors are used up. An error that comes from the
// poll's own end is not the plugin's: op is then left as it is.
func (c *checks) progressFailed(op Operation, now time.Time, err error) (Operation, bool) {
	if c.ctx.Err() != nil {
		return op, false
	}
	next := created(op, now)
	if !c.m.countError(keyOf(op), err) {
		c.m.cfg.logger.WarnContext(c.ctx, "progress error tolerated", "run", op.Owner.String(), "operation", op.ID, "error", err)
		return next, next.Status != op.Status
	}
	return failOperation(next, err.Error()), true
}

// timedOut returns op failed for running past its timeout; cancelErr is what its Cancel
// call returned.
func (c *checks) timedOut(op Operation, cancelErr error) Operation {
	msg := TimedOut
	if cancelErr != nil {
		c.m.cfg.logger.WarnContext(c.ctx, "cancel failed", "run", op.Owner.String(), "operation", op.ID, "error", cancelErr)
		msg += "; " + cancelErr.Error()
	}
	return failOperation(op, msg)
}

// applyProgress returns op as report p at now leaves it, and whether op ran past timeout
// and must be canceled.
func applyProgress(op Operation, now time.Time, p Progress, timeout time.Duration) (Operation, bool) {
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
		next.Status.Phase = OperationCompleted
	case now.After(next.Status.Created.Add(timeout)):
		return next, true
	case next.Status.Phase == OperationNew && known(p.Started):
		next.Status.Phase = OperationInProgress
	}
	return next, false
}

// created returns op with a creation time: without one no timeout can be counted, so
// counting starts at now.
func created(op Operation, now time.Time) Operation {
	if op.Status.Created.IsZero() {
		op.Status.Created = now
	}
	return op
}

// known reports whether a plugin's time is set: plugins report the zero time or the Unix
// epoch when they do not know.
func known(t time.Time) bool { return !t.IsZero() && !t.Equal(time.Unix(0, 0)) }

// failOperation marks op failed with msg.
func failOperation(op Operation, msg string) Operation {
	op.Status.Phase = OperationFailed
	op.Status.Error = msg
	return op
}

// checkProgress rejects a report that cannot be true.
func checkProgress(p Progress) error {
	switch {
	case p.NCompleted < 0 || p.NTotal < 0:
		return fmt.Errorf("progress: plugin reported negative progress (%d of %d)", p.NCompleted, p.NTotal)
	case p.NTotal > 0 && p.NCompleted > p.NTotal:
		return fmt.Errorf("progress: plugin reported %d of %d %s completed", p.NCompleted, p.NTotal, p.OperationUnits)
	}
	return nil
}

// The states of a watched plugin call.
const (
	idle int32 = iota
	calling
	givenUp
)

// A watchdog watches the plugin calls of a lane, one at a time. Its timer, armed for
// each call, fires after the call timeout, or at once when the poll's ctx ends; if the
// call is still running then, the watchdog gives it up: it passes the call's giveUp the
// error, and starts a new lane to go on with the poll. A lane keeps its watchdog while
// the timer is stopped in time, and takes a new one otherwise, so that a late firing
// never meets a later call.
type watchdog struct {
	l     *lane
	timer *time.Timer
	state atomic.Int32
	// The call watched; set before state becomes calling.
	what   string
	giveUp func(error)
}

func newWatchdog(l *lane) *watchdog {
	w := &watchdog{l: l}
	w.timer = time.AfterFunc(time.Hour, w.fire)
	w.timer.Stop()
	return w
}

// fire gives up the call in flight, if there is one.
func (w *watchdog) fire() {
	if !w.state.CompareAndSwap(calling, givenUp) {
		return
	}
	c := w.l.c
	err := c.ctx.Err()
	if err == nil {
		err = fmt.Errorf("%s: no answer within %s", w.what, c.m.cfg.callTimeout)
	}
	w.l.unwatch()
	w.giveUp(err)
	c.startLane()
}

// call calls f in the lane's goroutine with a context that ends after the Monitor's
// call timeout, and returns f's result, or an error naming what when f failed or
// panicked, and true. When the lane's watchdog gives the call up first, call returns
// false once f has returned, as late as the plugin likes, and its result is dropped:
// giveUp has recorded the failure and a new lane goes on with the poll.
func call[T any](l *lane, what string, f func(context.Context) (T, error), giveUp func(error)) (T, error, bool) {
	c, w := l.c, l.dog.Load()
	timeout := c.m.cfg.callTimeout
	ctx, cancel := context.WithTimeout(c.ctx, timeout)
	defer cancel()
	w.what, w.giveUp = what, giveUp
	w.state.Store(calling)
	w.timer.Reset(timeout)
	var (
		v   T
		err error
	)
	// The poll's ctx may have ended before the timer was armed, when its hurrying the
	// watchdog found it idle: then the plugin is not called at all.
	if err = c.ctx.Err(); err == nil {
		v, err = protect(ctx, f)
	}
	if !w.state.CompareAndSwap(calling, idle) {
		var zero T
		return zero, nil, false
	}
	if !w.timer.Stop() {
		l.dog.Store(newWatchdog(l)) // it fired, or is firing: it must not meet the next call
	}
	switch {
	case err == nil:
		return v, nil, true
	case c.ctx.Err() != nil:
		return v, c.ctx.Err(), true
	case ctx.Err() != nil:
		return v, fmt.Errorf("%s: no answer within %s", what, timeout), true
	}
	return v, fmt.Errorf("%s: %w", what, err), true
}

// protect calls f, turning a panic into an error.
func protect[T any](ctx context.Context, f func(context.Context) (T, error)) (v T, err error) {
	defer func() {
		if r := recover(); r != nil {
			var zero T
			v, err = zero, fmt.Errorf("plugin panicked: %v", r)
		}
	}()
	return f(ctx)
}

// resolve finds the tracker of action; a resolver that panics is an error too.
func (m *Monitor) resolve(action string) (t Tracker, err error) {
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

func keyOf(op Operation) opKey { return opKey{op.Owner.Kind, op.Owner.Name, op.ID} }

// countError records a Progress error of key and reports whether it fails the operation.
func (m *Monitor) countError(key opKey, err error) bool {
	if errors.Is(err, ErrInvalidOperationID) || errors.Is(err, ErrAsyncOperationsNotSupported) {
		m.clearErrors(key)
		return true
	}
	m.errorsMu.Lock()
	defer m.errorsMu.Unlock()
	m.progressErrors[key]++
	if m.progressErrors[key] > m.cfg.tolerance {
		delete(m.progressErrors, key)
		return true
	}
	return false
}

func (m *Monitor) clearErrors(key opKey) {
	m.errorsMu.Lock()
	delete(m.progressErrors, key)
	m.errorsMu.Unlock()
}

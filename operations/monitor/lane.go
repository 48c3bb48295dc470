package monitor

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/itemops/itemops/operations"
)

// checks is the work of one [Monitor.Poll]: the run's unfinished operations, checked by
// lanes (see lane).
type checks struct {
	m       *Monitor
	ctx     context.Context
	ops     []operations.Operation // each replaced by what its check found
	changed []bool                 // whether the check changed ops[i]
	timeout time.Duration
	// cancelReason, when set, makes every check cancel its operation instead of asking
	// for its progress: the run's cancel was requested, or the run failed on a restart.
	cancelReason string
	next         atomic.Int64 // the index of the next operation to check
	lanes        sync.WaitGroup
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

// The states of a watched plugin call.
const (
	idle int32 = iota
	calling
	givenUp
)

// A pending plugin call: what a watchdog needs to give it up.
type pending struct {
	i      int                  // the index of the operation
	op     operations.Operation // for Progress, the operation as listed; for Cancel, as its report left it
	now    time.Time            // when its check started
	cancel bool                 // a Cancel call; else a Progress call
}

func (p *pending) what() string {
	if p.cancel {
		return "cancel"
	}
	return "progress"
}

// settle records what the end of call p makes of its operation: a Progress call that
// failed with err, or a Cancel call that returned err (nil included), whether it ended or
// was given up.
func (c *checks) settle(p *pending, err error) {
	if p.cancel {
		c.ops[p.i], c.changed[p.i] = c.cancelled(p.op, err), true
		return
	}
	c.ops[p.i], c.changed[p.i] = c.progressFailed(p.op, p.now, err)
}

// A watchdog watches the plugin calls of a lane, one at a time. Its timer, armed for
// each call, fires after the call timeout, or at once when the poll's ctx ends; if the
// call is still running then, the watchdog gives it up: it ends the call's context,
// records the call's failure and starts a new lane to go on with the poll. A lane keeps
// its watchdog while the timer is stopped in time, and takes a new one otherwise, so that
// a late firing never meets a later call.
type watchdog struct {
	l     *lane
	timer *time.Timer
	state atomic.Int32
	// The call watched; set before state becomes calling.
	call pending
	ctx  *callContext
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
	if err != nil {
		w.ctx.end(err)
	} else {
		w.ctx.end(context.DeadlineExceeded)
		err = fmt.Errorf("%s: no answer within %s", w.call.what(), c.m.cfg.callTimeout)
	}
	w.l.unwatch()
	c.m.observeCall(&w.call, c.m.cfg.callTimeout+time.Since(w.ctx.deadline), CallTimedOut)
	c.settle(&w.call, err)
	c.startLane()
}

// observeCall tells the PluginCall hook, if any, how call p ended after d.
func (m *Monitor) observeCall(p *pending, d time.Duration, outcome CallOutcome) {
	if m.cfg.hooks.PluginCall != nil {
		m.cfg.hooks.PluginCall(CallStats{Action: p.op.Action, Cancel: p.cancel, Duration: d, Outcome: outcome})
	}
}

// call makes plugin call p, f, in the lane's goroutine with a context that ends after
// the Monitor's call timeout, and returns f's result, or an error naming the call when f
// failed or panicked, and true. When the lane's watchdog gives the call up first, call
// returns false once f has returned, as late as the plugin likes, and its result is
// dropped: the watchdog has recorded the failure and a new lane goes on with the poll.
func call[T any](l *lane, p pending, f func(context.Context) (T, error)) (T, error, bool) {
	c, w := l.c, l.dog.Load()
	timeout := c.m.cfg.callTimeout
	ctx := &callContext{parent: c.ctx, deadline: time.Now().Add(timeout)}
	w.call, w.ctx = p, ctx
	w.state.Store(calling)
	w.timer.Reset(timeout)
	var (
		v        T
		err      error
		panicked bool
		start    = time.Now()
	)
	// The poll's ctx may have ended before the timer was armed, when its hurrying the
	// watchdog found it idle: then the plugin is not called at all.
	if err = c.ctx.Err(); err == nil {
		v, err, panicked = protect(ctx, f)
	}
	if !w.state.CompareAndSwap(calling, idle) {
		var zero T
		return zero, nil, false
	}
	if c.ctx.Err() == nil {
		outcome := CallSucceeded
		switch {
		case panicked:
			outcome = CallPanicked
		case err != nil:
			outcome = CallErrored
		}
		c.m.observeCall(&p, time.Since(start), outcome)
	}
	ctx.end(context.Canceled)
	if !w.timer.Stop() {
		l.dog.Store(newWatchdog(l)) // it fired, or is firing: it must not meet the next call
	}
	if err != nil {
		return v, fmt.Errorf("%s: %w", p.what(), err), true
	}
	return v, nil, true
}

// A callContext is the context of one plugin call: the poll's context, bounded by the
// call's deadline. It ends when the call returns and, while the call runs, when the
// lane's watchdog sees the deadline pass or the poll's context end. It behaves as a
// context of context.WithTimeout, but costs no timer of its own (the watchdog keeps the
// time) and no registration with the poll's context (the watchdog watches that too): a
// Monitor makes one for every plugin call. It has AfterFunc, so that the context package
// ends the contexts a plugin derives from it without a goroutine each. One difference
// remains: context.Cause finds the poll context's cause (nil while the poll runs) rather
// than the call context's error; the contexts derived from it get the error as their
// cause, as they would from context.WithTimeout.
type callContext struct {
	parent   context.Context
	deadline time.Time

	mu    sync.Mutex
	done  chan struct{}        // made when first asked for; closed when the context ends
	err   error                // why it ended; nil while it runs
	funcs map[*func()]struct{} // registered by AfterFunc, started when it ends
}

// Deadline returns the call's deadline, or the poll's when that is earlier.
func (c *callContext) Deadline() (time.Time, bool) {
	if d, ok := c.parent.Deadline(); ok && d.Before(c.deadline) {
		return d, true
	}
	return c.deadline, true
}

// Done returns a channel closed when the context ends.
func (c *callContext) Done() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done == nil {
		c.done = make(chan struct{})
		if c.err != nil {
			close(c.done)
		}
	}
	return c.done
}

// Err returns nil while the context runs; then context.DeadlineExceeded, the poll
// context's error, or context.Canceled once the call has returned.
func (c *callContext) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// Value returns the poll context's value for key.
func (c *callContext) Value(key any) any { return c.parent.Value(key) }

// AfterFunc arranges for f to run in its own goroutine once the context ends, as
// context.AfterFunc does; stop undoes that, and reports whether it did so before f was
// started.
func (c *callContext) AfterFunc(f func()) (stop func() bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		go f()
		return func() bool { return false }
	}
	if c.funcs == nil {
		c.funcs = make(map[*func()]struct{})
	}
	key := &f
	c.funcs[key] = struct{}{}
	return func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		_, ok := c.funcs[key]
		delete(c.funcs, key)
		return ok
	}
}

// end ends the context with err, unless it has ended already.
func (c *callContext) end(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return
	}
	c.err = err
	if c.done != nil {
		close(c.done)
	}
	for f := range c.funcs {
		go (*f)()
	}
	c.funcs = nil
}

// protect calls f, turning a panic into an error, and reports whether f panicked.
func protect[T any](ctx context.Context, f func(context.Context) (T, error)) (v T, err error, panicked bool) {
	defer func() {
		if r := recover(); r != nil {
			var zero T
			v, err, panicked = zero, fmt.Errorf("plugin panicked: %v", r), true
		}
	}()
	v, err = f(ctx)
	return v, err, false
}

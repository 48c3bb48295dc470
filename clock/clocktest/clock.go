// Package clocktest provides the fake clock of itemops: a [clock.Clock] whose time moves
// only when a test says, with ways to wait until the code under test is asleep on it. It
// is the module's one fake clock, for the tests of every package that takes a
// [clock.Clock] (the Monitor's WithClock, the progress Reporter's, the adapters' waits).
package clocktest

import (
	"sync"
	"time"

	"github.com/itemops/itemops/clock"
)

// A Clock is a fake [clock.Clock] whose time moves only when told. It is safe for
// concurrent use; its zero value is not usable: call [NewClock].
type Clock struct {
	mu      sync.Mutex
	cond    *sync.Cond // signalled on every call of After; uses mu
	now     time.Time
	afters  int // calls of After so far
	waiters []waiter
}

var _ clock.Clock = (*Clock)(nil)

type waiter struct {
	at time.Time
	ch chan time.Time
}

// NewClock returns a Clock showing t.
func NewClock(t time.Time) *Clock {
	c := &Clock{now: t}
	c.cond = sync.NewCond(&c.mu)
	return c
}

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// After returns a channel that receives the clock's time once [Clock.Advance] has moved it
// d or more past now. A d ≤ 0 fires at once.
func (c *Clock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.afters++
	c.cond.Broadcast()
	ch := make(chan time.Time, 1)
	if d <= 0 {
		ch <- c.now
		return ch
	}
	c.waiters = append(c.waiters, waiter{at: c.now.Add(d), ch: ch})
	return ch
}

// Advance moves the clock d forward and fires every After whose time has come.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.moveTo(c.now.Add(d))
}

// AdvanceTo moves the clock forward to t, as Advance(t.Sub(Now())) would without the race
// between the two calls, and fires every After whose time has come. The clock never goes
// back: a t that is not after the clock's time leaves it where it is. It returns how far
// the clock moved.
func (c *Clock) AdvanceTo(t time.Time) time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !t.After(c.now) {
		return 0
	}
	d := t.Sub(c.now)
	c.moveTo(t)
	return d
}

// moveTo sets the clock to t and fires the Afters whose time has come; c.mu is held.
func (c *Clock) moveTo(t time.Time) {
	c.now = t
	kept := c.waiters[:0]
	for _, w := range c.waiters {
		if w.at.After(c.now) {
			kept = append(kept, w)
			continue
		}
		w.ch <- c.now
	}
	c.waiters = kept
}

// Waiters returns how many After channels have not fired yet.
func (c *Clock) Waiters() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.waiters)
}

// BlockUntilWaiters blocks until at least n After channels are waiting to fire, so that a
// test can Advance the clock knowing the code under test is asleep on it.
func (c *Clock) BlockUntilWaiters(n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for len(c.waiters) < n {
		c.cond.Wait()
	}
}

// BlockUntilAfterCalls blocks until After has been called at least n times in all, so that
// a test can tell the code under test has gone back to sleep even when it slept for no
// time (After(0)) or has already been woken.
func (c *Clock) BlockUntilAfterCalls(n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for c.afters < n {
		c.cond.Wait()
	}
}

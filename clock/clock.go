// Package clock is where itemops reads the time: the [Clock] interface that everything
// that stamps, times out or sleeps takes (the Monitor of package operations/monitor, the
// Reporter of package progress, the waits of package adapters), and [System], the real
// clock they use by default.
//
// Tests pass the fake of package clock/clocktest instead, whose time moves only when the
// test says. It is the one fake clock of the module, kept beside the interface it fakes
// (as net/http/httptest is beside net/http) so that a test of any package, a leaf such as
// progress included, can use it without importing anything else of itemops.
//
// Package clock imports nothing of itemops.
package clock

import "time"

// A Clock tells the time and wakes its caller after a delay. Implementations must be safe
// for concurrent use.
type Clock interface {
	// Now returns the current time.
	Now() time.Time
	// After returns a channel that receives the time once d has passed; d ≤ 0 fires at
	// once. The caller may abandon the channel without receiving from it.
	After(d time.Duration) <-chan time.Time
}

// System is the real clock: Now is [time.Now] and After is [time.After]. Its zero value
// is ready to use, and it is safe for concurrent use.
type System struct{}

var _ Clock = System{}

// Now returns [time.Now].
func (System) Now() time.Time { return time.Now() }

// After returns [time.After](d).
func (System) After(d time.Duration) <-chan time.Time { return time.After(d) }

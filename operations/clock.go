package operations

import "time"

// A Clock tells the [Monitor] the time and wakes it after its interval. The default is the
// system clock; tests pass a fake (see package operationstest) with [WithClock].
type Clock interface {
	Now() time.Time
	// After returns a channel that receives the time once d has passed.
	After(d time.Duration) <-chan time.Time
}

// systemClock is the real time.
type systemClock struct{}

func (systemClock) Now() time.Time                         { return time.Now() }
func (systemClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// stamp returns the time to record: the clock's now in UTC, without a monotonic reading.
func stamp(c Clock) time.Time { return c.Now().Round(0).UTC() }

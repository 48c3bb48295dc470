package progress

import "time"

// A Clock tells a [Reporter] the time and wakes it up. The real clock is used unless
// [WithClock] gives another; tests give a fake one that moves only when told to.
// A Clock must be safe for concurrent use.
type Clock interface {
	// Now returns the current time.
	Now() time.Time
	// After returns a channel that receives the time once d has passed; d <= 0 fires
	// at once. The Reporter may abandon the channel without receiving from it.
	After(d time.Duration) <-chan time.Time
}

type realClock struct{}

func (realClock) Now() time.Time                         { return time.Now() }
func (realClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

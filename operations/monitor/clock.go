package monitor

import (
	"time"

	"github.com/itemops/itemops/clock"
)

// stamp returns the time to record: the clock's now in UTC, without a monotonic reading.
func stamp(c clock.Clock) time.Time { return c.Now().Round(0).UTC() }

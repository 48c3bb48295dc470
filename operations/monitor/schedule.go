package monitor

import (
	"fmt"
	"math"
	"time"

	"github.com/itemops/itemops/operations"
)

// dueFirst moves the operations of ops that are due at now to the front, in the order
// they had, and returns how many are due (see dueAt); the order of the others changes.
// timeout is the run's operation timeout.
func (m *Monitor) dueFirst(ops []operations.Operation, now time.Time, timeout time.Duration) int {
	due := 0
	for i := range ops {
		if at := m.dueAt(&ops[i], timeout); !at.IsZero() && now.Before(at) {
			continue
		}
		if i != due {
			ops[due], ops[i] = ops[i], ops[due]
		}
		due++
	}
	return due
}

// dueAt returns when op, unfinished, is next to be checked: the zero time when at every
// pass; else the earliest of its next poll (a retry policy's wait), the end of its stall
// window, and the moment after its timeout (timeout is the run's), at which a check fails
// it whatever its wait.
func (m *Monitor) dueAt(op *operations.Operation, timeout time.Duration) time.Time {
	p := m.cfg.policyOf(op.Action)
	ms := &op.Monitor
	if ms.NextPoll.IsZero() || !p.retry.on() {
		return time.Time{}
	}
	at := ms.NextPoll
	if p.stall > 0 && !ms.ProgressAt.IsZero() {
		at = earliest(at, ms.ProgressAt.Add(p.stall))
	}
	if !op.Status.Created.IsZero() {
		at = earliest(at, op.Status.Created.Add(addSat(timeout, 1))) // the timeout is strict: After
	}
	return at
}

// addSat returns a+b, or the largest (smallest) Duration when the sum is above (below)
// what a Duration holds: a timeout or window of math.MaxInt64, such as Velero's
// itemOperationTimeout of 2562047h47m16.854775807s, then reads as the longest wait there
// is, never as one that ended long ago. Every sum of durations in the Monitor goes
// through it.
func addSat(a, b time.Duration) time.Duration {
	switch {
	case b > 0 && a > math.MaxInt64-b:
		return math.MaxInt64
	case b < 0 && a < math.MinInt64-b:
		return math.MinInt64
	}
	return a + b
}

// earliest returns the earlier of a and b, a time that is not zero when either is not.
func earliest(a, b time.Time) time.Time {
	if a.IsZero() || !b.IsZero() && b.Before(a) {
		return b
	}
	return a
}

// stalled reports whether an operation whose progress last moved at progressAt has
// stalled at now, under stall window w: the window has ended, to the nanosecond.
func stalled(w time.Duration, progressAt, now time.Time) bool {
	return w > 0 && !progressAt.IsZero() && !now.Before(progressAt.Add(w))
}

// highest returns the highest NCompleted seen of an operation of status st and Monitor
// state ms: the mark a report must pass to move (see [WithStallTimeout]).
func highest(st *operations.Status, ms *operations.MonitorState) int64 {
	return max(st.NCompleted, ms.MaxCompleted)
}

// stallMessage is the error of an operation of status st that made no progress for
// window w since progressAt, at now: "no progress for 30m0s: last 12 of 100 GiB at
// 10:42:07Z". The time is given to the second, without its day when it falls on now's
// day in UTC.
func stallMessage(w time.Duration, st *operations.Status, progressAt, now time.Time) string {
	layout := time.RFC3339
	py, pm, pd := progressAt.UTC().Date()
	if ny, nm, nd := now.UTC().Date(); py == ny && pm == nm && pd == nd {
		layout = "15:04:05Z07:00"
	}
	units := ""
	if st.OperationUnits != "" {
		units = " " + st.OperationUnits
	}
	return fmt.Sprintf("%s%s: last %d of %d%s at %s", StallPrefix, w, st.NCompleted, st.NTotal, units, progressAt.UTC().Format(layout))
}

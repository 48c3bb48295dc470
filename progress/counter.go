package progress

import (
	"fmt"
	"sync/atomic"
)

// A Pass is the stage a restore or backup is in, as far as counting is concerned.
// Passes only move forward: [PassCollecting], then [PassProcessing], then [PassDone].
type Pass int32

const (
	// PassCollecting is pass one: items are being collected and the total still grows.
	// It is the zero Pass, so a new Counter starts in it.
	PassCollecting Pass = iota
	// PassProcessing is pass two: the collected items are being restored or backed up.
	PassProcessing
	// PassDone means every collected item has been processed; the figures are final.
	PassDone
)

// String returns "collecting", "processing" or "done", or "Pass(n)" for other values.
func (p Pass) String() string {
	switch p {
	case PassCollecting:
		return "collecting"
	case PassProcessing:
		return "processing"
	case PassDone:
		return "done"
	}
	return fmt.Sprintf("Pass(%d)", int32(p))
}

// A Counter counts the items of one restore or backup across its two passes.
//
// Pass one calls [Counter.Collected] as items are found. Pass two calls [Counter.Done]
// or [Counter.Skipped] once for each collected item, and [Counter.Additional] for the
// items plugins add beyond the collection. [Counter.SetPass] marks the passes.
//
// The zero Counter is ready to use: nothing collected, in [PassCollecting]. A Counter is
// safe for concurrent use; its methods never lock and never allocate. It must not be
// copied after first use.
type Counter struct {
	pass       atomic.Int32
	collected  atomic.Int64
	done       atomic.Int64
	skipped    atomic.Int64
	additional atomic.Int64
}

// Collected adds n items found in pass one to the collection. It is usually called once
// with the size of the whole collection, but may be called as items are found.
func (c *Counter) Collected(n int) { c.collected.Add(int64(n)) }

// Done records that one collected item was restored (or backed up).
func (c *Counter) Done() { c.done.Add(1) }

// Skipped records that one collected item was processed but not restored (or backed
// up): it already existed, a plugin skipped it, or restoring it failed. The total drops
// by one, as in Velero, where such an item never joins the restored items.
func (c *Counter) Skipped() { c.skipped.Add(1) }

// Additional records n items restored (or backed up) that were not in the collection,
// such as the additional items a plugin returns. Each raises the total by one. When such
// an item is also in the collection, call [Counter.Skipped] when pass two reaches it, so
// that it is counted once.
func (c *Counter) Additional(n int) { c.additional.Add(int64(n)) }

// SetPass moves the counter to pass p if p is later than its current pass. An earlier or
// equal pass is ignored, so a late caller never moves the counter back.
func (c *Counter) SetPass(p Pass) {
	for {
		cur := c.pass.Load()
		if int32(p) <= cur || c.pass.CompareAndSwap(cur, int32(p)) {
			return
		}
	}
}

// Snapshot returns the counter's current values.
//
// The pass is read first and the collected count last, so a snapshot never shows a pass
// without the counts recorded before it was set, nor more items processed than collected
// when every item was collected before being processed.
func (c *Counter) Snapshot() Snapshot {
	p := Pass(c.pass.Load())
	done := c.done.Load()
	skipped := c.skipped.Load()
	additional := c.additional.Load()
	collected := c.collected.Load()
	return Snapshot{
		Pass:       p,
		Collected:  int(collected),
		Done:       int(done),
		Skipped:    int(skipped),
		Additional: int(additional),
	}
}

// A Snapshot is the value of a [Counter] at one moment. Its zero value is a counter with
// nothing counted, in [PassCollecting]. Snapshots are comparable with ==.
type Snapshot struct {
	Pass       Pass
	Collected  int // items found in pass one
	Done       int // collected items restored (or backed up)
	Skipped    int // collected items processed but not restored (or backed up)
	Additional int // items restored (or backed up) beyond the collection
}

// TotalItems returns Velero's total: the items restored so far plus the collected items
// not processed yet, that is restored + (collected − processed).
func (s Snapshot) TotalItems() int { return s.ItemsRestored() + s.Remaining() }

// ItemsRestored returns the items restored so far: collected ones and additional ones.
func (s Snapshot) ItemsRestored() int { return s.Done + s.Additional }

// ItemsBackedUp returns the items backed up so far; a backup's counter counts exactly as
// a restore's, so this is [Snapshot.ItemsRestored] under its backup name.
func (s Snapshot) ItemsBackedUp() int { return s.ItemsRestored() }

// Processed returns the collected items pass two has dealt with, restored or not.
func (s Snapshot) Processed() int { return s.Done + s.Skipped }

// Remaining returns the collected items pass two has not dealt with yet.
func (s Snapshot) Remaining() int { return s.Collected - s.Processed() }

// Sub returns the change from prev to s: each count minus prev's, and s's pass. The
// figures of the result are the changes of the figures, so
// s.Sub(prev).TotalItems() == s.TotalItems()-prev.TotalItems().
func (s Snapshot) Sub(prev Snapshot) Snapshot {
	return Snapshot{
		Pass:       s.Pass,
		Collected:  s.Collected - prev.Collected,
		Done:       s.Done - prev.Done,
		Skipped:    s.Skipped - prev.Skipped,
		Additional: s.Additional - prev.Additional,
	}
}

// String gives the snapshot as "processing: 100/140 items".
func (s Snapshot) String() string {
	return fmt.Sprintf("%s: %d/%d items", s.Pass, s.ItemsRestored(), s.TotalItems())
}

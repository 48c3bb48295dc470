// Package progress counts the items of a restore or a backup and reports the count to
// whoever shows it, for instance a function that patches a Restore's status.progress.
//
// A [Counter] follows the two passes of a restore: pass one collects every item of the
// backup in priority order, so the total is known before anything is restored; pass two
// restores them one by one. Its [Snapshot] gives Velero's figures:
//
//	TotalItems    = restored + (collected − processed)
//	ItemsRestored = restored
//
// where restored counts the collected items that were restored plus the additional items
// plugins asked for, and processed counts the collected items pass two has dealt with,
// restored or not. An additional item raises the total by one; a collected item that is
// skipped (it already exists, or failed) lowers it by one. Backups count the same way,
// with [Snapshot.ItemsBackedUp] in place of [Snapshot.ItemsRestored].
//
// A Snapshot also carries the [Pass] it was taken in. During the first pass nothing is
// restored and the total still grows; a reader that sees "restored == total" must check
// the pass before calling the run done.
//
// # Reporting
//
// A [Reporter] reads a Counter on its own goroutine and hands the newest snapshot to a
// [Sink] at most once per interval, and once more when it is closed. The counting loop
// never talks to the Reporter: it only adds to atomic counters, so a slow, hanging or
// failing sink cannot block or slow it. Snapshots the sink was too busy to take are
// coalesced into the next one; nothing queues up.
//
// # Caveats
//
// Time comes from a [clock.Clock], real by default; tests pass the fake of package
// clock/clocktest with [WithClock].
// A snapshot reads several counters one after the other without a lock, so it may miss
// events that happen while it is taken, but it never shows more items restored than the
// total, nor the last pass before the counts that preceded it.
package progress

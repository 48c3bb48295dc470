package kv

import (
	"context"
	"slices"
	"sync"
)

// turns makes the writes of one Store to one run take turns, in the order they come,
// instead of racing each other.
//
// Every write is a read followed by a conditional Commit, so writes are correct without
// turns. But when several goroutines of one process write one run at once, each write
// that commits makes the others' reads stale: they read again, and a writer can lose
// race after race until its retries run out (operations.ErrConflict) while the others
// go on: over etcd, of eight goroutines putting operations to one run, one lost 87 races
// in a row. With turns only writers in other processes still race, and the retries are
// for them. docs/BENCHMARKS.md has the figures, of the cost too.
//
// UpdateRun lends its turn while it calls the caller's update function: a write of the
// run that starts meanwhile (from inside update, for one) goes ahead without waiting and
// races as it would without turns, so a write from inside update cannot deadlock.
type turns struct {
	mu   sync.Mutex
	runs map[string]*queue // by run key; an entry lives while some write of the run does
}

// queue is the state of one run's turns. The waiting writes are a list, in the order
// they came, rather than senders blocked on a channel, whose order Go does not promise.
type queue struct {
	busy    bool            // a write has the turn
	lent    bool            // the write that has the turn lent it
	waiting []chan struct{} // in the order they came; closing one gives it the turn
	writes  int             // writes of the run under way, waiting or not
}

// A turn is one write's place in its run's queue. Its holder calls done once, when the
// write ends, however it ends.
type turn struct {
	t    *turns
	key  string
	q    *queue
	mine bool // the turn is this write's; false for a write that went ahead while it was lent
}

// wait returns when the write may begin: when the run's previous writes have ended, or
// at once when no write of the run is under way or the turn is lent. A done ctx ends the
// wait with ctx.Err(), and the write gives up its place.
func (t *turns) wait(ctx context.Context, key string) (turn, error) {
	t.mu.Lock()
	q := t.runs[key]
	if q == nil {
		if t.runs == nil {
			t.runs = make(map[string]*queue)
		}
		q = &queue{}
		t.runs[key] = q
	}
	q.writes++
	w := turn{t: t, key: key, q: q}
	if !q.busy || q.lent {
		w.mine = !q.busy
		q.busy = true
		t.mu.Unlock()
		return w, nil
	}
	ch := make(chan struct{})
	q.waiting = append(q.waiting, ch)
	t.mu.Unlock()

	select {
	case <-ch:
		w.mine = true
		return w, nil
	case <-ctx.Done():
	}
	t.mu.Lock()
	if i := slices.Index(q.waiting, ch); i >= 0 {
		q.waiting = slices.Delete(q.waiting, i, i+1)
	} else {
		w.mine = true // the turn came as ctx ended: pass it on
	}
	t.mu.Unlock()
	w.done()
	return turn{}, ctx.Err()
}

// lend lends the turn while fn runs, and takes it back after, even if fn panics.
func (w *turn) lend(fn func() error) error {
	w.setLent(true)
	defer w.setLent(false)
	return fn()
}

func (w *turn) setLent(lent bool) {
	if !w.mine {
		return
	}
	w.t.mu.Lock()
	w.q.lent = lent
	w.t.mu.Unlock()
}

// done ends the write: the turn, if it is this write's, goes to the write that has
// waited longest.
func (w *turn) done() {
	t, q := w.t, w.q
	t.mu.Lock()
	defer t.mu.Unlock()
	if w.mine {
		if len(q.waiting) > 0 {
			close(q.waiting[0])
			q.waiting = q.waiting[1:]
		} else {
			q.busy = false
		}
	}
	if q.writes--; q.writes == 0 {
		delete(t.runs, w.key)
	}
}

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
// go on. With turns only writers in other processes still race, and the retries are
// for them. docs/BENCHMARKS.md ("Writes of one run from several goroutines: turns")
// has the figures, of the cost too.
//
// A turn is held for the whole write, and UpdateRun holds it while it calls the
// caller's update function. The turns know nothing of who waits: a write of the run
// made while update runs waits for UpdateRun to end, wherever it comes from. That is
// why the operations.Store contract has update not call the Store: a write of its own
// run from inside it would wait for itself, until its ctx ends.
type turns struct {
	mu   sync.Mutex
	runs map[string]*queue // by run key; an entry lives while some write of the run does
}

// queue is the state of one run's turns. The waiting writes are a list, in the order
// they came, rather than senders blocked on a channel, whose order Go does not promise.
type queue struct {
	busy    bool            // a write has the turn
	waiting []chan struct{} // in the order they came; closing one gives it the turn
	writes  int             // writes of the run under way, waiting or not
}

// A turn is one write's place in its run's queue, held from when [turns.wait] returns
// it. Its holder calls done once, when the write ends, however it ends.
type turn struct {
	t   *turns
	key string
	q   *queue
}

// wait returns when the write may begin: at once when no write of the run is under way,
// else when the writes of the run that came before it have ended. A done ctx ends the
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
	if !q.busy {
		q.busy = true
		t.mu.Unlock()
		return w, nil
	}
	ch := make(chan struct{})
	q.waiting = append(q.waiting, ch)
	t.mu.Unlock()

	select {
	case <-ch:
		return w, nil
	case <-ctx.Done():
	}
	t.mu.Lock()
	if i := slices.Index(q.waiting, ch); i >= 0 {
		// Still waiting: leave the queue without the turn.
		q.waiting = slices.Delete(q.waiting, i, i+1)
		w.leave()
	} else {
		// The turn came as ctx ended: pass it on.
		w.pass()
	}
	t.mu.Unlock()
	return turn{}, ctx.Err()
}

// done ends the write: the turn goes to the write that has waited longest.
func (w turn) done() {
	w.t.mu.Lock()
	defer w.t.mu.Unlock()
	w.pass()
}

// pass gives the turn, which w holds, to the write that has waited longest, and leaves
// the queue. t.mu is held.
func (w turn) pass() {
	q := w.q
	if len(q.waiting) > 0 {
		close(q.waiting[0])
		q.waiting = q.waiting[1:]
	} else {
		q.busy = false
	}
	w.leave()
}

// leave counts the write out of its run's queue, and forgets the queue when no write of
// the run is left. t.mu is held.
func (w turn) leave() {
	if w.q.writes--; w.q.writes == 0 {
		delete(w.t.runs, w.key)
	}
}

package kv

import (
	"context"
	"reflect"
	"runtime"
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
// UpdateRun lends its turn while it calls the caller's update function, which may write
// the run too (the operations.Store contract lets it write the operations of its own
// run): such a write, made from inside update, goes ahead without waiting, where waiting
// for the turn that update's own UpdateRun holds would never end. Every other write
// waits for its turn, lent or not.
//
// The update function has no context and no token to pass on, so a write made from
// inside one is told apart by the only thing it has: it runs on the goroutine that
// called update, below that call ([insideUpdate] looks for it on the goroutine's stack,
// and only when the turn it wants is lent). It goes ahead when the run's turn is lent,
// whichever UpdateRun lent it: update may write other runs, so two UpdateRuns of two
// runs whose update functions write each other's run would each wait for the other's
// turn if only a write from inside the lender's own update went ahead. A write from a
// goroutine that update starts is not made from inside update: it waits for its turn,
// so an update function that waits for such a write of its own run never returns (until
// the write's ctx ends).
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
	t   *turns
	key string
	q   *queue
	// mine is true when the turn is this write's, false for a write from inside an
	// update function that went ahead while the turn was lent.
	mine bool
}

// wait returns when the write may begin: when the run's previous writes have ended, at
// once when no write of the run is under way, or at once when the run's turn is lent and
// the write is made from inside an update function (see [turns]). A done ctx ends the
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
	if q.busy && q.lent {
		// Reading the stack takes microseconds: not with the lock held.
		t.mu.Unlock()
		inside := insideUpdate()
		t.mu.Lock()
		if inside && q.busy && q.lent {
			t.mu.Unlock()
			return w, nil
		}
	}
	if !q.busy {
		w.mine, q.busy = true, true
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

// lend calls update, lending the turn while it runs (see [turns]), and takes it back
// after, even if update panics.
func (w turn) lend(update func() error) error {
	w.setLent(true)
	defer w.setLent(false)
	return callUpdate(update)
}

func (w turn) setLent(lent bool) {
	if !w.mine {
		return
	}
	w.t.mu.Lock()
	w.q.lent = lent
	w.t.mu.Unlock()
}

// callUpdate calls update. It is the frame that insideUpdate looks for, so it is never
// inlined.
//
//go:noinline
func callUpdate(update func() error) error { return update() }

// callUpdateName is callUpdate's name as the runtime reports it in a stack frame.
var callUpdateName = runtime.FuncForPC(reflect.ValueOf(callUpdate).Pointer()).Name()

// insideUpdate reports whether the calling goroutine is inside an update function that
// an UpdateRun called: whether callUpdate is on its stack.
func insideUpdate() bool {
	pcs := make([]uintptr, 64)
	for {
		n := runtime.Callers(2, pcs)
		if n < len(pcs) {
			pcs = pcs[:n]
			break
		}
		pcs = make([]uintptr, 2*len(pcs)) // a deep stack: read all of it
	}
	frames := runtime.CallersFrames(pcs)
	for {
		f, more := frames.Next()
		if f.Function == callUpdateName {
			return true
		}
		if !more {
			return false
		}
	}
}

// done ends the write: the turn, if it is this write's, goes to the write that has
// waited longest.
func (w turn) done() {
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

package monitor

import (
	"sync"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/phase"
)

// A RunChange tells that a pass of a [Monitor] changed a run: it moved the run's phase,
// or some of its operations ended. From is the phase the run had before, To the phase
// it has after; they are equal when only operations ended. Running counts the run's
// operations still unfinished; Completed and Failed count those that ended since From.
type RunChange struct {
	Owner     operations.Owner
	From, To  phase.Phase
	Running   int
	Completed int
	Failed    int
}

// WithRunChanges makes the passes of [Monitor.Run] and [Monitor.RunOnce] send a
// [RunChange] on ch for each run they change, for instance to feed a controller's event
// source (the integration module for controller-runtime does).
//
// Sending never blocks a pass. A change that ch has no room for waits in the Monitor,
// one per run: a later change of the same run is merged into it (From stays the oldest
// undelivered phase, To and Running become the latest, Completed and Failed add up), so
// the Monitor holds at most one change per run whatever the receiver does. Waiting
// changes are sent, oldest first, as soon as ch has room while Run waits between passes,
// and at the start and end of every RunOnce. They are dropped when the Monitor is no
// longer run. A change may reach ch more than once when RunOnce is called from several
// goroutines at once. The Monitor never closes ch.
func WithRunChanges(ch chan<- RunChange) Option {
	return optionFunc(func(c *config) { c.changes = ch })
}

// changeQueue holds the changes waiting for room on the Monitor's channel.
type changeQueue struct {
	ch chan<- RunChange
	// mu guards order and pending.
	mu      sync.Mutex
	order   []runKey // the runs with a waiting change, oldest first
	pending map[runKey]*queuedChange
}

type runKey struct {
	kind phase.Kind
	name string
}

type queuedChange struct {
	c   RunChange
	seq int // bumped on every merge
}

func newChangeQueue(ch chan<- RunChange) *changeQueue {
	return &changeQueue{ch: ch, pending: make(map[runKey]*queuedChange)}
}

// publish queues c behind the waiting changes, merging it with its run's, then sends what
// fits.
func (q *changeQueue) publish(c RunChange) {
	if q == nil {
		return
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	k := runKey{c.Owner.Kind, c.Owner.Name}
	if w, ok := q.pending[k]; ok {
		w.c.Owner, w.c.To, w.c.Running = c.Owner, c.To, c.Running
		w.c.Completed += c.Completed
		w.c.Failed += c.Failed
		w.seq++
	} else {
		q.pending[k] = &queuedChange{c: c}
		q.order = append(q.order, k)
	}
	q.flushLocked()
}

// flush sends the waiting changes that fit in the channel, oldest first.
func (q *changeQueue) flush() {
	if q == nil {
		return
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	q.flushLocked()
}

func (q *changeQueue) flushLocked() {
	for len(q.order) > 0 {
		k := q.order[0]
		select {
		case q.ch <- q.pending[k].c:
			q.popLocked()
		default:
			return
		}
	}
}

func (q *changeQueue) popLocked() {
	delete(q.pending, q.order[0])
	q.order[0] = runKey{}
	q.order = q.order[1:]
}

// next returns the oldest waiting change and the channel to send it on, or a nil channel
// when none waits (a nil channel never receives, so a select skips it).
func (q *changeQueue) next() (chan<- RunChange, RunChange, int) {
	if q == nil {
		return nil, RunChange{}, 0
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.order) == 0 {
		return nil, RunChange{}, 0
	}
	w := q.pending[q.order[0]]
	return q.ch, w.c, w.seq
}

// sent drops the oldest waiting change, which was c as next returned it with seq, unless
// it has changed since.
func (q *changeQueue) sent(c RunChange, seq int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.order) == 0 {
		return
	}
	k := q.order[0]
	if w := q.pending[k]; k == (runKey{c.Owner.Kind, c.Owner.Name}) && w.seq == seq {
		q.popLocked()
	}
}

package monitor

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// A pool makes the Monitor's plugin calls: it runs tasks on at most a fixed number of
// worker goroutines (WithWorkers), each call of a task under a timeout (WithCallTimeout),
// and a call that hangs past its timeout does not keep its worker.
//
// Tasks come in batches, one batch per poll and one task per operation (see
// Monitor.check). The batches are served first come first served: a worker always
// takes the next task of the first batch in the queue, so the first batch gets as many
// workers as it has tasks, up to the bound, and the workers that free up go to the next
// batch only once every task of the first is taken. Runs polled at once thus end one
// after another, and each writes its operations while the calls of the others go on;
// were the workers shared among the batches in turn, every run of a pass would end, and
// write, at its end, and a pass on a shared store such as etcd would wait for all those
// writes (docs/BENCHMARKS.md, "Replicas sharing a store").
//
// A worker is a goroutine that lives while the queue has tasks, running one after
// another, so that a plugin client's call chain runs on a stack already grown
// (BenchmarkRealPlugins in integrations/velero); a worker that finds the queue empty
// ends.
//
// A task makes its calls with task.call, in its worker's goroutine. A call that has not
// returned when its timeout passes, or when its batch's context ends, is given up: the
// pool lists it among its hung calls, under the key the task named (of type K: the
// Monitor names the operation), tells the call's caller when the batch's context has
// not ended (it settles the task: the Monitor fails the operation), counts the task as
// done, and starts a new worker in the place of the one the call holds. The goroutine
// the call hangs in then belongs to the call alone: when the call returns at last, its
// answer is dropped, the call leaves the hung list, and the goroutine ends without
// touching the task again. While a call is listed, the pool makes no other call under
// its key: a plugin that ignores its context holds one goroutine per operation, not one
// per pass. A panic in a call is recovered and becomes its error.
//
// A pool is safe for concurrent use. Its bound and timeout are set by newPool and never
// change.
type pool[K comparable] struct {
	workers int           // the most tasks run at once
	timeout time.Duration // the bound of each call

	// mu guards queue, busy and the next field of each batch.
	mu    sync.Mutex
	queue []*batch[K] // the batches with tasks no worker has taken, first come first
	busy  int         // the tasks the workers hold, at most workers

	// hungMu guards hung, the calls given up that have not returned, by key.
	hungMu sync.Mutex
	hung   map[K]*call[K]
}

// newPool returns a pool of at most workers tasks at once, each call bounded by timeout.
// Both must be positive.
func newPool[K comparable](workers int, timeout time.Duration) *pool[K] {
	return &pool[K]{workers: workers, timeout: timeout}
}

// A batch is the tasks of one run of the pool.
type batch[K comparable] struct {
	ctx  context.Context
	n    int
	task func(t *task[K], i int)
	next int            // the index of the next task to take, guarded by pool.mu
	left sync.WaitGroup // the tasks not yet done, given up or dropped
}

// A task is what the task function of a batch is given to make its calls (see
// task.call). It is used by the goroutine the function runs in only.
type task[K comparable] struct {
	p    *pool[K]
	b    *batch[K]
	gone bool // a call was given up: the goroutine now belongs to the call alone
}

// run runs task(t, i) for each i from 0 to n-1 on the pool's workers, and returns once
// each task has returned or been given up (see task.call), with nil, or ctx.Err() when
// ctx has ended by then. When ctx ends first, the tasks no worker has taken are not run,
// and run returns ctx.Err() as soon as the tasks taken have returned or been given up.
// task must return as soon as a call of its task reports that it was given up; it may
// be run by several goroutines at once, for different i.
func (p *pool[K]) run(ctx context.Context, n int, task func(t *task[K], i int)) error {
	if n == 0 {
		return ctx.Err()
	}
	b := &batch[K]{ctx: ctx, n: n, task: task}
	b.left.Add(n)
	p.mu.Lock()
	p.queue = append(p.queue, b)
	for p.busy < p.workers {
		next, i, ok := p.takeLocked()
		if !ok {
			break
		}
		go p.work(next, i)
	}
	p.mu.Unlock()
	stop := context.AfterFunc(ctx, func() {
		p.mu.Lock()
		p.dropLocked(b)
		p.mu.Unlock()
	})
	b.left.Wait()
	stop()
	return ctx.Err()
}

// work is a worker: it runs task i of b, then the next tasks of the queue, one after
// another, until the queue is empty. It ends at once when a call of a task is given up,
// as another worker has then taken its place.
func (p *pool[K]) work(b *batch[K], i int) {
	t := task[K]{p: p}
	for ok := true; ok; b, i, ok = p.done(b) {
		t.b = b
		b.task(&t, i)
		if t.gone {
			return
		}
	}
}

// done counts a task of b as done and returns the next task to run, if any (see
// takeLocked). The next is taken before b counts the task, so that when the run of b
// returns, its workers are counted in busy only for tasks they hold.
func (p *pool[K]) done(b *batch[K]) (next *batch[K], i int, ok bool) {
	p.mu.Lock()
	p.busy--
	next, i, ok = p.takeLocked()
	p.mu.Unlock()
	b.left.Done()
	return next, i, ok
}

// takeLocked returns the next task to run, task i of next, the first batch in the
// queue, counts it in busy, and takes the batch out of the queue when that was its last
// task. It drops the batches whose ctx has ended, and reports false when the queue is
// empty. The caller holds p.mu.
func (p *pool[K]) takeLocked() (next *batch[K], i int, ok bool) {
	for len(p.queue) > 0 {
		next = p.queue[0]
		if next.ctx.Err() != nil {
			p.dropLocked(next)
			continue
		}
		i = next.next
		next.next++
		if next.next == next.n {
			p.queue[0] = nil
			p.queue = p.queue[1:]
		}
		p.busy++
		return next, i, true
	}
	return nil, 0, false
}

// dropLocked takes b, whose ctx has ended, out of the queue, and counts the tasks no
// worker has taken as done, without running them. The caller holds p.mu.
func (p *pool[K]) dropLocked(b *batch[K]) {
	if b.next == b.n {
		return // every task taken: b is no longer queued
	}
	p.queue = slices.DeleteFunc(p.queue, func(q *batch[K]) bool { return q == b })
	b.left.Add(b.next - b.n)
	b.next = b.n
}

// The states of a call.
const (
	calling int32 = iota
	returned
	givenUp
)

// A caller is a call that a task makes with task.call.
type caller interface {
	// call makes the call under ctx, in the task's goroutine.
	call(ctx context.Context) error
	// givenUp settles the task of the call, given up at its timeout hungFor after it
	// started. It runs in a goroutine of the pool's while the call hangs on in the
	// task's, and only when the batch's ctx has not ended.
	givenUp(hungFor time.Duration)
	// dropped is givenUp's counterpart for a call given up because the batch's ctx
	// ended, hungFor after it started: the task is left as it is.
	dropped(hungFor time.Duration)
}

// A call is one call of a task, as the pool knows it while it runs and, given up, until
// it returns.
type call[K comparable] struct {
	p      *pool[K]
	b      *batch[K]
	key    K
	label  string
	start  time.Time
	state  atomic.Int32 // calling, then returned or givenUp, whichever comes first
	caller caller
}

// A callResult is how a call of task.call ended.
type callResult struct {
	// outcome is CallSucceeded, CallErrored (f returned err), CallPanicked, CallTimedOut
	// (f returned after its deadline), or CallHung (no call was made, as an earlier call
	// under the same key hangs); empty when the batch's ctx ended.
	outcome CallOutcome
	// err is f's error; for CallPanicked, an error that says what the panic's value
	// was; for CallTimedOut, context.DeadlineExceeded; when the batch's ctx ended,
	// ctx.Err().
	err error
	// ended says that the batch's ctx ended: the answer of f is not to be used.
	ended bool
	// took is how long the call took; for CallHung, how long the hanging call has.
	took time.Duration
	// hung is, for CallHung, the label of the call that hangs.
	hung string
}

// call makes the call f (f.call) in the task's goroutine under a context that carries
// the values of the batch's ctx, ends with it, and has a deadline the pool's timeout
// away, and returns how the call ended. key names what the call is about (the Monitor
// names the operation), and label the call (for a CallHung result of a later call).
//
// When f has not returned by its deadline, or by the end of the batch's ctx, the call is
// given up (see pool): in another goroutine, the pool lists it as hung under key, calls
// f.givenUp with how long it ran when the batch's ctx has not ended, counts the task as
// done, and starts another worker. When f returns at last, call unlists it and returns
// ok false: the task function must then return at once, without touching what givenUp
// settled. A call made while an earlier call under key hangs is not made: call returns
// CallHung. Otherwise ok is true.
func (t *task[K]) call(key K, label string, f caller) (r callResult, ok bool) {
	return t.callUnder(t.b.ctx, key, label, f)
}

// callUnder is call, the call's context derived from parent, which is the batch's ctx
// or a context derived from it (that carries a tracer's span, for instance).
func (t *task[K]) callUnder(parent context.Context, key K, label string, f caller) (r callResult, ok bool) {
	p := t.p
	if h := p.hungCall(key); h != nil {
		return callResult{outcome: CallHung, took: time.Since(h.start), hung: h.label}, true
	}
	c := &call[K]{p: p, b: t.b, key: key, label: label, start: time.Now(), caller: f}
	ctx, stop := context.WithTimeout(parent, p.timeout)
	defer stop()
	unwatch := context.AfterFunc(ctx, c.giveUp)
	panicked, err := protect(ctx, f)
	if !c.state.CompareAndSwap(calling, returned) {
		p.unlist(c) // given up: the answer is dropped
		t.gone = true
		return callResult{}, false
	}
	unwatch()
	r.took = time.Since(c.start)
	if err := t.b.ctx.Err(); err != nil {
		r.err, r.ended = err, true
		return r, true
	}
	// A call whose deadline passed when it returned counts as unanswered, so that each
	// call ends one way.
	switch {
	case ctx.Err() != nil:
		r.outcome, r.err = CallTimedOut, context.DeadlineExceeded
	case panicked:
		r.outcome, r.err = CallPanicked, err
	case err != nil:
		r.outcome, r.err = CallErrored, err
	default:
		r.outcome = CallSucceeded
	}
	return r, true
}

// protect returns false and what f.call(ctx) returns, or, when f panics, true and an
// error that says with what value.
func protect(ctx context.Context, f caller) (panicked bool, err error) {
	defer func() {
		if v := recover(); v != nil {
			panicked, err = true, fmt.Errorf("plugin panicked: %v", v)
		}
	}()
	return false, f.call(ctx)
}

// giveUp runs when the context of call c ends. If the call is still running, it gives
// the call up and lists it as hung until it returns, tells its caller when the batch's
// ctx has not ended, counts the task as done, and starts a worker in the place of the
// one the call holds.
func (c *call[K]) giveUp() {
	p := c.p
	if !p.list(c) {
		return // the call returned: its task goes on
	}
	if c.b.ctx.Err() == nil {
		c.caller.givenUp(time.Since(c.start))
	} else {
		c.caller.dropped(time.Since(c.start))
	}
	if next, i, ok := p.done(c.b); ok {
		go p.work(next, i)
	}
}

// list gives call c up, unless it has returned, and lists it as hung; it reports
// whether it gave the call up. The state changes under the lock, so that a call
// returning at that moment finds itself listed (see unlist). A later call under the
// same key replaces the one listed.
func (p *pool[K]) list(c *call[K]) bool {
	p.hungMu.Lock()
	defer p.hungMu.Unlock()
	if !c.state.CompareAndSwap(calling, givenUp) {
		return false
	}
	if p.hung == nil {
		p.hung = make(map[K]*call[K])
	}
	p.hung[c.key] = c
	return true
}

// unlist takes call c, given up, off the hung list: it has returned at last.
func (p *pool[K]) unlist(c *call[K]) {
	p.hungMu.Lock()
	defer p.hungMu.Unlock()
	if p.hung[c.key] == c {
		delete(p.hung, c.key)
	}
}

// hungCall returns the call under key that was given up and has not returned, or nil.
func (p *pool[K]) hungCall(key K) *call[K] {
	p.hungMu.Lock()
	defer p.hungMu.Unlock()
	return p.hung[key]
}

package monitor

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// callFunc is a caller that calls itself, and that nothing settles when it is given up.
type callFunc func(ctx context.Context) error

func (f callFunc) call(ctx context.Context) error { return f(ctx) }
func (callFunc) givenUp(time.Duration)            {}
func (callFunc) dropped(time.Duration)            {}

// hooked is a caller that counts its givenUp calls.
type hooked struct {
	f     func(ctx context.Context) error
	hooks *atomic.Int64
}

func (h hooked) call(ctx context.Context) error { return h.f(ctx) }
func (h hooked) givenUp(time.Duration)          { h.hooks.Add(1) }
func (hooked) dropped(time.Duration)            {}

// runAsync runs a batch of n tasks on p in a goroutine and returns a channel that gets
// run's error.
func runAsync(ctx context.Context, p *pool[int], n int, task func(t *task[int], i int)) <-chan error {
	done := make(chan error, 1)
	go func() { done <- p.run(ctx, n, task) }()
	return done
}

// waitFor returns what done gets, failing t when nothing comes within a minute (a guard
// against a hang, not a measure).
func waitFor(t *testing.T, done <-chan error) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(time.Minute):
		t.Fatal("run did not return")
		return nil
	}
}

func (p *pool[K]) busyNow() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.busy
}

func (p *pool[K]) queued() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.queue)
}

// TestPoolLimit checks that a pool runs at most its worker count of tasks at once,
// runs every task once, and holds no worker once run returns.
func TestPoolLimit(t *testing.T) {
	const workers, n = 3, 20
	p := newPool[int](workers, time.Hour)
	var (
		running, most atomic.Int64
		ran           [n]atomic.Int64
		release       = make(chan struct{})
	)
	done := runAsync(context.Background(), p, n, func(tk *task[int], i int) {
		r, ok := tk.call(i, "progress", callFunc(func(context.Context) error {
			now := running.Add(1)
			for m := most.Load(); now > m && !most.CompareAndSwap(m, now); m = most.Load() {
			}
			<-release
			running.Add(-1)
			return nil
		}))
		assert.True(t, ok)
		assert.Equal(t, CallSucceeded, r.outcome)
		ran[i].Add(1)
	})
	require.Eventually(t, func() bool { return running.Load() == workers }, time.Minute, time.Millisecond)
	require.Equal(t, workers, p.busyNow())
	close(release)
	require.NoError(t, waitFor(t, done))
	require.Equal(t, int64(workers), most.Load(), "never more tasks at once than workers")
	for i := range ran {
		require.Equal(t, int64(1), ran[i].Load(), "task %d", i)
	}
	require.Zero(t, p.busyNow())
	require.Zero(t, p.queued())
}

// TestPoolFirstComeFirstServed checks that the workers take every task of the first
// batch before any of a batch queued after it. The calls end one at a time, each once
// the task before has started, so that the order in which the tasks start is the order
// in which the workers took them.
func TestPoolFirstComeFirstServed(t *testing.T) {
	p := newPool[int](2, time.Hour)
	var (
		mu      sync.Mutex
		order   []string
		release = make(chan struct{})
	)
	started := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(order)
	}
	task := func(name string, keys int) func(*task[int], int) {
		return func(tk *task[int], i int) {
			mu.Lock()
			order = append(order, name)
			mu.Unlock()
			tk.call(keys+i, "progress", callFunc(func(context.Context) error { <-release; return nil }))
		}
	}
	first := runAsync(context.Background(), p, 4, task("a", 0))
	require.Eventually(t, func() bool { return started() == 2 && p.queued() == 1 }, time.Minute, time.Millisecond)
	second := runAsync(context.Background(), p, 2, task("b", 100))
	require.Eventually(t, func() bool { return p.queued() == 2 }, time.Minute, time.Millisecond)
	for n := 3; n <= 6; n++ {
		release <- struct{}{}
		require.Eventually(t, func() bool { return started() == n }, time.Minute, time.Millisecond)
	}
	release <- struct{}{}
	release <- struct{}{}
	require.NoError(t, waitFor(t, first))
	require.NoError(t, waitFor(t, second))
	require.Equal(t, []string{"a", "a", "a", "a", "b", "b"}, order)
}

// TestPoolCallOutcomes checks what call reports of a call that answers, errs or panics,
// that the call's context has a deadline, and that a worker whose call panicked goes on
// with the next task.
func TestPoolCallOutcomes(t *testing.T) {
	p := newPool[int](1, time.Hour)
	boom := errors.New("boom")
	calls := []callFunc{
		func(ctx context.Context) error {
			if _, ok := ctx.Deadline(); !ok {
				return errors.New("no deadline")
			}
			return nil
		},
		func(context.Context) error { return boom },
		func(context.Context) error { panic("crash") },
		func(context.Context) error { return nil },
	}
	results := make([]callResult, len(calls))
	require.NoError(t, p.run(context.Background(), len(calls), func(tk *task[int], i int) {
		r, ok := tk.call(i, "progress", calls[i])
		assert.True(t, ok)
		results[i] = r
	}))
	require.Equal(t, CallSucceeded, results[0].outcome)
	require.NoError(t, results[0].err)
	require.Equal(t, CallErrored, results[1].outcome)
	require.Same(t, boom, results[1].err)
	require.Equal(t, CallPanicked, results[2].outcome)
	require.EqualError(t, results[2].err, "plugin panicked: crash")
	require.Equal(t, CallSucceeded, results[3].outcome, "the worker went on after the panic")
}

// TestPoolTimeout checks that a call that outlasts the timeout while it heeds its
// context ends one way: either it returns CallTimedOut, or it is given up and its hook
// runs, never both. Which of the two comes first is up to the scheduler.
func TestPoolTimeout(t *testing.T) {
	p := newPool[int](4, time.Millisecond)
	const n = 20
	var hooks, timedOut, givenUp atomic.Int64
	require.NoError(t, p.run(context.Background(), n, func(tk *task[int], i int) {
		r, ok := tk.call(i, "progress", hooked{func(ctx context.Context) error {
			<-ctx.Done()
			return ctx.Err()
		}, &hooks})
		if !ok {
			givenUp.Add(1)
			return
		}
		assert.Equal(t, CallTimedOut, r.outcome)
		assert.ErrorIs(t, r.err, context.DeadlineExceeded)
		timedOut.Add(1)
	}))
	require.Eventually(t, func() bool { return timedOut.Load()+givenUp.Load() == n }, time.Minute, time.Millisecond)
	require.Equal(t, givenUp.Load(), hooks.Load(), "the hook runs for each call given up, and only for those")
	require.Zero(t, p.hungLen(), "every call returned")
	require.Zero(t, p.busyNow())
}

// TestPoolHungCall checks the rule for a call that ignores its context: it is given up
// at its timeout, its hook runs once, and its worker goes to the next task, so the batch
// ends while it hangs; until it returns, no other call under its key is made; when it
// returns, its task function is told to leave, and the key is free again.
func TestPoolHungCall(t *testing.T) {
	p := newPool[int](1, 50*time.Millisecond)
	const hangs = -1 // the key of the call that hangs
	var (
		release          = make(chan struct{})
		hooks, after     atomic.Int64
		leftAfterGivenUp = make(chan bool, 1)
		others           atomic.Int64
	)
	done := runAsync(context.Background(), p, 3, func(tk *task[int], i int) {
		if i > 0 {
			tk.call(i, "progress", callFunc(func(context.Context) error { others.Add(1); return nil }))
			return
		}
		_, ok := tk.call(hangs, "progress", hooked{func(context.Context) error { <-release; return nil }, &hooks})
		leftAfterGivenUp <- !ok
		if ok {
			after.Add(1)
		}
	})
	require.NoError(t, waitFor(t, done), "the batch ends while the call hangs")
	require.Equal(t, int64(1), hooks.Load())
	// A call of the other tasks may be given up too on a loaded machine, and return
	// after the batch ended.
	require.Eventually(t, func() bool { return others.Load() == 2 }, time.Minute, time.Millisecond,
		"the other tasks ran on the worker's replacement")
	require.Eventually(t, func() bool { return p.hungLen() == 1 }, time.Minute, time.Millisecond)
	require.Zero(t, p.busyNow(), "the hung call holds no worker")

	var (
		again callResult
		made  atomic.Bool
	)
	require.NoError(t, p.run(context.Background(), 1, func(tk *task[int], _ int) {
		again, _ = tk.call(hangs, "cancel", callFunc(func(context.Context) error { made.Store(true); return nil }))
	}))
	require.False(t, made.Load(), "no call under the key of a hung call")
	require.Equal(t, CallHung, again.outcome)
	require.Equal(t, "progress", again.hung)

	close(release)
	require.True(t, <-leftAfterGivenUp, "the task of the hung call is told it was given up")
	require.Zero(t, after.Load())
	require.Eventually(t, func() bool { return p.hungLen() == 0 }, time.Minute, time.Millisecond)
	require.NoError(t, p.run(context.Background(), 1, func(tk *task[int], _ int) {
		tk.call(hangs, "progress", callFunc(func(context.Context) error { made.Store(true); return nil }))
	}))
	require.Eventually(t, made.Load, time.Minute, time.Millisecond, "the key is free once the call returned")
}

// TestPoolCancel checks that when the context of a batch ends, the tasks no worker has
// taken are not run, a call in flight is given up without its hook (its task is left
// as it is), and run returns ctx.Err() with no worker held.
func TestPoolCancel(t *testing.T) {
	p := newPool[int](1, time.Hour)
	ctx, cancel := context.WithCancel(context.Background())
	var (
		started = make(chan struct{})
		release = make(chan struct{})
		ran     atomic.Int64
		hooks   atomic.Int64
	)
	done := runAsync(ctx, p, 5, func(tk *task[int], i int) {
		ran.Add(1)
		tk.call(i, "progress", hooked{func(context.Context) error {
			close(started)
			<-release // ignores its context
			return nil
		}, &hooks})
	})
	<-started
	cancel()
	require.ErrorIs(t, waitFor(t, done), context.Canceled)
	require.Equal(t, int64(1), ran.Load(), "the tasks not taken did not run")
	require.Zero(t, hooks.Load(), "no hook when the batch's context ended")
	require.Zero(t, p.busyNow())
	require.Zero(t, p.queued())
	close(release)
	require.Eventually(t, func() bool { return p.hungLen() == 0 }, time.Minute, time.Millisecond)
}

// TestPoolCancelReturned checks that a call that returns after its batch's context
// ended, before the pool gave it up, reports that the batch ended rather than its
// answer.
func TestPoolCancelReturned(t *testing.T) {
	p := newPool[int](1, time.Hour)
	ctx, cancel := context.WithCancel(context.Background())
	var r callResult
	var ok bool
	err := p.run(ctx, 1, func(tk *task[int], _ int) {
		r, ok = tk.call(0, "progress", callFunc(func(context.Context) error {
			cancel()
			return errors.New("late")
		}))
	})
	require.ErrorIs(t, err, context.Canceled)
	if ok { // else the pool gave the call up first, which is the other way it may end
		require.True(t, r.ended)
		require.ErrorIs(t, r.err, context.Canceled)
	}
}

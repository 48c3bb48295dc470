package monitor

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

type ctxKey struct{}

func newCallContext(parent context.Context, deadline time.Time) *callContext {
	return &callContext{parent: parent, deadline: deadline}
}

// isDone reports whether ch is closed.
func isDone(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func TestCallContextEnds(t *testing.T) {
	deadline := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	parent := context.WithValue(context.Background(), ctxKey{}, "v")
	for _, why := range []error{context.DeadlineExceeded, context.Canceled} {
		c := newCallContext(parent, deadline)
		if d, ok := c.Deadline(); !ok || !d.Equal(deadline) {
			t.Fatalf("Deadline() = %v, %v; want %v, true", d, ok, deadline)
		}
		if got := c.Value(ctxKey{}); got != "v" {
			t.Fatalf("Value = %v, want the parent's", got)
		}
		done := c.Done()
		if isDone(done) || c.Err() != nil {
			t.Fatalf("a running context is done (Err %v)", c.Err())
		}
		if c.Done() != done {
			t.Fatal("Done returned another channel")
		}
		c.end(why)
		c.end(errors.New("later")) // the first reason stays
		if !isDone(done) || !errors.Is(c.Err(), why) {
			t.Fatalf("after end(%v): done %v, Err %v", why, isDone(done), c.Err())
		}
	}
	// A Done channel first asked for after the end is closed already.
	c := newCallContext(parent, deadline)
	c.end(context.Canceled)
	if !isDone(c.Done()) {
		t.Fatal("Done after the end is not closed")
	}
}

func TestCallContextEarlierParentDeadline(t *testing.T) {
	parentDeadline := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	parent, cancel := context.WithDeadline(context.Background(), parentDeadline)
	defer cancel()
	c := newCallContext(parent, parentDeadline.Add(time.Hour))
	if d, _ := c.Deadline(); !d.Equal(parentDeadline) {
		t.Fatalf("Deadline() = %v, want the parent's earlier %v", d, parentDeadline)
	}
	c = newCallContext(parent, parentDeadline.Add(-time.Hour))
	if d, _ := c.Deadline(); !d.Equal(parentDeadline.Add(-time.Hour)) {
		t.Fatalf("Deadline() = %v, want its own earlier one", d)
	}
}

// TestCallContextDerived checks what a plugin does with its context: derive contexts from
// it (as a gRPC client does) and register functions on it. They end with it, through its
// AfterFunc, and a derived context that ends first leaves nothing registered.
func TestCallContextDerived(t *testing.T) {
	deadline := time.Now().Add(time.Hour)
	poll, cancelPoll := context.WithCancel(context.Background())
	defer cancelPoll()
	c := newCallContext(poll, deadline)

	child, cancelChild := context.WithCancel(c)
	defer cancelChild()
	timed, cancelTimed := context.WithTimeout(c, 2*time.Hour)
	defer cancelTimed()
	if d, _ := timed.Deadline(); !d.Equal(deadline) {
		t.Fatalf("a derived context with a later timeout has deadline %v, want the call's %v", d, deadline)
	}
	early, cancelEarly := context.WithCancel(c)
	ran := make(chan struct{})
	context.AfterFunc(c, func() { close(ran) })
	stopped := context.AfterFunc(c, func() { t.Error("a stopped AfterFunc ran") })
	if !stopped() {
		t.Fatal("stop before the end reported false")
	}
	if got := registered(c); got != 4 {
		t.Fatalf("%d functions registered, want 4 (child, timed, early, AfterFunc)", got)
	}
	cancelEarly() // a derived context that ends first takes its registration back
	if got := registered(c); got != 3 {
		t.Fatalf("%d functions registered after a derived context ended, want 3", got)
	}

	c.end(context.DeadlineExceeded)
	<-child.Done()
	<-timed.Done()
	<-ran
	if !errors.Is(child.Err(), context.DeadlineExceeded) || !errors.Is(timed.Err(), context.DeadlineExceeded) {
		t.Fatalf("derived contexts ended with %v and %v, want the call's DeadlineExceeded", child.Err(), timed.Err())
	}
	if !errors.Is(context.Cause(child), context.DeadlineExceeded) {
		t.Fatalf("a derived context's cause is %v, want DeadlineExceeded", context.Cause(child))
	}
	if !errors.Is(early.Err(), context.Canceled) {
		t.Fatalf("the early context's error changed to %v", early.Err())
	}
	// After the end, a new registration runs at once.
	late := make(chan struct{})
	if context.AfterFunc(c, func() { close(late) })() {
		t.Error("stop after the end reported true")
	}
	<-late
}

func registered(c *callContext) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.funcs)
}

// TestCallContextConcurrent lets readers, registrations and the end race (run with -race).
func TestCallContextConcurrent(t *testing.T) {
	for range 50 {
		c := newCallContext(context.Background(), time.Now().Add(time.Hour))
		var wg sync.WaitGroup
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ctx, cancel := context.WithCancel(c)
				defer cancel()
				<-c.Done()
				<-ctx.Done()
				if c.Err() == nil {
					t.Error("Err is nil once Done is closed")
				}
			}()
		}
		c.end(context.Canceled)
		wg.Wait()
	}
}

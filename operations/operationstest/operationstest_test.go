package operationstest_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/operations/operationstest"
)

var t0 = time.Date(2022, 12, 14, 12, 0, 0, 0, time.UTC)

func fired(ch <-chan time.Time) (time.Time, bool) {
	select {
	case t := <-ch:
		return t, true
	default:
		return time.Time{}, false
	}
}

func TestClock(t *testing.T) {
	c := operationstest.NewClock(t0)
	require.Equal(t, t0, c.Now())

	soon, later := c.After(time.Second), c.After(time.Minute)
	now := c.After(0)
	got, ok := fired(now)
	require.True(t, ok, "After(0) fires at once")
	require.Equal(t, t0, got)
	require.Equal(t, 2, c.Waiters())

	c.Advance(999 * time.Millisecond)
	_, ok = fired(soon)
	require.False(t, ok, "not yet")

	c.Advance(time.Millisecond)
	got, ok = fired(soon)
	require.True(t, ok)
	require.Equal(t, t0.Add(time.Second), got)
	_, ok = fired(later)
	require.False(t, ok)
	require.Equal(t, 1, c.Waiters())

	c.Advance(time.Hour)
	got, ok = fired(later)
	require.True(t, ok)
	require.Equal(t, t0.Add(time.Hour+time.Second), got, "a waiter receives the time it was woken at")
	require.Zero(t, c.Waiters())
}

func TestClockBlockUntilWaiters(t *testing.T) {
	c := operationstest.NewClock(t0)
	var wg sync.WaitGroup
	woke := make(chan time.Time, 3)
	for i := 1; i <= 3; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			woke <- <-c.After(time.Duration(i) * time.Second)
		}()
	}
	c.BlockUntilWaiters(3)
	c.Advance(3 * time.Second)
	wg.Wait()
	close(woke)
	var n int
	for range woke {
		n++
	}
	require.Equal(t, 3, n)
}

func TestTracker(t *testing.T) {
	var zero operationstest.Tracker
	p, err := zero.Progress(context.Background(), operations.Operation{ID: "a"})
	require.NoError(t, err)
	require.Equal(t, operations.Progress{}, p, "unset: still running, no progress")
	require.NoError(t, zero.Cancel(context.Background(), operations.Operation{ID: "a"}))
	require.Equal(t, 1, zero.ProgressCalls("a"))
	require.Equal(t, 1, zero.CancelCalls("a"))
	require.Zero(t, zero.ProgressCalls("b"))

	boom := errors.New("boom")
	tr := &operationstest.Tracker{
		ProgressFunc: func(ctx context.Context, op operations.Operation) (operations.Progress, error) {
			return operations.Progress{Completed: true, Description: op.ID}, nil
		},
		CancelFunc: func(ctx context.Context, op operations.Operation) error { return boom },
	}
	var wg sync.WaitGroup
	for i := 0; i < 50; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p, err := tr.Progress(context.Background(), operations.Operation{ID: "x"})
			require.NoError(t, err)
			require.Equal(t, "x", p.Description)
			require.ErrorIs(t, tr.Cancel(context.Background(), operations.Operation{ID: "x"}), boom)
		}()
	}
	wg.Wait()
	require.Equal(t, 50, tr.ProgressCalls("x"))
	require.Equal(t, 50, tr.CancelCalls("x"))
}

func TestResolver(t *testing.T) {
	tr := &operationstest.Tracker{}
	r := operationstest.Resolver(map[string]operations.Tracker{"velero.io/mover": tr})
	got, err := r.Resolve("velero.io/mover")
	require.NoError(t, err)
	require.Same(t, tr, got)
	_, err = r.Resolve("velero.io/other")
	require.ErrorContains(t, err, `no plugin registered as "velero.io/other"`)
}

func TestClockBlockUntilAfterCalls(t *testing.T) {
	c := operationstest.NewClock(t0)
	done := make(chan struct{})
	go func() {
		defer close(done)
		<-c.After(0) // fires at once: never a waiter, still a call
		<-c.After(time.Second)
	}()
	c.BlockUntilAfterCalls(2)
	require.Equal(t, 1, c.Waiters())
	c.Advance(time.Second)
	<-done
}

package clocktest_test

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/itemops/itemops/clock/clocktest"
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
	c := clocktest.NewClock(t0)
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
	c := clocktest.NewClock(t0)
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

func TestClockBlockUntilAfterCalls(t *testing.T) {
	c := clocktest.NewClock(t0)
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

func TestAdvanceTo(t *testing.T) {
	c := clocktest.NewClock(t0)
	at := c.After(time.Hour)
	tests := []struct {
		name      string
		to        time.Time
		wantMoved time.Duration
		wantNow   time.Time
		wantFired bool
	}{
		{"forward, before the After", t0.Add(59 * time.Minute), 59 * time.Minute, t0.Add(59 * time.Minute), false},
		{"to the instant it shows", t0.Add(59 * time.Minute), 0, t0.Add(59 * time.Minute), false},
		{"back: the clock stays", t0, 0, t0.Add(59 * time.Minute), false},
		{"forward, past the After", t0.Add(2 * time.Hour), 61 * time.Minute, t0.Add(2 * time.Hour), true},
	}
	for _, tc := range tests { // in order: each case starts where the last left the clock
		moved := c.AdvanceTo(tc.to)
		firedAt, ok := fired(at)
		if moved != tc.wantMoved || !c.Now().Equal(tc.wantNow) || ok != tc.wantFired {
			t.Errorf("%s: AdvanceTo(%s) moved the clock %s to %s, After(1h) fired: %v; want %s, %s, %v",
				tc.name, tc.to, moved, c.Now(), ok, tc.wantMoved, tc.wantNow, tc.wantFired)
		}
		if ok && !firedAt.Equal(tc.wantNow) {
			t.Errorf("%s: After(1h) received %s, want %s", tc.name, firedAt, tc.wantNow)
		}
	}
}

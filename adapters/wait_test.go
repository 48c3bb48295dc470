package adapters_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/itemops/itemops/adapters"
	"github.com/itemops/itemops/clock/clocktest"
	"github.com/itemops/itemops/operations"
)

var t0 = time.Date(2024, 3, 1, 12, 0, 0, 0, time.UTC)

// readyAction is a restore item action whose AreAdditionalItemsReady answers with answer
// (given the number of the call, from 1) and records when, by clock, it was asked.
type readyAction struct {
	fakeRestoreAction
	clock  *clocktest.Clock
	answer func(ctx context.Context, n int) (bool, error)

	mu    sync.Mutex // guards asked
	asked []time.Duration
}

func (a *readyAction) AreAdditionalItemsReady(ctx context.Context, items []operations.ResourceIdentifier, r *restore) (bool, error) {
	a.record(call{Method: "AreAdditionalItemsReady", Object: items})
	a.mu.Lock()
	a.asked = append(a.asked, a.clock.Now().Sub(t0))
	n := len(a.asked)
	a.mu.Unlock()
	return a.answer(ctx, n)
}

func (a *readyAction) askedAt() []time.Duration {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]time.Duration(nil), a.asked...)
}

func TestWaitForAdditionalItems(t *testing.T) {
	errPlugin := errors.New("plugin cannot tell")
	readyOn := func(k int) func(context.Context, int) (bool, error) {
		return func(_ context.Context, n int) (bool, error) { return n >= k, nil }
	}
	tests := []struct {
		name     string
		answer   func(ctx context.Context, n int) (bool, error)
		timeout  time.Duration
		opts     []adapters.WaitOption
		advances []time.Duration // clock steps, each taken once the wait sleeps
		wantErr  error
		// wantAsked lists the clock times, since the start, of the questions.
		wantAsked []time.Duration
	}{
		{
			name: "ready at once", answer: readyOn(1), timeout: time.Minute,
			wantAsked: []time.Duration{0},
		},
		{
			name: "ready on the third question, one a second", answer: readyOn(3), timeout: time.Minute,
			advances:  []time.Duration{time.Second, time.Second},
			wantAsked: []time.Duration{0, time.Second, 2 * time.Second},
		},
		{
			name: "error stops the wait", answer: func(_ context.Context, n int) (bool, error) {
				if n == 2 {
					return false, errPlugin
				}
				return false, nil
			},
			timeout: time.Minute, advances: []time.Duration{time.Second},
			wantErr: errPlugin, wantAsked: []time.Duration{0, time.Second},
		},
		{
			name: "timeout, last question at the deadline", answer: readyOn(100), timeout: 2500 * time.Millisecond,
			advances: []time.Duration{time.Second, time.Second, 500 * time.Millisecond},
			wantErr:  adapters.ErrItemsNotReady, wantAsked: []time.Duration{0, time.Second, 2 * time.Second, 2500 * time.Millisecond},
		},
		{
			name: "ready at the deadline", answer: readyOn(3), timeout: 2 * time.Second,
			advances:  []time.Duration{time.Second, time.Second},
			wantAsked: []time.Duration{0, time.Second, 2 * time.Second},
		},
		{
			name: "zero timeout is ten minutes", answer: readyOn(100), timeout: 0,
			opts:     []adapters.WaitOption{adapters.WithPollInterval(4 * time.Minute)},
			advances: []time.Duration{4 * time.Minute, 4 * time.Minute, 2 * time.Minute},
			wantErr:  adapters.ErrItemsNotReady, wantAsked: []time.Duration{0, 4 * time.Minute, 8 * time.Minute, 10 * time.Minute},
		},
		{
			name: "negative timeout is ten minutes", answer: readyOn(100), timeout: -time.Second,
			opts:     []adapters.WaitOption{adapters.WithPollInterval(6 * time.Minute)},
			advances: []time.Duration{6 * time.Minute, 4 * time.Minute},
			wantErr:  adapters.ErrItemsNotReady, wantAsked: []time.Duration{0, 6 * time.Minute, 10 * time.Minute},
		},
		{
			name: "custom interval", answer: readyOn(2), timeout: time.Minute,
			opts:      []adapters.WaitOption{adapters.WithPollInterval(250 * time.Millisecond)},
			advances:  []time.Duration{250 * time.Millisecond},
			wantAsked: []time.Duration{0, 250 * time.Millisecond},
		},
		{
			name: "zero interval and nil options keep the defaults", answer: readyOn(2), timeout: time.Minute,
			opts:      []adapters.WaitOption{adapters.WithPollInterval(0), nil},
			advances:  []time.Duration{time.Second},
			wantAsked: []time.Duration{0, time.Second},
		},
	}
	items := []operations.ResourceIdentifier{{Resource: "persistentvolumeclaims", Namespace: "app", Name: "data"}}
	r := &restore{Name: "r1"}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			clock := clocktest.NewClock(t0)
			a := &readyAction{fakeRestoreAction: fakeRestoreAction{name: "waiter"}, clock: clock, answer: tc.answer}
			opts := append([]adapters.WaitOption{adapters.WithClock(clock)}, tc.opts...)
			done := make(chan error, 1)
			go func() {
				done <- adapters.WaitForAdditionalItems(context.Background(), a, items, r, tc.timeout, opts...)
			}()
			for _, d := range tc.advances {
				clock.BlockUntilWaiters(1)
				clock.Advance(d)
			}
			err := <-done
			if tc.wantErr != nil {
				require.ErrorIs(t, err, tc.wantErr)
				require.Contains(t, err.Error(), `"waiter"`, "the error names the action")
			} else {
				require.NoError(t, err)
			}
			if diff := cmp.Diff(tc.wantAsked, a.askedAt()); diff != "" {
				t.Errorf("questions asked at (-want +got):\n%s", diff)
			}
			require.Zero(t, clock.Waiters(), "the wait left a timer behind")
			for _, c := range a.recorded() {
				if diff := cmp.Diff(items, c.Object); diff != "" {
					t.Errorf("items passed (-want +got):\n%s", diff)
				}
			}
		})
	}
}

func TestWaitForAdditionalItemsContext(t *testing.T) {
	items := []operations.ResourceIdentifier{{Resource: "pods", Namespace: "app", Name: "p"}}
	t.Run("done before the first question", func(t *testing.T) {
		clock := clocktest.NewClock(t0)
		a := &readyAction{clock: clock, answer: func(context.Context, int) (bool, error) { return true, nil }}
		err := adapters.WaitForAdditionalItems(cancelled(), a, items, nil, time.Minute, adapters.WithClock(clock))
		require.ErrorIs(t, err, context.Canceled)
		require.Empty(t, a.askedAt())
	})
	t.Run("cancelled while sleeping", func(t *testing.T) {
		clock := clocktest.NewClock(t0)
		a := &readyAction{clock: clock, answer: func(context.Context, int) (bool, error) { return false, nil }}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			done <- adapters.WaitForAdditionalItems(ctx, a, items, nil, time.Minute, adapters.WithClock(clock))
		}()
		clock.BlockUntilWaiters(1)
		cancel()
		require.Equal(t, context.Canceled, <-done, "ctx.Err() itself, unwrapped")
		require.Len(t, a.askedAt(), 1)
	})
	t.Run("cancelled during a question", func(t *testing.T) {
		clock := clocktest.NewClock(t0)
		ctx, cancel := context.WithCancel(context.Background())
		a := &readyAction{clock: clock, answer: func(ctx context.Context, _ int) (bool, error) {
			cancel()
			return false, ctx.Err()
		}}
		err := adapters.WaitForAdditionalItems(ctx, a, items, nil, time.Minute, adapters.WithClock(clock))
		require.Equal(t, context.Canceled, err, "ctx.Err() itself, not the plugin's wrapped error")
	})
	t.Run("nil action", func(t *testing.T) {
		err := adapters.WaitForAdditionalItems[*restore](context.Background(), nil, items, nil, time.Minute)
		require.ErrorIs(t, err, adapters.ErrInvalidPlugin)
	})
	t.Run("system clock, ready at once", func(t *testing.T) {
		a := &fakeRestoreAction{name: "a"}
		require.NoError(t, adapters.WaitForAdditionalItems(context.Background(), a, items, &restore{Name: "r"}, 0, adapters.WithClock(nil)))
		if diff := cmp.Diff([]call{{Method: "AreAdditionalItemsReady", Object: items}}, a.recorded()); diff != "" {
			t.Errorf("(-want +got):\n%s", diff)
		}
	})
}

package adapters

import (
	"context"
	"fmt"
	"time"

	"github.com/itemops/itemops/clock"
	"github.com/itemops/itemops/operations"
)

// Defaults of [WaitForAdditionalItems].
const (
	// DefaultAdditionalItemsReadyTimeout is how long WaitForAdditionalItems waits when
	// the action sets no timeout: Velero's default.
	DefaultAdditionalItemsReadyTimeout = 10 * time.Minute
	// DefaultPollInterval is the delay between two questions to the action: Velero's.
	DefaultPollInterval = time.Second
)

// A WaitOption configures [WaitForAdditionalItems].
type WaitOption interface{ apply(*waitConfig) }

type waitOptionFunc func(*waitConfig)

func (f waitOptionFunc) apply(c *waitConfig) { f(c) }

type waitConfig struct {
	clock    clock.Clock
	interval time.Duration
}

// WithClock sets the clock that measures the timeout and paces the questions. The
// default is the system clock ([clock.System]); nil keeps it. Tests pass a fake, such as
// the Clock of package clock/clocktest.
func WithClock(c clock.Clock) WaitOption {
	return waitOptionFunc(func(cfg *waitConfig) {
		if c != nil {
			cfg.clock = c
		}
	})
}

// WithPollInterval sets the delay between two questions to the action. The default is
// [DefaultPollInterval]; a value ≤ 0 keeps it.
func WithPollInterval(d time.Duration) WaitOption {
	return waitOptionFunc(func(cfg *waitConfig) {
		if d > 0 {
			cfg.interval = d
		}
	})
}

// WaitForAdditionalItems waits until action reports the additional items of one of its
// Execute calls ready, as Velero's restore does when the output sets
// WaitForAdditionalItems: it asks [RestoreItemAction.AreAdditionalItemsReady] at once,
// then once per poll interval (a second by default), until the answer is true (it
// returns nil), the call fails (it returns that error, naming the action), or timeout
// has passed since the first question (it returns an error wrapping [ErrItemsNotReady]);
// a question due at the deadline is still asked. A timeout ≤ 0 means
// [DefaultAdditionalItemsReadyTimeout]; pass the output's AdditionalItemsReadyTimeout,
// or your own default when it is zero.
//
// When ctx is done, WaitForAdditionalItems returns ctx.Err() without asking again. A
// question in progress is not cut short by the timeout, only by ctx (the action should
// honour it). A nil action fails with an error wrapping [ErrInvalidPlugin].
func WaitForAdditionalItems[R any](ctx context.Context, action RestoreItemAction[R], items []operations.ResourceIdentifier, restore R, timeout time.Duration, opts ...WaitOption) error {
	if action == nil {
		return fmt.Errorf("wait for additional items: nil action: %w", ErrInvalidPlugin)
	}
	cfg := waitConfig{clock: clock.System{}, interval: DefaultPollInterval}
	for _, o := range opts {
		if o != nil {
			o.apply(&cfg)
		}
	}
	if timeout <= 0 {
		timeout = DefaultAdditionalItemsReadyTimeout
	}
	deadline := cfg.clock.Now().Add(timeout)
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		ready, err := action.AreAdditionalItemsReady(ctx, items, restore)
		switch {
		case ctx.Err() != nil:
			return ctx.Err()
		case err != nil:
			return fmt.Errorf("%s %q: additional items ready: %w", kindRestoreItemAction, action.Name(), err)
		case ready:
			return nil
		}
		left := deadline.Sub(cfg.clock.Now())
		if left <= 0 {
			return fmt.Errorf("%s %q: %d additional items after %s: %w", kindRestoreItemAction, action.Name(), len(items), timeout, ErrItemsNotReady)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-cfg.clock.After(min(cfg.interval, left)):
		}
	}
}

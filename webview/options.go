package webview

import (
	"fmt"
	"net/http"
	"time"

	"github.com/itemops/itemops/clock"
	"github.com/itemops/itemops/operations"
)

// maxPageSize bounds the runs or operations a page shows, whatever the query asks.
const maxPageSize = 500

// An Option configures a [Handler].
type Option interface{ apply(*config) error }

type optionFunc func(*config) error

func (f optionFunc) apply(c *config) error { return f(c) }

type config struct {
	clock     clock.Clock
	authorize func(*http.Request, Action) error
	pageSize  int
	refresh   time.Duration
}

// A Verb is what an [Action] does.
type Verb string

// VerbCancel requests the cancel of a run, as [operations.RequestCancel] does.
const VerbCancel Verb = "cancel"

// An Action is a change the view asks the hook of [WithAuthorize] about before it makes
// it.
type Action struct {
	Verb Verb
	// Run is the run the change is for, with the UID of the page that asked.
	Run operations.Owner
}

// WithAuthorize makes the view able to cancel runs: authorize is called with the request
// and the [Action] before each, and a non-nil error refuses it (403 Forbidden, with the
// error's text). It is called only for a POST whose token is valid, and may be called
// from many goroutines at once. Without this option the view is read-only. A nil
// authorize is refused with [ErrInvalidOption].
func WithAuthorize(authorize func(*http.Request, Action) error) Option {
	return optionFunc(func(c *config) error {
		if authorize == nil {
			return fmt.Errorf("WithAuthorize(nil): %w", ErrInvalidOption)
		}
		c.authorize = authorize
		return nil
	})
}

// WithClock sets the clock that the durations a page shows (stalled for, next poll in)
// and the time of a cancel request are read from. The default is [clock.System]. A nil
// clock is refused with [ErrInvalidOption].
func WithClock(c clock.Clock) Option {
	return optionFunc(func(cfg *config) error {
		if c == nil {
			return fmt.Errorf("WithClock(nil): %w", ErrInvalidOption)
		}
		cfg.clock = c
		return nil
	})
}

// WithPageSize sets how many runs, or operations, a page shows when its query does not
// say. The default is 50; n must be from 1 to 500, else [ErrInvalidOption].
func WithPageSize(n int) Option {
	return optionFunc(func(c *config) error {
		if n < 1 || n > maxPageSize {
			return fmt.Errorf("WithPageSize(%d): want 1 to %d: %w", n, maxPageSize, ErrInvalidOption)
		}
		c.pageSize = n
		return nil
	})
}

// WithRefresh sets how often the script of a page of a moving run asks whether it
// changed. The default is 5s; d must be at least a second, else [ErrInvalidOption].
func WithRefresh(d time.Duration) Option {
	return optionFunc(func(c *config) error {
		if d < time.Second {
			return fmt.Errorf("WithRefresh(%v): want at least 1s: %w", d, ErrInvalidOption)
		}
		c.refresh = d
		return nil
	})
}

package progress

import (
	"context"
	"sync"
	"time"

	"github.com/itemops/itemops/clock"
)

// A Sink receives snapshots from a [Reporter], for instance to patch a Restore's
// status.progress. It is called from one goroutine at a time, never concurrently with
// itself. ctx is cancelled when the Reporter is closed during a periodic delivery; the
// final delivery gets a context bounded by [WithFinalTimeout]. A returned error makes
// the Reporter deliver again at the next interval even if nothing changed.
type Sink func(ctx context.Context, s Snapshot) error

// An Option configures a [Reporter].
type Option interface{ apply(*config) }

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

type config struct {
	interval     time.Duration
	clock        clock.Clock
	finalTimeout time.Duration
	onError      func(error)
}

// DefaultInterval is the time between deliveries when [WithInterval] is not given.
const DefaultInterval = time.Second

// DefaultFinalTimeout bounds the final delivery when [WithFinalTimeout] is not given.
const DefaultFinalTimeout = 30 * time.Second

// WithInterval sets the least time between the starts of two deliveries. The default is
// [DefaultInterval]; d <= 0 keeps the default.
func WithInterval(d time.Duration) Option {
	return optionFunc(func(c *config) {
		if d > 0 {
			c.interval = d
		}
	})
}

// WithClock makes the Reporter take its time and its wake-ups from clk instead of the
// real clock ([clock.System]). A nil clk keeps the real clock. The Reporter may abandon
// a channel of clk.After without receiving from it.
func WithClock(clk clock.Clock) Option {
	return optionFunc(func(c *config) {
		if clk != nil {
			c.clock = clk
		}
	})
}

// WithFinalTimeout bounds, in real time, the context given to the sink for the final
// delivery made by [Reporter.Close]. The default is [DefaultFinalTimeout]; d <= 0 keeps
// the default.
func WithFinalTimeout(d time.Duration) Option {
	return optionFunc(func(c *config) {
		if d > 0 {
			c.finalTimeout = d
		}
	})
}

// WithErrorHandler calls f with each error a periodic delivery returns, on the
// Reporter's goroutine; f must not block for long. Errors of deliveries cancelled by
// Close are not reported, and the final delivery's error is returned by Close instead.
// By default periodic errors are dropped (the delivery is retried at the next interval).
func WithErrorHandler(f func(error)) Option {
	return optionFunc(func(c *config) { c.onError = f })
}

// A Reporter delivers the snapshots of a [Counter] to a [Sink]: the newest snapshot, at
// most once per interval, only when it differs from the last one delivered without
// error, and once more on [Reporter.Close]. The first delivery comes one interval after
// the Reporter starts.
//
// The Reporter reads the Counter on a goroutine of its own; the code that counts never
// waits for it. While the sink is busy, snapshots are not queued: the next delivery
// carries the newest values. A delivery that takes longer than the interval is followed
// at once by the next one, if anything changed.
//
// A Reporter is safe for concurrent use. It must be closed, or its goroutine leaks.
type Reporter struct {
	counter *Counter
	sink    Sink
	cfg     config

	cancel context.CancelFunc // cancels the periodic delivery in flight
	stop   chan struct{}      // closed by Close
	exited chan struct{}      // closed when the goroutine returns

	closeOnce sync.Once
	closeErr  error

	// last and ok belong to the goroutine until it exits, then to Close.
	last Snapshot // the last snapshot the sink accepted
	ok   bool     // whether last is meaningful and the latest delivery succeeded
}

// NewReporter starts a Reporter that delivers c's snapshots to sink; a nil sink discards
// them, and a nil c stands for a Counter nobody counts on. Options set the
// interval ([WithInterval]), the clock ([WithClock]), the bound on the final delivery
// ([WithFinalTimeout]) and what to do with sink errors ([WithErrorHandler]).
// NewReporter starts one goroutine, which [Reporter.Close] stops.
func NewReporter(c *Counter, sink Sink, opts ...Option) *Reporter {
	cfg := config{interval: DefaultInterval, clock: clock.System{}, finalTimeout: DefaultFinalTimeout}
	for _, o := range opts {
		o.apply(&cfg)
	}
	if c == nil {
		c = new(Counter)
	}
	if sink == nil {
		sink = func(context.Context, Snapshot) error { return nil }
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &Reporter{
		counter: c,
		sink:    sink,
		cfg:     cfg,
		cancel:  cancel,
		stop:    make(chan struct{}),
		exited:  make(chan struct{}),
	}
	go r.run(ctx)
	return r
}

func (r *Reporter) run(ctx context.Context) {
	defer close(r.exited)
	wait := r.cfg.interval
	for {
		select {
		case <-r.stop:
			return
		case <-r.cfg.clock.After(wait):
		}
		// select picks at random when both are ready: re-check before delivering.
		select {
		case <-r.stop:
			return
		default:
		}
		start := r.cfg.clock.Now()
		if err := r.deliver(ctx); err != nil && ctx.Err() == nil && r.cfg.onError != nil {
			r.cfg.onError(err)
		}
		wait = r.cfg.interval - r.cfg.clock.Now().Sub(start)
	}
}

// deliver hands the newest snapshot to the sink unless the sink already accepted it.
func (r *Reporter) deliver(ctx context.Context) error {
	s := r.counter.Snapshot()
	if r.ok && s == r.last {
		return nil
	}
	err := r.sink(ctx, s)
	r.last, r.ok = s, err == nil
	return err
}

// Close stops the Reporter, waits for its goroutine to end, then delivers the newest
// snapshot once more unless the sink already accepted it, and returns the error of that
// final delivery (nil when none was needed). A periodic delivery in flight when Close is
// called sees its context cancelled, and Close waits for it to return. The final
// delivery's context ends after the final timeout. Close is idempotent: later calls
// deliver nothing and return the first call's result.
func (r *Reporter) Close() error {
	r.closeOnce.Do(func() {
		close(r.stop)
		r.cancel()
		<-r.exited
		ctx, cancel := context.WithTimeout(context.Background(), r.cfg.finalTimeout)
		defer cancel()
		r.closeErr = r.deliver(ctx)
	})
	return r.closeErr
}

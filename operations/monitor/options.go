package monitor

import (
	"context"
	"io"
	"log/slog"
	"time"

	"github.com/itemops/itemops/clock"
	"github.com/itemops/itemops/operations"
)

// An Option configures a [Monitor].
type Option interface{ apply(*config) }

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

// Defaults of a Monitor's options.
const (
	DefaultInterval         = 10 * time.Second
	DefaultWorkers          = 16
	DefaultCallTimeout      = 30 * time.Second
	DefaultOperationTimeout = 4 * time.Hour
	DefaultFinalizeTimeout  = 10 * time.Minute
)

type config struct {
	interval         time.Duration
	workers          int
	callTimeout      time.Duration
	operationTimeout time.Duration
	clock            clock.Clock
	logger           *slog.Logger
	tolerance        int
	finalizer        Finalizer
	finalizeTimeout  time.Duration
	storeWork        int // 0: workers
	observer         Observer
}

func newConfig(opts []Option) config {
	c := config{
		interval:         DefaultInterval,
		workers:          DefaultWorkers,
		callTimeout:      DefaultCallTimeout,
		operationTimeout: DefaultOperationTimeout,
		finalizeTimeout:  DefaultFinalizeTimeout,
		clock:            clock.System{},
		logger:           slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	for _, o := range opts {
		if o != nil {
			o.apply(&c)
		}
	}
	if c.storeWork == 0 {
		c.storeWork = c.workers
	}
	return c
}

// WithInterval sets the delay between the passes of [Monitor.Run]. The default is
// [DefaultInterval]; a value ≤ 0 keeps it.
func WithInterval(d time.Duration) Option {
	return optionFunc(func(c *config) {
		if d > 0 {
			c.interval = d
		}
	})
}

// WithWorkers bounds how many operations a Monitor checks at once (a Progress call, and
// a Cancel call after it when the operation ran out of time), across all the runs it
// polls; a call given up after the call timeout (see [WithCallTimeout]) no longer
// counts. The runs polled at once take the workers one run at a time, in the order they
// ask: a run gets as many as it has operations to check, up to n, before the next gets
// any, so that its poll ends, and writes, while the others' calls go on. A pass of
// [Monitor.Run] also works on at most n runs at once, each making its store calls one
// after another, so n bounds the pass's store calls in flight too. The default is
// [DefaultWorkers]; a value ≤ 0 keeps it.
func WithWorkers(n int) Option {
	return optionFunc(func(c *config) {
		if n > 0 {
			c.workers = n
		}
	})
}

// WithCallTimeout bounds each Progress and Cancel call, measured in real time. The call's
// context carries the deadline, the values of the context the Monitor was given, and ends
// when the call returns; a plugin that has not answered by the deadline fails only its
// own operation, and its worker goes on with the next one at once. A plugin that ignores its
// context keeps only the goroutine it was called in, until it returns; its late answer is
// dropped. Until it returns, the Monitor makes no other call (Progress or Cancel) for
// that operation: each check of it takes the error of a call given up, and the Observer
// is told [CallHung]; the next check after the plugin returns calls it again. The
// default is [DefaultCallTimeout]; a value ≤ 0 keeps it.
func WithCallTimeout(d time.Duration) Option {
	return optionFunc(func(c *config) {
		if d > 0 {
			c.callTimeout = d
		}
	})
}

// WithDefaultOperationTimeout sets how long an operation may run, counted from its Created
// time, when its run sets no OperationTimeout. The default is [DefaultOperationTimeout],
// Velero's four hours; a value ≤ 0 keeps it.
func WithDefaultOperationTimeout(d time.Duration) Option {
	return optionFunc(func(c *config) {
		if d > 0 {
			c.operationTimeout = d
		}
	})
}

// WithClock sets the clock that stamps records, decides operation timeouts and paces
// [Monitor.Run]. The default is the system clock; nil keeps it.
func WithClock(clk clock.Clock) Option {
	return optionFunc(func(c *config) {
		if clk != nil {
			c.clock = clk
		}
	})
}

// WithLogger sets where the Monitor logs what it does. The default discards; nil keeps it.
func WithLogger(l *slog.Logger) Option {
	return optionFunc(func(c *config) {
		if l != nil {
			c.logger = l
		}
	})
}

// WithProgressErrorTolerance sets how many consecutive Progress errors (or failures to
// resolve the plugin) an operation survives: the error after n in a row fails it. The
// default is 0, Velero's behaviour: the first error fails the operation. Errors that
// cannot heal, [operations.ErrInvalidOperationID] and
// [operations.ErrAsyncOperationsNotSupported], fail it at once whatever n is. The count
// lives in the Monitor's memory: it starts over when the Monitor restarts or another
// Monitor takes the run's claim, and goes with the run once the run no longer waits.
func WithProgressErrorTolerance(n int) Option {
	return optionFunc(func(c *config) {
		if n >= 0 {
			c.tolerance = n
		}
	})
}

// WithFinalizer sets the work [Monitor.Run] does for a run in Finalizing or
// FinalizingPartiallyFailed before moving it to its terminal phase. Without one, such runs
// move straight on.
func WithFinalizer(f Finalizer) Option {
	return optionFunc(func(c *config) { c.finalizer = f })
}

// WithFinalizeTimeout bounds each call of the [Finalizer], measured in real time. The
// call's context carries the deadline; a finalizer that has not returned by then is given
// up: the run moves to PartiallyFailed with a reason saying so, its claim is released,
// and the pass goes on. A finalizer that ignores its context keeps only the goroutine it
// was called in, until it returns; its late result is dropped. The default is
// [DefaultFinalizeTimeout]; a value ≤ 0 keeps it.
func WithFinalizeTimeout(d time.Duration) Option {
	return optionFunc(func(c *config) {
		if d > 0 {
			c.finalizeTimeout = d
		}
	})
}

// withStoreConcurrency bounds how many runs a pass of [Monitor.Run] (or [Monitor.RunOnce])
// polls or finalizes at once. Each run's store calls are made one after another, so this
// also bounds the pass's store calls in flight. The default is the worker count (see
// [WithWorkers]); a value ≤ 0 keeps it. Only tests set it, to hold the pass to fewer
// runs than workers.
func withStoreConcurrency(n int) Option {
	return optionFunc(func(c *config) {
		if n > 0 {
			c.storeWork = n
		}
	})
}

// A Finalizer does a run's work after its operations ended: for a backup, adding the items
// the plugins asked to back up again (Velero's post-operation items).
type Finalizer interface {
	// Finalize receives the run and the PostOperationItems of all its operations, in
	// operation order without repeats. When it returns nil the run moves to Completed
	// (from Finalizing) or PartiallyFailed (from FinalizingPartiallyFailed). When it
	// returns an error the run moves to PartiallyFailed with the error as the reason
	// and one more error counted, so retry transient failures inside Finalize; an error
	// caused by ctx ending leaves the run for the next pass, and a call that outlasts
	// the finalize timeout is given up as an error ([WithFinalizeTimeout]). Two Monitors
	// may finalize the same run at once (only one advances it), so Finalize must be
	// idempotent; and a Monitor finalizes several runs at once (up to its worker count,
	// [WithWorkers]), so Finalize must be safe for concurrent use.
	Finalize(ctx context.Context, r operations.Run, items []operations.ResourceIdentifier) error
}

// FinalizerFunc adapts a function to a [Finalizer].
type FinalizerFunc func(ctx context.Context, r operations.Run, items []operations.ResourceIdentifier) error

// Finalize calls f(ctx, r, items).
func (f FinalizerFunc) Finalize(ctx context.Context, r operations.Run, items []operations.ResourceIdentifier) error {
	return f(ctx, r, items)
}

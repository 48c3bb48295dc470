package operations

import (
	"context"
	"io"
	"log/slog"
	"time"
)

// A MonitorOption configures a [Monitor].
type MonitorOption interface{ apply(*config) }

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

// Defaults of a Monitor's options.
const (
	DefaultInterval         = 10 * time.Second
	DefaultWorkers          = 16
	DefaultCallTimeout      = 30 * time.Second
	DefaultOperationTimeout = 4 * time.Hour
)

type config struct {
	interval         time.Duration
	workers          int
	callTimeout      time.Duration
	operationTimeout time.Duration
	clock            Clock
	logger           *slog.Logger
	tolerance        int
	finalizer        Finalizer
	observer         func(PassStats)
}

func newConfig(opts []MonitorOption) config {
	c := config{
		interval:         DefaultInterval,
		workers:          DefaultWorkers,
		callTimeout:      DefaultCallTimeout,
		operationTimeout: DefaultOperationTimeout,
		clock:            systemClock{},
		logger:           slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	for _, o := range opts {
		if o != nil {
			o.apply(&c)
		}
	}
	return c
}

// WithInterval sets the delay between the passes of [Monitor.Run]. The default is
// [DefaultInterval]; a value ≤ 0 keeps it.
func WithInterval(d time.Duration) MonitorOption {
	return optionFunc(func(c *config) {
		if d > 0 {
			c.interval = d
		}
	})
}

// WithWorkers bounds how many Progress and Cancel calls run at once, across all the
// operations of all runs a Monitor polls; a call given up after the call timeout (see
// [WithCallTimeout]) no longer counts. The default is [DefaultWorkers]; a value ≤ 0 keeps
// it.
func WithWorkers(n int) MonitorOption {
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
// dropped. The default is [DefaultCallTimeout]; a value ≤ 0 keeps it.
func WithCallTimeout(d time.Duration) MonitorOption {
	return optionFunc(func(c *config) {
		if d > 0 {
			c.callTimeout = d
		}
	})
}

// WithDefaultOperationTimeout sets how long an operation may run, counted from its Created
// time, when its run sets no OperationTimeout. The default is [DefaultOperationTimeout],
// Velero's four hours; a value ≤ 0 keeps it.
func WithDefaultOperationTimeout(d time.Duration) MonitorOption {
	return optionFunc(func(c *config) {
		if d > 0 {
			c.operationTimeout = d
		}
	})
}

// WithClock sets the clock that stamps records, decides operation timeouts and paces
// [Monitor.Run]. The default is the system clock; nil keeps it.
func WithClock(clk Clock) MonitorOption {
	return optionFunc(func(c *config) {
		if clk != nil {
			c.clock = clk
		}
	})
}

// WithLogger sets where the Monitor logs what it does. The default discards; nil keeps it.
func WithLogger(l *slog.Logger) MonitorOption {
	return optionFunc(func(c *config) {
		if l != nil {
			c.logger = l
		}
	})
}

// WithProgressErrorTolerance sets how many consecutive Progress errors (or failures to
// resolve the plugin) an operation survives: the error after n in a row fails it. The
// default is 0, Velero's behaviour: the first error fails the operation. Errors that
// cannot heal, [ErrInvalidOperationID] and [ErrAsyncOperationsNotSupported], fail it at
// once whatever n is. The count lives in the Monitor's memory and restarts with it.
func WithProgressErrorTolerance(n int) MonitorOption {
	return optionFunc(func(c *config) {
		if n >= 0 {
			c.tolerance = n
		}
	})
}

// WithFinalizer sets the work [Monitor.Run] does for a run in Finalizing or
// FinalizingPartiallyFailed before moving it to its terminal phase. Without one, such runs
// move straight on.
func WithFinalizer(f Finalizer) MonitorOption {
	return optionFunc(func(c *config) { c.finalizer = f })
}

// WithObserver sets a function called after each pass of [Monitor.Run] with what the pass
// did, for metrics. It is called from the goroutine of Run and should return quickly.
func WithObserver(f func(PassStats)) MonitorOption {
	return optionFunc(func(c *config) { c.observer = f })
}

// A Finalizer does a run's work after its operations ended: for a backup, adding the items
// the plugins asked to back up again (Velero's post-operation items).
type Finalizer interface {
	// Finalize receives the run and the PostOperationItems of all its operations, in
	// operation order without repeats. When it returns nil the run moves to Completed
	// (from Finalizing) or PartiallyFailed (from FinalizingPartiallyFailed). When it
	// returns an error the run moves to PartiallyFailed with the error as the reason
	// and one more error counted, so retry transient failures inside Finalize; an error
	// caused by ctx ending leaves the run for the next pass. Two Monitors may finalize
	// the same run at once (only one advances it), so Finalize must be idempotent.
	Finalize(ctx context.Context, r Run, items []ResourceIdentifier) error
}

// FinalizerFunc adapts a function to a [Finalizer].
type FinalizerFunc func(ctx context.Context, r Run, items []ResourceIdentifier) error

// Finalize calls f(ctx, r, items).
func (f FinalizerFunc) Finalize(ctx context.Context, r Run, items []ResourceIdentifier) error {
	return f(ctx, r, items)
}

// PassStats is what one pass of [Monitor.Run] did.
type PassStats struct {
	Start    time.Time     // by the Monitor's clock
	Duration time.Duration // by the Monitor's clock
	// Runs is the number of waiting runs polled, Operations the number of operations
	// checked, Completed and Failed how many of them ended in this pass, NewErrors the
	// errors added to runs, Advanced the runs whose phase changed (finalized included).
	Runs, Operations, Completed, Failed, NewErrors, Advanced int
	// Finalized is the number of runs the pass moved out of a finalizing phase.
	Finalized int
	// Skipped is the number of runs the pass left alone because another Monitor held
	// their claim (see [RunClaimer]).
	Skipped int
	// Err joins what went wrong with the store or a finalizer; the pass went on
	// regardless.
	Err error
}

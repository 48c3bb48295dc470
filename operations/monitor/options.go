package monitor

import (
	"context"
	"errors"
	"fmt"
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

// MinInterval is the shortest wait of [Monitor.Run] between two passes, whatever the
// interval ([WithInterval]) and the retry policies' waits ([RetryPolicy]) say: a shorter
// interval is taken as MinInterval, and an operation due sooner waits for the next pass
// after it. So a Run makes at most 100 passes a second, each one store list of the waiting
// runs and one of the finalizing runs, and a plugin is called at most once per operation
// per pass, however short its retry waits. Only [Monitor.Wake] starts a pass sooner.
const MinInterval = 10 * time.Millisecond

type config struct {
	interval         time.Duration
	workers          int
	callTimeout      time.Duration
	operationTimeout time.Duration
	clock            clock.Clock
	logger           *slog.Logger
	finalizer        Finalizer
	finalizeTimeout  time.Duration
	storeWork        int // 0: workers
	observer         Observer
	tracer           Tracer
	keepClaims       bool          // RunOnce keeps its claims in a session (WithKeptClaims)
	progressEvery    time.Duration // 0: progress is written at once (WithProgressWriteInterval)

	// defaults is the policy of every plugin that has none of its own in actions.
	// actionSet holds what the options set for single plugins, which newConfig
	// resolves into actions once every option is applied; actions is nil when no
	// plugin has a policy of its own.
	defaults  policy
	actionSet map[string]actionOptions
	actions   map[string]policy
	// policies is whether any plugin has a stall timeout or a retry policy; without,
	// a poll checks every operation, as Velero does, and looks at no due time.
	policies bool
	// invalid joins the errors of options given invalid values: every method that
	// works on the store returns it before anything else (see New).
	invalid error
}

// A policy is what the Monitor applies to the operations of one plugin beyond Velero's
// rules: a stall window (0: none) and a retry policy.
type policy struct {
	stall time.Duration
	retry RetryPolicy
}

// on reports whether p asks for anything beyond Velero's rules.
func (p policy) on() bool { return p.stall > 0 || p.retry.on() }

// actionOptions is what the options set for one plugin: stall when hasStall is true,
// retry when hasRetry is.
type actionOptions struct {
	stall              time.Duration
	retry              RetryPolicy
	hasStall, hasRetry bool
}

// policyOf returns the policy of the operations of plugin action.
func (c *config) policyOf(action string) policy {
	if p, ok := c.actions[action]; ok {
		return p
	}
	return c.defaults
}

// resolvePolicies makes actions from defaults and actionSet, and sets policies.
func (c *config) resolvePolicies() {
	c.policies = c.defaults.on()
	for action, set := range c.actionSet {
		p := c.defaults
		if set.hasStall {
			p.stall = set.stall
		}
		if set.hasRetry {
			p.retry = set.retry
		}
		if c.actions == nil {
			c.actions = make(map[string]policy, len(c.actionSet))
		}
		c.actions[action] = p
		c.policies = c.policies || p.on()
	}
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
	c.resolvePolicies()
	return c
}

// WithInterval sets the delay between the passes of [Monitor.Run]. The default is
// [DefaultInterval]; a value ≤ 0 keeps it, and a value below [MinInterval] is taken as
// MinInterval.
func WithInterval(d time.Duration) Option {
	return optionFunc(func(c *config) {
		if d > 0 {
			c.interval = max(d, MinInterval)
		}
	})
}

// WithKeptClaims makes the passes of [Monitor.RunOnce] keep their claims from one pass
// to the next, as those of [Monitor.Run] do, when the store is an
// [operations.ClaimKeeper] (storage/etcdstore and storage/kubestore are): give it to a
// Monitor that a program drives by calling RunOnce in a loop, once per interval (set
// the interval of the loop with [WithInterval]: the session hands runs over to other
// replicas an interval after its last pass over them). The first RunOnce starts a
// claim session, with the Monitor's interval, that the later calls use, so that a
// pass over runs no other replica wants makes no claim requests, and the replicas
// balance the runs among them as Runs do; [Monitor.Close] ends it. See RunOnce.
//
// Without it (the default), each pass of RunOnce claims each run it works on and gives
// the claim up when it is done with the run: a pass leaves no claim behind, and needs no
// Close, but on a store that keeps claims it costs a claim and a release (two requests
// to the backend) per run per pass. On a store that keeps no claims the option does
// nothing.
func WithKeptClaims() Option {
	return optionFunc(func(c *config) { c.keepClaims = true })
}

// WithProgressWriteInterval makes the Monitor write a run whose poll changed nothing
// but its operations' progress (their counts, units, description and times) at most
// once every d, as Argo Workflows writes a workflow's progress, so that a pass over
// many runs makes few writes: on a client limited to 20 requests a second, a pass of
// storage/kubestore writes about one run in six with d a minute and a 10 s interval
// (docs/BENCHMARKS.md, "A pass that reads once"). A poll that changes more is written
// at once, with the progress it holds: an operation that started, completed, failed,
// timed out, stalled or was cancelled, and a Progress error that a retry policy
// counts or an answer that ends a row of them. Progress held back is not lost: every
// poll asks the plugins again, and the next write records their latest reports.
//
// A run that the Monitor has not written yet (new, or met after a restart) has its
// first progress written within d, at a point that its name sets, so that the runs met
// in one pass are written over the passes of the next d rather than all at once. What
// the Monitor keeps is one time per waiting run, in memory.
//
// What the store holds of an operation's progress is thus up to d old, and so is what
// another Monitor that takes the run over starts from. Under a stall timeout
// ([WithStallTimeout]), a stall is seen up to d late: the Monitor counts the stall
// window from the last progress the store holds. [PollResult] and [PassStats] count the
// runs held back. The default, 0, writes every change at once, as Velero does; a value
// ≤ 0 keeps it.
func WithProgressWriteInterval(d time.Duration) Option {
	return optionFunc(func(c *config) {
		if d > 0 {
			c.progressEvery = d
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

// WithStallTimeout fails an operation whose progress has not moved for d by the Monitor's
// clock. Progress moves when the plugin reports an NCompleted above every NCompleted the
// Monitor has seen of the operation. Counts that go back and forth (12, 11, 12, 11) do
// not move it, nor does a report that changes only NTotal, units, description or times:
// a data mover that repeats itself, or that says it is busy and does no work, is stuck.
// One that starts over moves again once it passes the highest count it reached before.
// The highest count is kept in the operation's record while the reports are below it
// ([operations.MonitorState.MaxCompleted]), so the rule holds across a restart.
//
// Such an operation is stalled at that moment exactly, not before: the Observer is told
// ([Observer.Stalled]), its plugin's Cancel is called, as for a timeout, and it fails
// with a message that begins with [StallPrefix], such as "no progress for 30m0s: last 12
// of 100 GiB at 10:42:07Z", what Cancel said appended when it failed. The window of an
// operation the Monitor has not looked at under a stall timeout starts at its first
// check, so that turning the option on fails nothing at once; an operation that
// completes or runs past its timeout at the same check is not stalled. Errors of
// Progress are not progress: the window runs on while a [RetryPolicy] retries them. The
// time of the last move is kept in the operation's record
// ([operations.MonitorState.ProgressAt]), so the window goes on across a restart of the
// Monitor. It applies to every plugin without a window of its own
// ([WithActionStallTimeout]). The default, 0, is no stall timeout, as in Velero; a
// negative d is invalid: the Monitor's methods that work on the store then return an
// error wrapping [operations.ErrInvalid] before they touch it (see [New]).
func WithStallTimeout(d time.Duration) Option {
	return optionFunc(func(c *config) {
		if c.checkStall("WithStallTimeout", d) {
			c.defaults.stall = d
		}
	})
}

// WithActionStallTimeout sets the stall timeout (see [WithStallTimeout]) of the
// operations of plugin action, in place of the Monitor's; 0 turns it off for them. A
// negative d is invalid, as for WithStallTimeout.
func WithActionStallTimeout(action string, d time.Duration) Option {
	return optionFunc(func(c *config) {
		if c.checkStall("WithActionStallTimeout("+action+")", d) {
			set := c.actionSet[action]
			set.stall, set.hasStall = d, true
			c.setAction(action, set)
		}
	})
}

// WithRetryPolicy sets the retry policy of Progress errors (see [RetryPolicy]) of every
// plugin without one of its own ([WithActionRetryPolicy]). The default, the zero
// RetryPolicy, retries nothing: the first error fails the operation, as in Velero. A
// policy that [RetryPolicy.Validate] refuses is invalid: the Monitor's methods that
// work on the store then return its error, which wraps [operations.ErrInvalid], before
// they touch it (see [New]).
func WithRetryPolicy(p RetryPolicy) Option {
	return optionFunc(func(c *config) {
		if c.checkRetry("WithRetryPolicy", p) {
			c.defaults.retry = p
		}
	})
}

// WithActionRetryPolicy sets the retry policy (see [WithRetryPolicy]) of the Progress
// errors of plugin action, in place of the Monitor's; the zero RetryPolicy turns retries
// off for it. An invalid policy is refused as by WithRetryPolicy.
func WithActionRetryPolicy(action string, p RetryPolicy) Option {
	return optionFunc(func(c *config) {
		if c.checkRetry("WithActionRetryPolicy("+action+")", p) {
			set := c.actionSet[action]
			set.retry, set.hasRetry = p, true
			c.setAction(action, set)
		}
	})
}

// checkStall reports whether d is a valid stall timeout, and records an error naming
// option when it is not.
func (c *config) checkStall(option string, d time.Duration) bool {
	if d < 0 {
		c.invalid = errors.Join(c.invalid, fmt.Errorf("monitor option %s: negative stall timeout %s: %w", option, d, operations.ErrInvalid))
		return false
	}
	return true
}

// checkRetry reports whether p is a valid retry policy, and records an error naming
// option when it is not.
func (c *config) checkRetry(option string, p RetryPolicy) bool {
	if err := p.Validate(); err != nil {
		c.invalid = errors.Join(c.invalid, fmt.Errorf("monitor option %s: %w", option, err))
		return false
	}
	return true
}

// setAction records what the options set for plugin action.
func (c *config) setAction(action string, set actionOptions) {
	if c.actionSet == nil {
		c.actionSet = make(map[string]actionOptions)
	}
	c.actionSet[action] = set
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

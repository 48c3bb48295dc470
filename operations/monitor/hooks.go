package monitor

import (
	"time"

	"github.com/itemops/itemops/operations"
)

// Hooks are functions a [Monitor] calls as it works, for metrics or tracing; each may be
// nil. They are called synchronously from the Monitor's goroutines, several at once, so
// they must be safe for concurrent use and return quickly. Set them with [WithHooks];
// [WithObserver] reports each pass.
type Hooks struct {
	// PluginCall is called after each Progress or Cancel call to a plugin, or when the
	// call is given up (see [WithCallTimeout]).
	PluginCall func(CallStats)
	// OperationTimedOut is called when an operation is failed for running past its
	// timeout (see [TimedOut]).
	OperationTimedOut func(operations.Operation)
	// Finalized is called after each call of the [Finalizer].
	Finalized func(FinalizeStats)
}

// WithHooks adds h to the Monitor's [Hooks]: each WithHooks adds a set, and a Monitor
// calls the hooks of every set, in order. By default none is set.
func WithHooks(h Hooks) Option {
	return optionFunc(func(c *config) {
		c.hooks = Hooks{
			PluginCall:        both(c.hooks.PluginCall, h.PluginCall),
			OperationTimedOut: both(c.hooks.OperationTimedOut, h.OperationTimedOut),
			Finalized:         both(c.hooks.Finalized, h.Finalized),
		}
	})
}

// both returns a function calling f then g, either of which may be nil.
func both[T any](f, g func(T)) func(T) {
	switch {
	case f == nil:
		return g
	case g == nil:
		return f
	}
	return func(v T) { f(v); g(v) }
}

// A CallOutcome says how a plugin call ended.
type CallOutcome string

// The outcomes of plugin calls.
const (
	CallSucceeded CallOutcome = "succeeded"
	CallErrored   CallOutcome = "errored"   // it returned an error
	CallPanicked  CallOutcome = "panicked"  // it panicked; the Monitor recovered
	CallTimedOut  CallOutcome = "timed_out" // given up after the call timeout
)

// CallStats describes one plugin call.
type CallStats struct {
	Action   string // the plugin's registered name
	Cancel   bool   // a Cancel call; else a Progress call
	Duration time.Duration
	Outcome  CallOutcome
}

// FinalizeStats describes one call of a [Finalizer].
type FinalizeStats struct {
	Owner    operations.Owner
	Duration time.Duration // real time
	Err      error         // what it returned; nil on success
	TimedOut bool          // given up after the finalize timeout (see [WithFinalizeTimeout])
}

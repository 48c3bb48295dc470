package operations

import "context"

// A Tracker asks one plugin about its operations: Progress reports how an operation is
// doing and Cancel asks the plugin to stop it. The Monitor of package operations/monitor
// calls both with a context that ends after its per-call timeout; a Tracker should return
// when the context ends.
//
// Progress returns an error only when it cannot tell (the plugin is unreachable, the ID is
// unknown: [ErrInvalidOperationID]); an operation that failed is reported with
// Progress.Completed set and Progress.Err saying why. Cancel has no effect on an operation
// that has ended, and returns nil whether or not the plugin could stop it; an error means
// something unexpected happened.
type Tracker interface {
	Progress(ctx context.Context, op Operation) (Progress, error)
	Cancel(ctx context.Context, op Operation) error
}

// A Resolver finds the [Tracker] of the plugin registered under an operation's Action.
// It returns an error when no such plugin is registered.
type Resolver interface {
	Resolve(action string) (Tracker, error)
}

// ResolverFunc adapts a function to a [Resolver].
type ResolverFunc func(action string) (Tracker, error)

// Resolve calls f(action).
func (f ResolverFunc) Resolve(action string) (Tracker, error) { return f(action) }

package operations

import "context"

// A RunClaimer is an optional ability of a [Store] that several processes share: it
// decides which Monitor (package operations/monitor) works on a run, so that each run is
// polled and finalized by one Monitor at a time, and when a process dies another takes
// its runs over. A Monitor finds it by a type assertion on its store; stores used by one
// process (memory, a local file) need not have it, and without it Monitors rely on the
// store's atomic updates alone, which keep a run from being advanced twice but let two
// Monitors poll it at once.
//
// An implementation of ClaimRun tries to claim the run of o for the caller. When it gets
// the claim it returns ok true and a release function: the caller works on the run, then
// calls release, which gives the claim up; release must be safe to call more than once
// and from any goroutine, must not block for long, and must not fail (a claim it cannot
// give up ends by itself, as below). When another holder, in this process or another,
// has the claim, ClaimRun returns ok false and a nil error. When it cannot tell (its
// backend is unreachable, ctx is done) it returns an error, and ok false.
//
// A claim must end by itself a bounded time after its holder stops renewing it (a
// process that died, or lost its backend), so that another can take the run over. Claims
// are for efficiency and fairness, not safety: a holder that lost its claim while it
// worked may still be writing, and the store's atomic updates keep that correct.
type RunClaimer interface {
	ClaimRun(ctx context.Context, o Owner) (release func(), ok bool, err error)
}

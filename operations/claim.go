package operations

import (
	"context"
	"time"
)

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

// A ClaimKeeper is an optional ability of a [RunClaimer]: it keeps the claims of a
// Monitor's Run (or of its RunOnce passes, given monitor.WithKeptClaims) from one pass
// to the next, in a [ClaimSession], so that a replica goes on working on the runs it
// holds without asking its backend for each of them in every pass, and the replicas
// that share the store can balance the runs among them. The Run of a
// Monitor (package operations/monitor) finds it by a type assertion on its store, as it
// finds the RunClaimer; storage/etcdstore has it, and stores used by one process need
// not.
//
// KeepClaims starts a session for a Run whose passes start every interval, and returns
// it (never nil). It does not fail: what it cannot do because its backend does not
// answer (within ctx, or within a bounded time), the session makes up for at the end of
// a pass. The session does not end with ctx; only [ClaimSession.End] ends it. When wake
// is not nil, the session may call it, from any goroutine, until End returns, to have
// the Monitor's next pass start before the interval is over (when a run another holder
// handed over becomes free); the Monitor passes its Wake.
type ClaimKeeper interface {
	RunClaimer
	KeepClaims(ctx context.Context, interval time.Duration, wake func()) ClaimSession
}

// A ClaimSession keeps the claims of one Monitor's Run from pass to pass; a
// [ClaimKeeper] starts it. Its methods are safe for concurrent use.
//
// ClaimRun claims the run of o under the session. It answers as [RunClaimer.ClaimRun]
// does and fails as it does, but its release function keeps the claim for the session
// instead of giving it up: the session's next ClaimRun of the run takes it back, usually
// without a request to the backend. A session may also answer ok false, without a
// request, for a run another holder held when it last read the claims, so its Monitor
// claims a run before it reads it.
//
// Each pass of the Monitor ends with one call of EndPass or of EndIncompletePass.
// EndPass says that the pass listed runs runs (waiting and finalizing): the session may
// then give up the claims of the runs the pass did not claim (they ended, or another
// holder took them) and hand the claims beyond its share of runs to other holders.
// EndIncompletePass says that a list of runs failed, so the pass saw only some of them:
// the session then gives up and hands over nothing, and keeps its claims for the next
// pass. Each waits for the backend a bounded time, and leaves what the backend did not
// answer to the next pass.
//
// EndPass returns what kept the session, since the last EndPass, from reading the
// claims and the holders or from watching the holders: a right the store lacks (on
// Kubernetes, list or watch on Leases) or a backend that did not answer. The session
// goes on all the same, its runs claimed one by one, but it cannot share them with other
// holders until that is mended, so its Monitor logs the error (a warning, each pass it
// comes back). An error never means a claim was lost or a run polled twice.
//
// End ends the session, once the Monitor's Run is over: it gives up every claim the
// session keeps (a claim in use is given up by its release), waiting for the backend a
// bounded time; a claim the backend did not give up ends by itself, as every claim of a
// RunClaimer does. After End, release gives a claim up, and wake is not called. End
// does not fail, and calls after the first do nothing.
type ClaimSession interface {
	ClaimRun(ctx context.Context, o Owner) (release func(), ok bool, err error)
	EndPass(runs int) error
	EndIncompletePass()
	End()
}

// A ClaimTaker is an optional ability of a [ClaimKeeper]: it ends the claims of every
// other holder at once, so that a Monitor that has just become the only one at work
// (a leader newly elected, whose predecessor was killed) polls the runs its
// predecessor held without waiting for their claims to end by themselves. A caller
// finds it by a type assertion on its store; storage/etcdstore and storage/kubestore
// have it, and package operations/decorate keeps it.
//
// TakeOverClaims ends the session of every other store that shares this one's backend
// (what keeps a store's claims alive: its etcd lease, or its session Lease), never this
// store's own. Their claims, hand-overs and claim sessions end with them, and every run
// they held is free for whoever claims it next. It returns how many sessions it ended
// (none when no other store had one). Call it only when no other Monitor should be at
// work, as with a leader-elected operator's Monitor before its first pass: it takes the
// runs of live holders as well as of dead ones. A holder that is alive loses its
// session, finds so at its next renewal or claim (within a third of its claim time to
// live), and starts another; a poll it has under way finishes without a claim, which is
// harmless (claims are for efficiency, not safety: the store's atomic updates keep
// every write correct).
//
// TakeOverClaims fails with the store's errors (a backend that does not answer, a
// closed store) or with ctx.Err(); then it may have ended some of the others'
// sessions (counted in ended) and not the rest, whose claims end by themselves, as
// every claim of a RunClaimer does. It is safe for concurrent use, and calling it again
// ends what the first call did not.
type ClaimTaker interface {
	ClaimKeeper
	TakeOverClaims(ctx context.Context) (ended int, err error)
}

package monitor

import (
	"context"
	"time"

	"github.com/itemops/itemops/operations"
)

// A claimKeeper is a [operations.RunClaimer] that can keep a Monitor's claims from one
// pass of [Monitor.Run] to the next, so that a replica goes on polling the runs it holds
// without asking its backend for them every pass (storage/etcdstore is one). Run finds it
// by a type assertion on its store, as it finds the RunClaimer; it is declared here, not
// in package operations, because only Run uses it.
//
// KeepClaims starts a keep session for a Run whose passes start every interval. Run
// passes the context it returns to ClaimRun: the release function of a claim made under
// that context keeps the claim for the session instead of giving it up, and the next
// ClaimRun of the run under it takes the claim back. Since such a store can answer most
// claims from what it keeps, Run's passes claim a run before they read it. Run calls
// pass at the end of each pass whose lists of runs it read, with how many runs they held
// (the store may then give up the claims of runs the pass did not work on, and hand its
// surplus to other replicas), and end once, when it returns: end gives up every claim the
// session keeps, whatever the state of the backend (it waits a bounded time for it), so
// that a Monitor that stops leaves no claim behind. Run passes its Monitor's Wake as
// wake: the session calls it, from any goroutine, to have a pass start before the
// interval is over (when a run another replica handed over becomes free). None of the
// three may fail; a store that cannot reach its backend lets its claims end by
// themselves, as RunClaimer says.
type claimKeeper interface {
	KeepClaims(ctx context.Context, interval time.Duration, wake func()) (keep context.Context, pass func(runs int), end func())
}

// keptKey marks the context of Run's passes when the store keeps its claims.
type keptKey struct{}

// claim claims the run of o when the store is a RunClaimer; otherwise every run is the
// Monitor's to work on.
func (m *Monitor) claim(ctx context.Context, o operations.Owner) (release func(), ok bool, err error) {
	if m.claimer == nil {
		return func() {}, true, nil
	}
	release, ok, err = m.claimer.ClaimRun(ctx, o)
	if err != nil {
		return nil, false, err
	}
	if !ok {
		return nil, false, nil
	}
	if release == nil {
		release = func() {}
	}
	return release, true, nil
}

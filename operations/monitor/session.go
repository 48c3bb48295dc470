package monitor

import (
	"context"
	"sync"

	"github.com/itemops/itemops/operations"
)

// onceSession is the claim session of a Monitor's RunOnce (see WithKeptClaims). Its
// zero value has no session.
type onceSession struct {
	// passMu guards session. A RunOnce holds it while its pass uses the session; a
	// RunOnce that finds it held makes its pass without the session, and Close waits
	// for it.
	passMu  sync.Mutex
	session operations.ClaimSession // nil until a RunOnce starts it, and after Close
}

// beginOnce returns the claim session for a pass of RunOnce, starting it when there is none,
// and the function that ends the pass's use of it. It returns a nil session when the
// Monitor keeps no claims for RunOnce (no WithKeptClaims, or a store that is no
// ClaimKeeper) and when another RunOnce's pass uses the session.
func (m *Monitor) beginOnce(ctx context.Context) (operations.ClaimSession, func()) {
	if !m.cfg.keepClaims || m.keeper == nil || !m.once.passMu.TryLock() {
		return nil, func() {}
	}
	if m.once.session == nil {
		// No wake: RunOnce has no loop to wake, and its caller's next pass takes what
		// the session's wake would have started a pass for.
		m.once.session = m.keeper.KeepClaims(ctx, m.cfg.interval, nil)
	}
	return m.once.session, m.once.passMu.Unlock
}

// Close ends the claim session that [Monitor.RunOnce] keeps with [WithKeptClaims]: it
// waits for a RunOnce whose pass uses the session to return, then gives up every claim
// the session keeps and stops what the session runs (its watch of the other replicas),
// waiting for the store a bounded time (storage/etcdstore's and storage/kubestore's
// request timeout); a claim the store did not give up ends by itself, as every claim
// does. Call it once the program has made its last RunOnce; a RunOnce after Close
// starts a new session, which the next Close ends.
//
// Close does not fail, does nothing when no session is under way (a Monitor without
// WithKeptClaims, or whose store keeps no claims), and is safe for concurrent use and
// to call more than once. A store's own Close (storage/etcdstore's, storage/kubestore's)
// ends the sessions of its Monitors too, and gives their claims up with its own; a
// Monitor's Close after it has nothing left to give up. It does not touch the session of [Monitor.Run], which Run ends
// itself when its context ends.
func (m *Monitor) Close() {
	m.once.passMu.Lock()
	session := m.once.session
	m.once.session = nil
	m.once.passMu.Unlock()
	if session != nil {
		session.End()
	}
}

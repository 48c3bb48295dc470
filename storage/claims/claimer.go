package claims

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/itemops/itemops/operations"
)

// A Claimer is the claim policy of one store over its [Backend]: it answers ClaimRun
// (an [operations.RunClaimer]) and KeepClaims (an [operations.ClaimKeeper]) as
// storage/etcdstore's Store documents them, for every store whose replicas share runs.
// It is safe for concurrent use. Get one from [New].
type Claimer struct {
	b Backend
	// heldMu guards held: the claims a Monitor here holds, or a claim session keeps (see
	// KeepClaims), by key, with the version that wrote each.
	heldMu sync.Mutex
	held   map[string]string
	// keepMu guards keepers, the claim sessions under way. It is taken before a
	// session's mutex, never after.
	keepMu  sync.Mutex
	keepers map[*keeper]bool
}

// New returns the Claimer of the claims that b keeps.
func New(b Backend) *Claimer {
	return &Claimer{b: b, held: make(map[string]string), keepers: make(map[*keeper]bool)}
}

// ClaimRun claims the run of o, outside any claim session (see
// [operations.RunClaimer]). A run that a session of this Claimer keeps and no Monitor
// uses is lent: its release gives it back to the session. It fails with
// [operations.ErrInvalid] for an invalid owner, with the backend's error, or with
// ctx.Err(); a claim made for a caller that has gone is given up first.
func (c *Claimer) ClaimRun(ctx context.Context, o operations.Owner) (release func(), ok bool, err error) {
	return c.claim(ctx, o, nil)
}

// TakeOverClaims ends the sessions of the other stores of the backend, so that the runs
// they held are free at once (see [operations.ClaimTaker]), and returns how many it
// ended. The claim sessions of this Claimer forget which runs other stores held when
// they last read the claims, so that their next claims of those runs ask the backend.
// It fails as Ready does, with the backend's error, or with ctx.Err().
func (c *Claimer) TakeOverClaims(ctx context.Context) (ended int, err error) {
	if err := c.b.Ready(ctx); err != nil {
		return 0, err
	}
	ended, err = c.b.EndOthers(ctx)
	c.keepMu.Lock()
	for k := range c.keepers {
		k.forgetOthers()
	}
	c.keepMu.Unlock()
	if err != nil {
		return ended, fmt.Errorf("take over the claims of other stores: %w", err)
	}
	return ended, nil
}

// claim is ClaimRun, under the claim session k when it is not nil: the session takes
// back a claim it keeps, knows the runs other stores held when it last read the claims,
// and keeps the claims made when they are released. A claim of a run handed over, in a
// session whose claims of such runs under way would fill its share, first waits for
// those to end (each within the backend's Timeout).
func (c *Claimer) claim(ctx context.Context, o operations.Owner, k *keeper) (release func(), ok bool, err error) {
	if err := o.Validate(); err != nil {
		return nil, false, fmt.Errorf("claim run: %w", err)
	}
	key := c.b.Key(o)
	// A claim a session keeps is taken back by the session (k.adopt), or lent to a
	// caller outside the sessions (c.lend); its release returns it to the session.
	var (
		kept        func()
		found, busy bool
	)
	if k != nil {
		kept, found, busy = k.adopt(key)
	} else {
		kept, found, busy = c.lend(key)
	}
	switch {
	case found:
		if err := c.b.Ready(ctx); err != nil {
			kept() // the caller has gone: the session keeps the claim
			return nil, false, err
		}
		return kept, true, nil
	case busy, k != nil && k.heldByOther(ctx, key):
		return nil, false, c.b.Ready(ctx)
	}
	c.heldMu.Lock()
	_, busy = c.held[key]
	c.heldMu.Unlock()
	if busy {
		return nil, false, c.b.Ready(ctx)
	}
	// took is set while a claim of a run handed over, which the claim session allowed
	// (mayTake), is neither added to the session nor given back to it.
	took := false
	defer func() {
		if took {
			k.untake()
		}
	}()
	for attempt := 0; ; attempt++ {
		ss, err := c.b.Session(ctx)
		if err != nil {
			return nil, false, fmt.Errorf("claim run %s: %w", o, err)
		}
		// The request is not cut short when ctx ends: the backend could write a claim
		// whose caller has gone, and nobody would ever release it. It is bounded by the
		// backend's Timeout, and ctx is looked at once the outcome is known.
		ver, cur, err := c.b.Claim(ctx, key, ss, "")
		if errors.Is(err, ErrSessionLost) && attempt == 0 {
			continue // the session was lost before its renewal noticed: start another
		}
		if err != nil {
			// The backend may have written the claim though the request failed: give up
			// whatever this session holds under key, so that the claim does not outlive
			// the call that made it.
			c.abandon(key, ss)
			return nil, false, fmt.Errorf("claim run %s: %w", o, err)
		}
		if ver == "" {
			switch {
			case cur == nil:
				return nil, false, nil // another store held it a moment ago
			case cur.HandedOver:
				// A run handed over by a claim session: take it if its time has come.
				if !k.mayTake(cur.Holder, cur.Free, ss, time.Now()) {
					return nil, false, nil
				}
				took = k != nil
				ver, cur, err = c.b.Claim(ctx, key, ss, cur.Version)
				if err != nil {
					c.abandon(key, ss)
					return nil, false, fmt.Errorf("claim run %s: %w", o, err)
				}
				if ver == "" {
					if cur == nil || cur.HandedOver || cur.Holder != ss.ID() {
						return nil, false, nil // another store took it first
					}
					// The claim is this session's, and not handed over: this very write,
					// applied though the backend's answer said otherwise (a request sent
					// again after its answer was lost). Adopt it.
					ver = cur.Version
				}
			case cur.Holder != ss.ID():
				return nil, false, nil // another store holds it
			default:
				// A claim of this store's session that no Monitor here holds: its release
				// could not reach the backend. Adopt it.
				ver = cur.Version
			}
		}
		c.heldMu.Lock()
		if _, busy := c.held[key]; busy { // another Monitor here adopted it first
			c.heldMu.Unlock()
			return nil, false, nil
		}
		c.held[key] = ver
		c.heldMu.Unlock()
		var once sync.Once
		giveUp := func() { once.Do(func() { c.release(key, ver) }) }
		if err := ctx.Err(); err != nil {
			giveUp() // the caller has gone: it cannot release the claim
			return nil, false, err
		}
		if k != nil {
			keep := k.add(key, ver, ss, took)
			took = false
			if keep != nil {
				return keep, true, nil
			}
		}
		return giveUp, true, nil
	}
}

// lend lends a claim that a claim session keeps, and no Monitor uses, to a caller
// outside the sessions (such as Monitor.Poll while Run goes on): its release gives it
// back to the session. It reports busy when a Monitor of a session uses it.
func (c *Claimer) lend(key string) (release func(), ok, busy bool) {
	c.keepMu.Lock()
	defer c.keepMu.Unlock()
	for k := range c.keepers {
		if release, ok, busy := k.adopt(key); ok || busy {
			return release, ok, busy
		}
	}
	return nil, false, false
}

// abandoning marks in held a key whose claim abandon is giving up, so that no Monitor
// here adopts it meanwhile. No backend writes an empty version.
const abandoning = ""

// abandon deletes the claim under key if ss holds it and no Monitor here holds it: the
// outcome of a claim whose request failed. It waits at most the backend's Timeout;
// when the backend does not answer, the claim stays until its session ends or this
// store's next claim of the run adopts it.
func (c *Claimer) abandon(key string, ss Session) {
	c.heldMu.Lock()
	if _, busy := c.held[key]; busy {
		// A Monitor here holds the claim: the failed request did not write it.
		c.heldMu.Unlock()
		return
	}
	c.held[key] = abandoning
	c.heldMu.Unlock()
	defer c.forget(key, abandoning)
	c.b.Abandon(key, ss)
}

// release gives up the claim under key written at version ver. Only this claim: after
// it ended another store may hold a new one.
func (c *Claimer) release(key, ver string) {
	c.forget(key, ver)
	ctx, cancel := context.WithTimeout(context.Background(), c.b.Timeout())
	defer cancel()
	c.b.Apply(ctx, []Change{{Key: key, Version: ver}})
}

// forget drops key from the claims held here, if it is held at ver.
func (c *Claimer) forget(key, ver string) {
	c.heldMu.Lock()
	if v, ok := c.held[key]; ok && v == ver {
		delete(c.held, key)
	}
	c.heldMu.Unlock()
}

package etcdstore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/itemops/itemops/operations"
)

// A session is the lease that holds a store's claims, kept alive until stop or until
// etcd lets it expire.
type session struct {
	id     clientv3.LeaseID
	cancel context.CancelFunc
	done   chan struct{} // closed when the lease is no longer kept alive
}

func (ss *session) stop() {
	ss.cancel()
	<-ss.done
}

func (ss *session) lost() bool {
	select {
	case <-ss.done:
		return true
	default:
		return false
	}
}

// session returns the store's live session, granting a lease for a new one when there
// is none or the last one was lost (with its claims).
func (s *Store) session(ctx context.Context) (*session, error) {
	s.sessMu.Lock()
	defer s.sessMu.Unlock()
	if err := s.ready(ctx); err != nil {
		return nil, err
	}
	if s.sess != nil && !s.sess.lost() {
		return s.sess, nil
	}
	s.sess = nil
	var grant *clientv3.LeaseGrantResponse
	err := s.b.rpc(ctx, func(ctx context.Context) (err error) {
		grant, err = s.b.client.Grant(ctx, s.b.opts.leaseTTL())
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("grant the claims lease: %w", err)
	}
	kctx, cancel := context.WithCancel(context.Background())
	ch, err := s.b.client.KeepAlive(kctx, grant.ID)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("keep the claims lease alive: %w", s.b.translate(ctx, kctx, err))
	}
	ss := &session{id: grant.ID, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(ss.done)
		for range ch { // the client closes ch when the lease expires or kctx ends
		}
	}()
	s.sess = ss
	return ss, nil
}

// ClaimRun claims the run of o for this store, so that one
// [github.com/itemops/itemops/operations/monitor.Monitor] at a time
// polls or finalizes it; see [operations.RunClaimer]. The claim is a key under claims/
// bound to a lease of [Options.ClaimTTL] that the store keeps alive: when the store's
// process dies, or loses etcd for that long, the lease expires, the claim with it, and
// another store may take the run. A claim of a run already claimed, by this store (for
// another Monitor) or another, reports ok false; so does a claim of a run another
// replica handed over that is not free yet, an interval after that replica's last poll
// of it (see [Store.KeepClaims]).
//
// Release gives the claim up: it forgets it at once, then deletes its key (if it is still
// this claim), waiting at most [Options.RequestTimeout] for etcd; later calls do nothing.
// When etcd does not answer, the key stays until the lease expires, and until then this
// store's next claim of the run adopts it. A claim of a run that a claim session of this
// store ([Store.KeepClaims]) keeps and does not use (a Monitor's Poll or Finalize while
// its Run goes on) borrows it: release gives it back to the session. ClaimRun fails with
// [ErrUnavailable], [ErrClosed] or ctx.Err(), or with [operations.ErrInvalid] for an
// invalid owner. The claim's request is not cut short when ctx ends (it takes at most
// [Options.RequestTimeout]): a claim made for a caller that has gone is given up before
// ClaimRun returns ctx.Err(). When the request fails, etcd may have written the claim all
// the same: ClaimRun then deletes the key if it is under this store's lease and no
// Monitor here holds it, waiting at most [Options.RequestTimeout] more. A failed or
// cancelled claim thus leaves no claim behind, unless etcd applies the failed request
// after that deletion (it had not answered within the timeout); such a key stays until
// this store's next claim of the run adopts it or its lease ends with the store.
func (s *Store) ClaimRun(ctx context.Context, o operations.Owner) (release func(), ok bool, err error) {
	return s.claim(ctx, o, nil)
}

// claim is ClaimRun, under the claim session k when it is not nil (see
// Store.KeepClaims): the session takes back a claim it keeps, knows the runs other stores
// held when it last read the claims, and keeps the claims made when they are released.
// A claim of a run handed over, in a session whose claims of such runs under way would
// fill its share, first waits for those to end (each within Options.RequestTimeout).
func (s *Store) claim(ctx context.Context, o operations.Owner, k *keeper) (release func(), ok bool, err error) {
	if err := o.Validate(); err != nil {
		return nil, false, fmt.Errorf("claim run: %w", err)
	}
	key := s.claimKey(o)
	// A claim a session keeps is taken back by the session (k.adopt), or lent to a
	// caller outside the sessions (s.lend); its release returns it to the session.
	var (
		kept        func()
		found, busy bool
	)
	if k != nil {
		kept, found, busy = k.adopt(key)
	} else {
		kept, found, busy = s.lend(key)
	}
	switch {
	case found:
		if err := s.ready(ctx); err != nil {
			kept() // the caller has gone: the session keeps the claim
			return nil, false, err
		}
		return kept, true, nil
	case busy, k != nil && k.heldByOther(ctx, key):
		return nil, false, s.ready(ctx)
	}
	s.heldMu.Lock()
	_, busy = s.held[key]
	s.heldMu.Unlock()
	if busy {
		return nil, false, s.ready(ctx)
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
		ss, err := s.session(ctx)
		if err != nil {
			return nil, false, fmt.Errorf("claim run %s: %w", o, err)
		}
		// The request is not cut short when ctx ends: etcd could apply a claim whose
		// caller has gone, and nobody would ever release it. It is bounded by
		// Options.RequestTimeout, and ctx is looked at once the outcome is known.
		resp, err := s.claimTxn(ctx, clientv3.Compare(clientv3.CreateRevision(key), "=", 0), key, ss)
		if errors.Is(err, rpctypes.ErrLeaseNotFound) && attempt == 0 {
			// The lease expired before its keep-alive noticed: start a new session.
			ss.stop()
			continue
		}
		if err != nil {
			// etcd may have written the claim though the request failed (no answer in
			// time, or the answer was lost): give up whatever this session holds under
			// key, so that the claim does not outlive the call that made it.
			s.abandon(key, ss.id)
			return nil, false, fmt.Errorf("claim run %s: %w", o, err)
		}
		rev := resp.Header.Revision
		if !resp.Succeeded {
			kvs := resp.Responses[0].GetResponseRange().Kvs
			if len(kvs) == 0 {
				return nil, false, nil // another store held it a moment ago
			}
			cur := kvs[0]
			free, handedOver := parseMarker(cur.Value)
			switch {
			case handedOver:
				// A run handed over by a claim session: take it if its time has come.
				if !k.mayTake(clientv3.LeaseID(cur.Lease), free, ss, time.Now()) {
					return nil, false, nil
				}
				took = k != nil
				resp, err = s.claimTxn(ctx, clientv3.Compare(clientv3.ModRevision(key), "=", cur.ModRevision), key, ss)
				if err != nil {
					s.abandon(key, ss.id)
					return nil, false, fmt.Errorf("claim run %s: %w", o, err)
				}
				if !resp.Succeeded {
					return nil, false, nil // another store took it first
				}
				rev = resp.Header.Revision
			case clientv3.LeaseID(cur.Lease) != ss.id:
				return nil, false, nil // another store holds it
			default:
				// A claim of this store's lease that no Monitor here holds: its release
				// could not reach etcd. Adopt it.
				rev = cur.ModRevision
			}
		}
		s.heldMu.Lock()
		if _, busy := s.held[key]; busy { // another Monitor here adopted it first
			s.heldMu.Unlock()
			return nil, false, nil
		}
		if s.held == nil {
			s.held = make(map[string]int64)
		}
		s.held[key] = rev
		s.heldMu.Unlock()
		var once sync.Once
		giveUp := func() { once.Do(func() { s.release(key, rev) }) }
		if err := ctx.Err(); err != nil {
			giveUp() // the caller has gone: it cannot release the claim
			return nil, false, err
		}
		if k != nil {
			keep := k.add(key, rev, ss, took)
			took = false
			if keep != nil {
				return keep, true, nil
			}
		}
		return giveUp, true, nil
	}
}

// claimTxn puts the claim under key, bound to the lease of ss, if cmp holds, and else
// reads the key. It waits at most Options.RequestTimeout, whether ctx ends or not.
func (s *Store) claimTxn(ctx context.Context, cmp clientv3.Cmp, key string, ss *session) (*clientv3.TxnResponse, error) {
	var resp *clientv3.TxnResponse
	err := s.b.rpc(context.WithoutCancel(ctx), func(ctx context.Context) (err error) {
		resp, err = s.b.client.Txn(ctx).If(cmp).
			Then(clientv3.OpPut(key, s.b.opts.Identity, clientv3.WithLease(ss.id))).
			Else(clientv3.OpGet(key)).Commit()
		return err
	})
	return resp, err
}

// ready returns ErrClosed after Close (or for the zero Store), else ctx.Err().
func (s *Store) ready(ctx context.Context) error {
	if s.Store == nil {
		return ErrClosed
	}
	return s.b.ready(ctx)
}

// claimKey is the key of the claim on the run of o: claims/ and [operations.Owner.String],
// the kind, a slash and the name. A kind holds no slash (phase.Kind.Validate), so each
// run has its own key, the same for every UID.
func (s *Store) claimKey(o operations.Owner) string {
	return s.prefix + "claims/" + o.String()
}

// abandoning marks in held a key whose claim abandon is giving up, so that no Monitor
// here adopts it meanwhile.
const abandoning = -1

// abandon deletes the claim under key if it is under lease and no Monitor of this store
// holds it: the outcome of a claim whose request failed. It waits at most
// Options.RequestTimeout for etcd; when etcd does not answer, the key stays until the
// lease expires or this store's next claim of the run adopts it.
func (s *Store) abandon(key string, lease clientv3.LeaseID) {
	s.heldMu.Lock()
	if _, busy := s.held[key]; busy {
		// A Monitor here holds the claim: the failed request did not write it.
		s.heldMu.Unlock()
		return
	}
	if s.held == nil {
		s.held = make(map[string]int64)
	}
	s.held[key] = abandoning
	s.heldMu.Unlock()
	defer s.forget(key, abandoning)
	s.deleteIf(key, clientv3.Compare(clientv3.LeaseValue(key), "=", lease))
}

// release gives up the claim under key written at rev. Only this claim: after it
// expired another store may hold a new one.
func (s *Store) release(key string, rev int64) {
	s.forget(key, rev)
	s.deleteIf(key, clientv3.Compare(clientv3.ModRevision(key), "=", rev))
}

// forget drops key from the claims held here, if it is held as rev.
func (s *Store) forget(key string, rev int64) {
	s.heldMu.Lock()
	if s.held[key] == rev {
		delete(s.held, key)
	}
	s.heldMu.Unlock()
}

// deleteIf deletes key if cmp holds, waiting at most Options.RequestTimeout for etcd;
// when etcd does not answer, the key stays (see Store.ClaimRun).
func (s *Store) deleteIf(key string, cmp clientv3.Cmp) {
	ctx, cancel := context.WithTimeout(context.Background(), s.b.opts.RequestTimeout)
	defer cancel()
	_, _ = s.b.client.Txn(ctx).If(cmp).Then(clientv3.OpDelete(key)).Commit()
}

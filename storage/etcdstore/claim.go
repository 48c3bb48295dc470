package etcdstore

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/storage/claims"
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

// ID is the lease's ID in hexadecimal.
func (ss *session) ID() string { return leaseID(ss.id) }

// Lost reports whether the lease is no longer kept alive.
func (ss *session) Lost() bool {
	select {
	case <-ss.done:
		return true
	default:
		return false
	}
}

func leaseID(id clientv3.LeaseID) string { return strconv.FormatInt(int64(id), 16) }

// session returns the store's live session, granting a lease for a new one when there
// is none or the last one was lost (with its claims).
func (s *Store) session(ctx context.Context) (*session, error) {
	s.sessMu.Lock()
	defer s.sessMu.Unlock()
	if err := s.ready(ctx); err != nil {
		return nil, err
	}
	if s.sess != nil && !s.sess.Lost() {
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
	if s.Store == nil {
		return nil, false, ErrClosed
	}
	return s.claims.ClaimRun(ctx, o)
}

// KeepClaims starts a claim session for a [github.com/itemops/itemops/operations/monitor.Monitor]
// whose Run makes a pass every interval; it makes the Store an [operations.ClaimKeeper],
// and Run calls it on its own (it finds it by a type assertion), so callers of the
// Monitor need not. A claim made by the session's ClaimRun stays with the session when
// its release function is called: the session keeps it under the store's lease, and its
// next ClaimRun of the run takes it back without a request to etcd. A replica thus holds
// its runs from pass to pass, and a pass writes to etcd only the operations and runs that
// changed. In each pass, the session's first claim reads all the claims at once; until
// the next pass, a claim of a run another store held then fails without a request (a run
// that store gives up meanwhile is claimed in the next pass). Otherwise the session's
// ClaimRun answers and fails as [Store.ClaimRun] does.
//
// The session counts itself among the replicas with a key under replicas/, bound to the
// store's lease. EndPass, called at the end of each pass with how many runs the pass
// found, balances the runs: it gives up the claims of the runs the pass did not claim
// (they ended, or another took them), counts the live sessions n, and hands over the
// claims beyond its share (runs/n, one more for the first runs%n sessions by their
// keys). A run handed over keeps its claim key, with a value that says from when another
// store may claim it: interval after the session's last poll of the run ended, so that no
// operation is polled by two replicas within one interval (the replicas' clocks must
// agree to well within the interval). The session takes a handed-over run only while it
// holds less than its share, counting the claims of such runs its Monitor is making
// (when those alone would fill the share, the claim waits for them, at most
// Options.RequestTimeout each), and takes back one of its own only an interval later
// still, or when no other replica took it for two intervals. A run no one holds goes to
// whoever claims it first, whatever the shares. EndIncompletePass, called at the end of
// a pass whose lists of runs failed, does nothing: the session keeps its claims, and
// the next EndPass balances.
//
// The session also watches the keys under replicas/. When another replica's session
// starts, the session counts the sessions again and hands over at once, during a pass or
// between two, the claims beyond its new share that no Monitor uses, those its Monitor
// released first. The replica that joined finds them in its next pass. A run handed over
// to it that it may take but that is not free yet makes it call wake at the time the run
// is free (the latest such time, when there are several), so that its Monitor makes a
// pass then: Run passes [github.com/itemops/itemops/operations/monitor.Monitor.Wake]; a
// nil wake does nothing. A replica that joins thus holds its share about an interval
// after it starts. When the watch fails, the next pass starts another; until then, and
// while etcd does not answer, a join is seen at the end of a pass.
//
// End gives up every claim the session keeps, and its hand-overs and its key under
// replicas/, in a few transactions, waiting at most [Options.RequestTimeout] for etcd;
// when etcd does not answer, they end with the store's lease. It stops the watch first,
// and waits for a hand-over under way (at most two requests). After End, the session's
// claims are given up when released, as outside a session, and wake is not called. The
// session does not end with ctx; only End ends it.
//
// KeepClaims writes the replica key, counts the claims and starts the watch (each
// request within Options.RequestTimeout, or until ctx ends); when etcd does not answer,
// the first pass makes up for them. The session is safe for concurrent use; none of its
// methods fails but ClaimRun, and EndPass returns what kept the session from writing its
// replica key, counting or watching since the last EndPass (etcd's errors), which the
// Monitor logs. On the zero Store, or after Close, the session keeps nothing, and its
// ClaimRun fails with [ErrClosed].
func (s *Store) KeepClaims(ctx context.Context, interval time.Duration, wake func()) operations.ClaimSession {
	if s.Store == nil {
		return claims.Ended(ErrClosed)
	}
	return s.claims.KeepClaims(ctx, interval, wake)
}

// TakeOverClaims ends the session of every other store under the prefix, so that the
// runs they held are free for this one at once, and returns how many it ended; it makes
// the Store an [operations.ClaimTaker], which documents when to call it. It revokes the
// lease of each store whose lease holds a key under claims/ or replicas/ (this store's
// own excepted), and etcd deletes their claims, hand-overs and replica keys with it; a
// store whose lease is revoked finds it gone at its next keep-alive or claim, and grants
// another. Without it, another store's claims end only when its lease
// expires, [Options.ClaimTTL] after its last renewal. It fails with [ErrClosed],
// [ErrUnavailable] or ctx.Err(), having revoked the leases counted; each request waits
// at most [Options.RequestTimeout].
func (s *Store) TakeOverClaims(ctx context.Context) (ended int, err error) {
	if s.Store == nil {
		return 0, ErrClosed
	}
	return s.claims.TakeOverClaims(ctx)
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

// claimBackend keeps the claims of a Store in etcd, for the claim policy of package
// storage/claims: a claim is a key under claims/, a member of the claim
// sessions a key under replicas/, each bound to the store's lease (its session); a
// version is a ModRevision in decimal.
type claimBackend struct{ s *Store }

var _ claims.Backend = claimBackend{}

func (cb claimBackend) Ready(ctx context.Context) error { return cb.s.ready(ctx) }

func (cb claimBackend) Timeout() time.Duration { return cb.s.b.opts.RequestTimeout }

func (cb claimBackend) Key(o operations.Owner) string { return cb.s.claimKey(o) }

func (cb claimBackend) Session(ctx context.Context) (claims.Session, error) {
	ss, err := cb.s.session(ctx)
	if err != nil {
		return nil, err
	}
	return ss, nil
}

// Claim puts the claim under key, bound to the lease of ss, if the key is absent (or at
// ifVersion), and else reads the key, in one transaction. It waits at most
// Options.RequestTimeout, whether ctx ends or not. A lease etcd no longer knows stops
// ss and fails with claims.ErrSessionLost.
func (cb claimBackend) Claim(ctx context.Context, key string, ss claims.Session, ifVersion string) (string, *claims.Claim, error) {
	s, es := cb.s, ss.(*session)
	cmp := clientv3.Compare(clientv3.CreateRevision(key), "=", 0)
	if ifVersion != "" {
		cmp = clientv3.Compare(clientv3.ModRevision(key), "=", revision(ifVersion))
	}
	var resp *clientv3.TxnResponse
	err := s.b.rpc(context.WithoutCancel(ctx), func(ctx context.Context) (err error) {
		resp, err = s.b.client.Txn(ctx).If(cmp).
			Then(clientv3.OpPut(key, s.b.opts.Identity, clientv3.WithLease(es.id))).
			Else(clientv3.OpGet(key)).Commit()
		return err
	})
	switch {
	case errors.Is(err, rpctypes.ErrLeaseNotFound):
		// The lease expired before its keep-alive noticed.
		es.stop()
		return "", nil, fmt.Errorf("%w: %w", claims.ErrSessionLost, err)
	case err != nil:
		return "", nil, err
	case resp.Succeeded:
		return strconv.FormatInt(resp.Header.Revision, 10), nil, nil
	}
	kvs := resp.Responses[0].GetResponseRange().Kvs
	if len(kvs) == 0 {
		return "", nil, nil
	}
	c := claimOf(kvs[0].Key, kvs[0].Value, kvs[0].Lease, kvs[0].ModRevision)
	return "", &c, nil
}

// claimOf is the claim that etcd holds under key.
func claimOf(key, value []byte, lease, modRevision int64) claims.Claim {
	free, handedOver := parseMarker(value)
	return claims.Claim{Key: string(key), Holder: leaseID(clientv3.LeaseID(lease)),
		Version: strconv.FormatInt(modRevision, 10), HandedOver: handedOver, Free: free}
}

// revision is the ModRevision of version, which this backend wrote in decimal.
func revision(version string) int64 {
	rev, _ := strconv.ParseInt(version, 10, 64)
	return rev
}

// Abandon deletes the claim under key if it is under the lease of ss, waiting at most
// Options.RequestTimeout; when etcd does not answer, the key stays (see Store.ClaimRun).
func (cb claimBackend) Abandon(key string, ss claims.Session) {
	ctx, cancel := context.WithTimeout(context.Background(), cb.s.b.opts.RequestTimeout)
	defer cancel()
	_, _ = cb.s.b.client.Txn(ctx).If(clientv3.Compare(clientv3.LeaseValue(key), "=", ss.(*session).id)).
		Then(clientv3.OpDelete(key)).Commit()
}

// Apply makes each change on the condition of its key's ModRevision, in as few
// transactions as Options.MaxTxnOps allows; a hand-over puts the marker of its time
// under the lease of its session. It waits for etcd as long as ctx lets it. A
// transaction etcd does not answer may have been applied all the same: its changes
// report no version, as changes not made do (see claims.Backend.Apply).
func (cb claimBackend) Apply(ctx context.Context, changes []claims.Change) []string {
	s := cb.s
	vers := make([]string, len(changes))
	for lo := 0; lo < len(changes); lo += s.b.opts.MaxTxnOps {
		hi := min(lo+s.b.opts.MaxTxnOps, len(changes))
		txns := make([]clientv3.Op, hi-lo)
		for i := range txns {
			ch := changes[lo+i]
			op := clientv3.OpDelete(ch.Key)
			if ch.HandOver {
				op = clientv3.OpPut(ch.Key, markerValue(ch.Free, s.b.opts.Identity), clientv3.WithLease(ch.Session.(*session).id))
			}
			cmp := clientv3.Compare(clientv3.ModRevision(ch.Key), "=", revision(ch.Version))
			txns[i] = clientv3.OpTxn([]clientv3.Cmp{cmp}, []clientv3.Op{op}, nil)
		}
		resp, err := s.b.client.Txn(ctx).Then(txns...).Commit()
		if err != nil {
			continue
		}
		for i, r := range resp.Responses {
			if r.GetResponseTxn().GetSucceeded() && changes[lo+i].HandOver {
				vers[lo+i] = strconv.FormatInt(resp.Header.Revision, 10)
			}
		}
	}
	return vers
}

// Join puts the key of a claim session under replicas/: the lease's ID and seq.
func (cb claimBackend) Join(ctx context.Context, ss claims.Session, seq int64) (string, string, error) {
	s, es := cb.s, ss.(*session)
	member := fmt.Sprintf("%sreplicas/%x-%d", s.prefix, int64(es.id), seq)
	var rev int64
	err := s.b.rpc(context.WithoutCancel(ctx), func(ctx context.Context) error {
		resp, err := s.b.client.Put(ctx, member, s.b.opts.Identity, clientv3.WithLease(es.id))
		if err == nil {
			rev = resp.Header.Revision
		}
		return err
	})
	return member, strconv.FormatInt(rev, 10), err
}

// ListClaims reads the keys under claims/.
func (cb claimBackend) ListClaims(ctx context.Context) ([]claims.Claim, error) {
	s := cb.s
	var out []claims.Claim
	err := s.b.rpc(ctx, func(ctx context.Context) error {
		resp, err := s.b.client.Get(ctx, s.prefix+"claims/", clientv3.WithPrefix())
		if err != nil {
			return err
		}
		out = make([]claims.Claim, len(resp.Kvs))
		for i, kv := range resp.Kvs {
			out[i] = claimOf(kv.Key, kv.Value, kv.Lease, kv.ModRevision)
		}
		return nil
	})
	return out, err
}

// Census counts the keys under claims/ and reads the keys under replicas/ in one
// transaction; a watch starts after its revision.
func (cb claimBackend) Census(ctx context.Context) (claims.Census, error) {
	s := cb.s
	var c claims.Census
	err := s.b.rpc(ctx, func(ctx context.Context) error {
		resp, err := s.b.client.Txn(ctx).Then(
			clientv3.OpGet(s.prefix+"claims/", clientv3.WithPrefix(), clientv3.WithCountOnly()),
			clientv3.OpGet(s.prefix+"replicas/", clientv3.WithPrefix(), clientv3.WithKeysOnly()),
		).Commit()
		if err != nil {
			return err
		}
		c.Claims = resp.Responses[0].GetResponseRange().Count
		for _, kv := range resp.Responses[1].GetResponseRange().Kvs {
			c.Members = append(c.Members, string(kv.Key))
		}
		c.From = strconv.FormatInt(resp.Header.Revision, 10)
		return nil
	})
	return c, err
}

// WatchMembers watches the keys under replicas/ after the revision from, and calls
// joined for every response that creates one. The watch ends with ctx, when etcd
// compacted the revision or the client closed, which return nil, or with etcd's error
// (a cluster that lost its leader, a watch refused).
func (cb claimBackend) WatchMembers(ctx context.Context, from string, joined func()) error {
	events := cb.s.b.client.Watch(clientv3.WithRequireLeader(ctx), cb.s.prefix+"replicas/", clientv3.WithPrefix(),
		clientv3.WithRev(revision(from)+1), clientv3.WithFilterDelete())
	for resp := range events {
		if err := resp.Err(); err != nil {
			if resp.CompactRevision != 0 {
				return nil
			}
			return fmt.Errorf("etcdstore: watch the members of the claim sessions: %w", err)
		}
		if slices.ContainsFunc(resp.Events, (*clientv3.Event).IsCreate) {
			joined()
		}
	}
	return nil
}

// EndOthers revokes the leases of the other stores' sessions, which it finds on the
// keys under claims/ and replicas/ (a store whose session holds neither has nothing to
// end), all but this store's own; etcd deletes every key bound to a lease it revokes.
// A lease etcd no longer knows (it expired meanwhile) is not counted. Each request
// waits at most Options.RequestTimeout.
func (cb claimBackend) EndOthers(ctx context.Context) (int, error) {
	s := cb.s
	own := clientv3.NoLease
	s.sessMu.Lock()
	if s.sess != nil {
		own = s.sess.id
	}
	s.sessMu.Unlock()
	others := make(map[clientv3.LeaseID]bool)
	err := s.b.rpc(ctx, func(ctx context.Context) error {
		resp, err := s.b.client.Txn(ctx).Then(
			clientv3.OpGet(s.prefix+"claims/", clientv3.WithPrefix(), clientv3.WithKeysOnly()),
			clientv3.OpGet(s.prefix+"replicas/", clientv3.WithPrefix(), clientv3.WithKeysOnly()),
		).Commit()
		if err != nil {
			return err
		}
		for _, r := range resp.Responses {
			for _, kv := range r.GetResponseRange().Kvs {
				if id := clientv3.LeaseID(kv.Lease); id != clientv3.NoLease && id != own {
					others[id] = true
				}
			}
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("etcdstore: read the other stores' sessions: %w", err)
	}
	ended := 0
	var errs []error
	for _, id := range slices.Sorted(maps.Keys(others)) {
		err := s.b.rpc(ctx, func(ctx context.Context) error {
			_, err := s.b.client.Revoke(ctx, id)
			return err
		})
		switch {
		case err == nil:
			ended++
		case errors.Is(err, rpctypes.ErrLeaseNotFound):
		case ctx.Err() != nil:
			return ended, ctx.Err()
		default:
			errs = append(errs, fmt.Errorf("etcdstore: revoke the lease %s of another store: %w", leaseID(id), err))
		}
	}
	return ended, errors.Join(errs...)
}

// markerPrefix begins the value of the claim key of a run handed over by a claim session;
// the time from which another store may claim the run follows, then the Identity of the
// store that handed it over.
const markerPrefix = "handed over, free from "

func markerValue(free time.Time, identity string) string {
	return markerPrefix + free.UTC().Format(time.RFC3339Nano) + " by " + identity
}

// parseMarker returns the time from which the run of a claim key's value v is free, and
// whether v is a hand-over at all.
func parseMarker(v []byte) (time.Time, bool) {
	rest, ok := strings.CutPrefix(string(v), markerPrefix)
	if !ok {
		return time.Time{}, false
	}
	ts, _, _ := strings.Cut(rest, " ")
	free, err := time.Parse(time.RFC3339Nano, ts)
	return free, err == nil
}

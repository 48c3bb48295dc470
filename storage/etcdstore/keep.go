package etcdstore

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// KeepClaims starts a keep session for a [github.com/itemops/itemops/operations/monitor.Monitor]
// whose Run makes a pass every interval; Run calls it on its own (it finds the method by
// a type assertion), so callers of the Monitor need not. A claim made by [Store.ClaimRun]
// under the context keep stays with the session when its release function is called:
// the session keeps it under the store's lease, and the session's next ClaimRun of the
// run takes it back without a request to etcd. A replica thus holds its runs from pass
// to pass, and a pass writes to etcd only the operations and runs that changed. In each
// pass, the session's first claim reads all the claims at once; until the next pass, a
// claim of a run another store held then fails without a request (a run that store gives
// up meanwhile is claimed in the next pass).
//
// The session counts itself among the replicas with a key under replicas/, bound to the
// store's lease. pass, called at the end of each pass with how many runs the pass found,
// balances the runs: it gives up the claims of the runs the pass did not claim (they
// ended, or another took them), counts the live sessions n, and hands over the claims
// beyond its share, runs/n rounded up. A run handed over keeps its claim key, with a value
// that says from when another store may claim it: interval after the session's last poll
// of the run ended, so that no operation is polled by two replicas within one interval
// (the replicas' clocks must agree to well within the interval). The session takes a
// handed-over run only while it holds less than its share, and takes back one of its own
// only an interval later still, or when no other replica took it for two intervals. A
// run no one holds goes to whoever claims it first, whatever the shares.
//
// end gives up every claim the session keeps, and its hand-overs and its key under
// replicas/, in a few transactions, waiting at most [Options.RequestTimeout] for etcd;
// when etcd does not answer, they end with the store's lease. After end, claims made
// under keep are given up when released, as outside a session. keep is a child of ctx;
// the session ends only by end.
//
// KeepClaims writes the replica key and counts the claims (each request within
// Options.RequestTimeout, or until ctx ends); when etcd does not answer, the first pass
// makes up for them. pass and end are safe for concurrent use; none of the three fails.
// On the zero Store, or after Close, the session keeps nothing.
func (s *Store) KeepClaims(ctx context.Context, interval time.Duration) (keep context.Context, pass func(runs int), end func()) {
	if s.Store == nil {
		return ctx, func(int) {}, func() {}
	}
	k := &keeper{s: s, interval: interval, seq: keeperSeq.Add(1), seen: -1,
		claims: make(map[string]*kept), markers: make(map[string]int64), share: -1}
	k.mu.Lock()
	k.register(ctx)
	// Until its first pass counts the runs, the session's share is that of the runs
	// claimed now: a replica that joins others takes no more than its share of what
	// they hand over.
	if claims, n, err := k.count(ctx); err == nil && claims > 0 {
		k.share = share(claims, n)
	}
	k.mu.Unlock()
	s.keepMu.Lock()
	if s.keepers == nil {
		s.keepers = make(map[*keeper]bool)
	}
	s.keepers[k] = true
	s.keepMu.Unlock()
	return context.WithValue(ctx, keepKey{}, k), k.endPass, k.end
}

// lend lends a claim that a keep session of this store keeps, and no Monitor uses, to a
// caller outside the sessions (such as Monitor.Poll while Run goes on): its release
// gives it back to the session. It reports busy when a Monitor of a session uses it.
func (s *Store) lend(key string) (release func(), ok, busy bool) {
	s.keepMu.Lock()
	defer s.keepMu.Unlock()
	for k := range s.keepers {
		if release, ok, busy := k.adopt(key); ok || busy {
			return release, ok, busy
		}
	}
	return nil, false, false
}

// keeperSeq numbers the keep sessions of this process.
var keeperSeq atomic.Int64

// keepKey is the context key under which ClaimRun finds its keep session.
type keepKey struct{}

// keeperOf returns the keep session of this store that ctx carries, or nil.
func (s *Store) keeperOf(ctx context.Context) *keeper {
	k, _ := ctx.Value(keepKey{}).(*keeper)
	if k == nil || k.s != s {
		return nil
	}
	return k
}

// A keeper is a keep session (see Store.KeepClaims). Its claims are also in the store's
// held map, so that no other Monitor of the store claims them.
type keeper struct {
	s        *Store
	interval time.Duration
	seq      int64 // its number in this process

	// mu guards the fields below; it is taken before the store's heldMu, never after.
	mu       sync.Mutex
	claims   map[string]*kept
	markers  map[string]int64 // the runs handed over: their ModRevision then
	member   string           // its key under replicas/: the lease's ID and seq
	memberSS *session         // the session whose lease holds member; nil when none
	pass     int64            // the number of the pass under way
	share    int              // the most claims to keep; -1 until a pass has counted
	ended    bool
	// others holds the claim keys that other stores held when the session last read
	// them, in the pass numbered seen: the session's claims of those runs fail without
	// a request to etcd until the next pass reads them again.
	others map[string]bool
	seen   int64
}

// kept is a claim of a keep session.
type kept struct {
	rev   int64    // the ModRevision of the claim's key
	ss    *session // the session whose lease holds it
	inUse bool     // a Monitor works on the run: between ClaimRun and release
	pass  int64    // the pass that last claimed it
	// released is when its Monitor last released it: the Monitor's last poll of the
	// run had ended then.
	released time.Time
}

// register writes the session's key under replicas/ if the store's live session does not
// hold it yet. A failure is left for the next pass to mend. k.mu is held.
func (k *keeper) register(ctx context.Context) {
	ss, err := k.s.session(ctx)
	if err != nil || ss == k.memberSS {
		return
	}
	member := fmt.Sprintf("%sreplicas/%x-%d", k.s.prefix, int64(ss.id), k.seq)
	err = k.s.b.rpc(context.WithoutCancel(ctx), func(ctx context.Context) error {
		_, err := k.s.b.client.Put(ctx, member, k.s.b.opts.Identity, clientv3.WithLease(ss.id))
		return err
	})
	if err == nil {
		k.member, k.memberSS = member, ss
	}
}

// adopt takes the kept claim under key back for a Monitor: it reports whether it did,
// and busy when the session's claim is in use already.
func (k *keeper) adopt(key string) (release func(), ok, busy bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	c := k.claims[key]
	switch {
	case c == nil || k.ended:
		return nil, false, false
	case c.inUse:
		return nil, false, true
	case c.ss.lost():
		// The lease, and the claim with it, is gone or going: claim the run anew.
		delete(k.claims, key)
		k.s.forget(key, c.rev)
		return nil, false, false
	}
	c.inUse, c.pass = true, k.pass
	return k.releaser(key, c.rev), true, false
}

// add makes a claim just made under ss the session's, in use. It returns the claim's
// release function, or nil when the session has ended.
func (k *keeper) add(key string, rev int64, ss *session) func() {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.ended {
		return nil
	}
	delete(k.markers, key)
	k.claims[key] = &kept{rev: rev, ss: ss, inUse: true, pass: k.pass}
	return k.releaser(key, rev)
}

// releaser returns the release function of the session's claim under key made at rev:
// it keeps the claim for the session, or gives it up once the session has ended.
func (k *keeper) releaser(key string, rev int64) func() {
	var once sync.Once
	return func() {
		once.Do(func() {
			k.mu.Lock()
			c := k.claims[key]
			if c == nil || c.rev != rev {
				k.mu.Unlock()
				return
			}
			if !k.ended {
				c.inUse, c.released = false, time.Now()
				k.mu.Unlock()
				return
			}
			delete(k.claims, key)
			k.mu.Unlock()
			k.s.release(key, rev)
		})
	}
}

// heldByOther reports whether another store held the claim under key when the session
// last read the claims, reading them first once in each pass (and forgetting then the
// hand-overs that others took). A read that fails reports false: ClaimRun then asks
// etcd.
func (k *keeper) heldByOther(ctx context.Context, key string) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.ended {
		return false
	}
	if k.seen != k.pass {
		ss, err := k.s.session(ctx)
		if err != nil {
			return false
		}
		s := k.s
		var (
			others  = make(map[string]bool)
			markers = make(map[string]int64) // the session's hand-overs not yet taken
		)
		err = s.b.rpc(context.WithoutCancel(ctx), func(ctx context.Context) error {
			resp, err := s.b.client.Get(ctx, s.prefix+"claims/", clientv3.WithPrefix())
			if err != nil {
				return err
			}
			for _, kv := range resp.Kvs {
				key := string(kv.Key)
				_, handedOver := parseMarker(kv.Value)
				switch {
				case !handedOver && clientv3.LeaseID(kv.Lease) != ss.id:
					others[key] = true
				case handedOver && k.markers[key] == kv.ModRevision:
					markers[key] = kv.ModRevision
				}
			}
			return nil
		})
		if err != nil {
			return false
		}
		k.others, k.markers, k.seen = others, markers, k.pass
	}
	return k.others[key]
}

// full reports whether the session holds its share of the runs or more.
func (k *keeper) full() bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.share >= 0 && len(k.claims) >= k.share
}

// mayTake reports whether the session may claim a run handed over, free from free, by the
// holder of lease.
func (k *keeper) mayTake(lease clientv3.LeaseID, free time.Time, ss *session, now time.Time) bool {
	if k == nil {
		return !now.Before(free)
	}
	if now.Before(free) {
		return false
	}
	if !now.Before(free.Add(2 * k.interval)) {
		return true // no one took it for two intervals
	}
	if lease == ss.id && now.Before(free.Add(k.interval)) {
		return false // let another replica have it first
	}
	return !k.full()
}

// endPass ends a pass of the session's Monitor, which found runs runs (see KeepClaims).
func (k *keeper) endPass(runs int) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.ended {
		return
	}
	s := k.s
	ctx, cancel := context.WithTimeout(context.Background(), s.b.opts.RequestTimeout)
	defer cancel()
	k.register(ctx)

	var give []string // claims to give up: unused this pass, or their lease lost
	for key, c := range k.claims {
		switch {
		case c.inUse:
		case c.ss.lost():
			delete(k.claims, key)
			s.forget(key, c.rev)
		case c.pass != k.pass:
			give = append(give, key)
		}
	}
	k.pass++
	_, n, err := k.count(ctx)
	var handOver []string
	if err == nil {
		k.share = share(int64(runs), n)
		if surplus := len(k.claims) - len(give) - k.share; surplus > 0 {
			var idle []string
			for key, c := range k.claims {
				if !c.inUse && c.pass == k.pass-1 {
					idle = append(idle, key)
				}
			}
			slices.Sort(idle)
			handOver = idle[max(len(idle)-surplus, 0):]
		}
	}

	var (
		cmps []clientv3.Cmp
		ops  []clientv3.Op
	)
	for _, key := range give {
		cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(key), "=", k.claims[key].rev))
		ops = append(ops, clientv3.OpDelete(key))
	}
	for _, key := range handOver {
		c := k.claims[key]
		free := markerValue(c.released.Add(k.interval), s.b.opts.Identity)
		cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(key), "=", c.rev))
		ops = append(ops, clientv3.OpPut(key, free, clientv3.WithLease(c.ss.id)))
	}
	done, rev := s.eachIf(ctx, cmps, ops)
	for i, key := range slices.Concat(give, handOver) {
		c := k.claims[key]
		delete(k.claims, key)
		s.forget(key, c.rev)
		if i >= len(give) && done[i] {
			k.markers[key] = rev[i]
		}
	}
}

// count returns how many claim keys (hand-overs included) and keep sessions the store's
// prefix holds, in one read.
func (k *keeper) count(ctx context.Context) (claims, sessions int64, err error) {
	s := k.s
	err = s.b.rpc(context.WithoutCancel(ctx), func(ctx context.Context) error {
		resp, err := s.b.client.Txn(ctx).Then(
			clientv3.OpGet(s.prefix+"claims/", clientv3.WithPrefix(), clientv3.WithCountOnly()),
			clientv3.OpGet(s.prefix+"replicas/", clientv3.WithPrefix(), clientv3.WithCountOnly()),
		).Commit()
		if err == nil {
			claims = resp.Responses[0].GetResponseRange().Count
			sessions = resp.Responses[1].GetResponseRange().Count
		}
		return err
	})
	return claims, sessions, err
}

// share is the share of runs of one of n keep sessions: runs/n rounded up.
func share(runs, n int64) int {
	n = max(n, 1)
	return int((runs + n - 1) / n)
}

// end ends the session (see KeepClaims).
func (k *keeper) end() {
	k.s.keepMu.Lock()
	delete(k.s.keepers, k)
	k.s.keepMu.Unlock()
	k.mu.Lock()
	if k.ended {
		k.mu.Unlock()
		return
	}
	k.ended = true
	s := k.s
	var (
		cmps []clientv3.Cmp
		ops  []clientv3.Op
		revs = make(map[string]int64)
	)
	for key, c := range k.claims {
		if c.inUse {
			continue // its release gives it up
		}
		delete(k.claims, key)
		revs[key] = c.rev
		cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(key), "=", c.rev))
		ops = append(ops, clientv3.OpDelete(key))
	}
	for key, rev := range k.markers {
		cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(key), "=", rev))
		ops = append(ops, clientv3.OpDelete(key))
	}
	if k.memberSS != nil {
		cmps = append(cmps, clientv3.Compare(clientv3.LeaseValue(k.member), "=", k.memberSS.id))
		ops = append(ops, clientv3.OpDelete(k.member))
	}
	k.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), s.b.opts.RequestTimeout)
	defer cancel()
	s.eachIf(ctx, cmps, ops)
	for key, rev := range revs {
		s.forget(key, rev)
	}
}

// eachIf makes each of ops on the condition of the compare of the same index, in as few
// transactions as Options.MaxTxnOps allows, and reports which were made and the
// revision of each one's transaction. It waits for etcd as long as ctx lets it; what
// etcd does not answer is reported not made.
func (s *Store) eachIf(ctx context.Context, cmps []clientv3.Cmp, ops []clientv3.Op) (done []bool, revs []int64) {
	done, revs = make([]bool, len(ops)), make([]int64, len(ops))
	for lo := 0; lo < len(ops); lo += s.b.opts.MaxTxnOps {
		hi := min(lo+s.b.opts.MaxTxnOps, len(ops))
		txns := make([]clientv3.Op, hi-lo)
		for i := range txns {
			txns[i] = clientv3.OpTxn([]clientv3.Cmp{cmps[lo+i]}, []clientv3.Op{ops[lo+i]}, nil)
		}
		resp, err := s.b.client.Txn(ctx).Then(txns...).Commit()
		if err != nil {
			continue
		}
		for i, r := range resp.Responses {
			done[lo+i] = r.GetResponseTxn().GetSucceeded()
			revs[lo+i] = resp.Header.Revision
		}
	}
	return done, revs
}

// markerPrefix begins the value of the claim key of a run handed over by a keep session;
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

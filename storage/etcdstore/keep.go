package etcdstore

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/itemops/itemops/operations"
)

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
// methods fails but ClaimRun. On the zero Store, or after Close, the session keeps
// nothing, and its ClaimRun fails with [ErrClosed].
func (s *Store) KeepClaims(ctx context.Context, interval time.Duration, wake func()) operations.ClaimSession {
	if s.Store == nil {
		return &keeper{s: s, ended: true}
	}
	if wake == nil {
		wake = func() {}
	}
	k := &keeper{s: s, interval: interval, wake: wake, seq: keeperSeq.Add(1), seen: -1,
		claims: make(map[string]*kept), markers: make(map[string]int64), share: -1, runs: -1}
	k.took = sync.NewCond(&k.mu)
	k.mu.Lock()
	k.register(ctx)
	if claims, n, rank, rev, err := k.count(ctx); err == nil {
		k.reshare(claims, n, rank)
		k.watch(rev)
	}
	k.mu.Unlock()
	s.keepMu.Lock()
	if s.keepers == nil {
		s.keepers = make(map[*keeper]bool)
	}
	s.keepers[k] = true
	s.keepMu.Unlock()
	return k
}

// lend lends a claim that a claim session of this store keeps, and no Monitor uses, to a
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

// keeperSeq numbers the claim sessions of this process.
var keeperSeq atomic.Int64

// A keeper is a claim session (see Store.KeepClaims). Its claims are also in the store's
// held map, so that no other Monitor of the store claims them.
type keeper struct {
	s        *Store
	interval time.Duration
	wake     func() // makes the Monitor's next pass start now
	seq      int64  // its number in this process

	// mu guards the fields below; it is taken before the store's heldMu, never after.
	mu       sync.Mutex
	claims   map[string]*kept
	markers  map[string]int64 // the runs handed over: their ModRevision then
	member   string           // its key under replicas/: the lease's ID and seq
	memberSS *session         // the session whose lease holds member; nil when none
	pass     int64            // the number of the pass under way
	runs     int              // the runs the last pass found; -1 before the first pass
	share    int              // the most claims to keep; -1 until a pass has counted
	ended    bool
	// taking counts the runs handed over that mayTake let the session claim and whose
	// claims are under way; took is signalled when one of them ends, taken or not.
	taking int
	took   *sync.Cond
	// watching is closed when the watch of the keys under replicas/ has ended; nil
	// when there is none. stopWatch ends it.
	watching  chan struct{}
	stopWatch context.CancelFunc
	// wakeAt is the latest time for which a wake is set, and wakeTimer its timer.
	wakeAt    time.Time
	wakeTimer *time.Timer
	// others holds the claim keys that other stores held when the session last read
	// them, in the pass numbered seen: the session's claims of those runs fail without
	// a request to etcd until the next pass reads them again.
	others map[string]bool
	seen   int64
}

// kept is a claim of a claim session.
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

// add makes a claim just made under ss the session's, in use; took says that mayTake
// allowed it. It returns the claim's release function, or nil when the session has
// ended.
func (k *keeper) add(key string, rev int64, ss *session, took bool) func() {
	k.mu.Lock()
	defer k.mu.Unlock()
	if took {
		k.taking--
		k.took.Broadcast()
	}
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

// full reports whether the session holds its share of the runs or more. k.mu is held.
func (k *keeper) full() bool {
	return k.share >= 0 && len(k.claims) >= k.share
}

// mayTake reports whether the session may claim a run handed over, free from free, by the
// holder of lease. When the run of another store is not free yet, it has the session's
// Monitor make a pass when it is. When it reports true (and k is not nil), the caller
// must end the claim with add, or with untake when it does not make it.
//
// The claims under way count toward the share: a pass claims many runs at once, and
// without them a session that joined would take every free run it found, beyond its
// share, and hand the surplus back at the end of its pass, for another replica that
// joined with it to take an interval later. When the claims under way alone would fill the
// share, mayTake waits for them (each takes at most Options.RequestTimeout): one that
// fails, another replica having taken its run first, leaves room for this run.
func (k *keeper) mayTake(lease clientv3.LeaseID, free time.Time, ss *session, now time.Time) bool {
	if k == nil {
		return !now.Before(free)
	}
	mine := lease == ss.id
	switch {
	case now.Before(free):
		if !mine {
			k.wakeFor(free)
		}
		return false
	case mine && now.Before(free.Add(k.interval)):
		return false // let another replica have it first
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if now.Before(free.Add(2 * k.interval)) { // else no one took it for two intervals
		for !k.ended && k.share >= 0 && !k.full() && k.taking > 0 && len(k.claims)+k.taking >= k.share {
			k.took.Wait()
		}
		if k.full() {
			return false
		}
	}
	k.taking++
	return true
}

// untake ends a claim that mayTake allowed and that the session did not make.
func (k *keeper) untake() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.taking--
	k.took.Broadcast()
}

// wakeFor has the session's Monitor make a pass at free, when a run handed over to the
// session becomes free, unless the session holds its share or a wake is set for free or
// later already (that pass will find this run free too).
func (k *keeper) wakeFor(free time.Time) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.ended || k.full() || !free.After(k.wakeAt) {
		return
	}
	if k.wakeTimer != nil {
		k.wakeTimer.Stop()
	}
	k.wakeAt, k.wakeTimer = free, time.AfterFunc(time.Until(free), k.wake)
}

var _ operations.ClaimSession = (*keeper)(nil)

// ClaimRun claims the run of o under the session (see Store.KeepClaims).
func (k *keeper) ClaimRun(ctx context.Context, o operations.Owner) (release func(), ok bool, err error) {
	return k.s.claim(ctx, o, k)
}

// EndPass ends a pass of the session's Monitor, which found runs runs (see KeepClaims).
func (k *keeper) EndPass(runs int) {
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
	k.runs = runs
	_, n, rank, rev, err := k.count(ctx)
	var handOver []string
	if err == nil {
		k.share = share(int64(runs), n, rank)
		handOver = k.surplus(len(give))
		k.watch(rev)
	}
	k.settle(ctx, give, handOver)
}

// EndIncompletePass ends a pass of the session's Monitor whose lists of runs failed: it
// does nothing (see KeepClaims).
func (k *keeper) EndIncompletePass() {}

// joined counts the sessions again, now that another replica has joined, and hands
// over at once the claims beyond the session's new share (see KeepClaims). Before the
// session's first pass, the share is that of the runs claimed, as in KeepClaims. When
// etcd does not answer, the next pass balances.
func (k *keeper) joined() {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.ended {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), k.s.b.opts.RequestTimeout)
	defer cancel()
	claims, n, rank, _, err := k.count(ctx)
	if err != nil {
		return
	}
	k.reshare(claims, n, rank)
	k.settle(ctx, nil, k.surplus(0))
}

// reshare sets the session's share among n sessions, at rank, of the runs its last pass
// found or, before its first pass, of the claims counted (a replica that joins others
// takes no more than its share of what they hand over). With no runs it keeps the share
// it had. k.mu is held.
func (k *keeper) reshare(claims, n, rank int64) {
	runs := int64(k.runs)
	if runs < 0 {
		runs = claims
	}
	if runs > 0 {
		k.share = share(runs, n, rank)
	}
}

// surplus returns the claims to hand over so that the session keeps no more than its
// share once it has given up give of them (none before a share is known): the claims
// of the runs the last pass or this one claimed, that no Monitor uses, those released
// first (they are free first). k.mu is held.
func (k *keeper) surplus(give int) []string {
	surplus := len(k.claims) - give - k.share
	if k.share < 0 || surplus <= 0 {
		return nil
	}
	var idle []string
	for key, c := range k.claims {
		if !c.inUse && c.pass >= k.pass-1 {
			idle = append(idle, key)
		}
	}
	slices.SortFunc(idle, func(a, b string) int {
		return cmp.Or(k.claims[a].released.Compare(k.claims[b].released), strings.Compare(a, b))
	})
	return idle[:min(surplus, len(idle))]
}

// settle gives up the claims give and hands over the claims handOver, in as few
// transactions as it can, and forgets them all. k.mu is held.
func (k *keeper) settle(ctx context.Context, give, handOver []string) {
	s := k.s
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

// watch starts watching the keys under replicas/ from revision rev+1 on, unless the
// session watches them already: a key created there (a replica that joins, or this
// one registering again) calls joined. When the watch ends otherwise than by end (etcd
// compacted the revision, lost its leader, or the client closed), the next pass starts
// another. k.mu is held.
func (k *keeper) watch(rev int64) {
	if k.watching != nil || k.ended {
		return
	}
	ctx, stop := context.WithCancel(clientv3.WithRequireLeader(context.Background()))
	done := make(chan struct{})
	k.watching, k.stopWatch = done, stop
	events := k.s.b.client.Watch(ctx, k.s.prefix+"replicas/", clientv3.WithPrefix(),
		clientv3.WithRev(rev+1), clientv3.WithFilterDelete())
	go func() {
		defer close(done)
		defer stop()
		for resp := range events {
			if slices.ContainsFunc(resp.Events, (*clientv3.Event).IsCreate) {
				k.joined()
			}
		}
		k.mu.Lock()
		if k.watching == done {
			k.watching = nil
		}
		k.mu.Unlock()
	}()
}

// count returns how many claim keys (hand-overs included) and claim sessions the store's
// prefix holds, in one read, the session's rank among the sessions (how many keys under
// replicas/ sort before its own), and the revision it read at.
func (k *keeper) count(ctx context.Context) (claims, sessions, rank, rev int64, err error) {
	s := k.s
	err = s.b.rpc(context.WithoutCancel(ctx), func(ctx context.Context) error {
		resp, err := s.b.client.Txn(ctx).Then(
			clientv3.OpGet(s.prefix+"claims/", clientv3.WithPrefix(), clientv3.WithCountOnly()),
			clientv3.OpGet(s.prefix+"replicas/", clientv3.WithPrefix(), clientv3.WithKeysOnly()),
		).Commit()
		if err == nil {
			claims = resp.Responses[0].GetResponseRange().Count
			members := resp.Responses[1].GetResponseRange().Kvs
			sessions, rank = int64(len(members)), 0
			for _, kv := range members {
				if k.member == "" || string(kv.Key) < k.member {
					rank++
				}
			}
			rev = resp.Header.Revision
		}
		return err
	})
	return claims, sessions, rank, rev, err
}

// share is the share of runs of the claim session of the given rank among n: runs/n,
// and one more for the first runs%n sessions by rank, so that the shares add up to runs
// and differ by at most one. (Each taking runs/n rounded up let one session end with
// much less: 40 runs over 6 sessions as 7, 7, 7, 7, 7 and 5.)
func share(runs, n, rank int64) int {
	n = max(n, 1)
	if rank < runs%n {
		return int(runs/n + 1)
	}
	return int(runs / n)
}

// End ends the session (see KeepClaims).
func (k *keeper) End() {
	k.s.keepMu.Lock()
	delete(k.s.keepers, k)
	k.s.keepMu.Unlock()
	k.mu.Lock()
	if k.ended {
		k.mu.Unlock()
		return
	}
	k.ended = true
	k.took.Broadcast()
	if k.wakeTimer != nil {
		k.wakeTimer.Stop()
	}
	watching, stopWatch := k.watching, k.stopWatch
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
	if watching != nil {
		// A hand-over under way finished before end took k.mu; the watch's goroutine
		// finds the session ended and calls joined no more.
		stopWatch()
		<-watching
	}
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

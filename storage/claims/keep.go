package claims

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/itemops/itemops/operations"
)

// KeepClaims starts a claim session for a Monitor whose Run makes a pass every interval
// (see [operations.ClaimKeeper]; storage/etcdstore's Store.KeepClaims documents the
// policy in full). A claim made by the session stays with it when released, and its next
// ClaimRun of the run takes it back without a request. In each pass, the session's first
// claim reads all the claims at once; until the next pass, a claim of a run another
// store held then fails without a request. The session counts itself among the members
// (one per session of every replica); EndPass gives up the claims the pass did not use
// and hands over those beyond the session's share (runs/n, one more for the first
// runs%n members by name), free an interval after the session's last poll of each. The
// session takes a handed-over run only while it holds less than its share, and one of
// its own only an interval later still, or when no other took it for two intervals. It
// watches the members, and hands over at once what a member that joins should hold.
// End gives up everything the session keeps, its member object included.
//
// KeepClaims writes the member object, counts the claims and starts the watch, each
// request within the backend's Timeout or until ctx ends; what the backend does not
// answer, the first pass makes up for; what kept it from reading or watching, the first
// EndPass returns. The session is safe for concurrent use; none of its methods fails
// but ClaimRun, and EndPass reports. When the backend is not Ready (a closed store), the
// session keeps nothing, and its ClaimRun fails as Ready does.
func (c *Claimer) KeepClaims(ctx context.Context, interval time.Duration, wake func()) operations.ClaimSession {
	if wake == nil {
		wake = func() {}
	}
	k := &keeper{c: c, interval: interval, wake: wake, seq: keeperSeq.Add(1), seen: -1,
		claims: make(map[string]*kept), markers: make(map[string]string), share: -1, runs: -1}
	k.took = sync.NewCond(&k.mu)
	if c.b.Ready(context.Background()) != nil {
		k.ended = true // a closed store: its session keeps nothing
		return k
	}
	k.mu.Lock()
	k.register(ctx)
	if census, rank, err := k.count(ctx); err == nil {
		k.reshare(census.Claims, int64(len(census.Members)), rank)
		k.watch(census.From)
	}
	k.mu.Unlock()
	c.keepMu.Lock()
	c.keepers[k] = true
	c.keepMu.Unlock()
	if c.b.Ready(context.Background()) != nil {
		k.end(false) // the store closed meanwhile, and its Close may have missed k
	}
	return k
}

// Ended returns a claim session that keeps nothing, whose ClaimRun fails with err: the
// session of a store that has no Claimer (the zero Store).
func Ended(err error) operations.ClaimSession { return ended{err} }

type ended struct{ err error }

func (e ended) ClaimRun(context.Context, operations.Owner) (func(), bool, error) {
	return nil, false, e.err
}
func (ended) EndPass(int) error  { return nil }
func (ended) EndIncompletePass() {}
func (ended) End()               {}

// keeperSeq numbers the claim sessions of this process.
var keeperSeq atomic.Int64

// A keeper is a claim session (see Claimer.KeepClaims). Its claims are also in the
// Claimer's held map, so that no other Monitor of the store claims them.
type keeper struct {
	c        *Claimer
	interval time.Duration
	wake     func() // makes the Monitor's next pass start now
	seq      int64  // its number in this process

	// mu guards the fields below; it is taken before the Claimer's heldMu, never after.
	mu        sync.Mutex
	claims    map[string]*kept
	markers   map[string]string // the runs handed over: their version then
	member    string            // the name of its member object
	memberVer string            // the version of its member object
	memberSS  Session           // the session that holds member; nil when none
	pass      int64             // the number of the pass under way
	runs      int               // the runs the last pass found; -1 before the first pass
	share     int               // the most claims to keep; -1 until a pass has counted
	ended     bool
	// taking counts the runs handed over that mayTake let the session claim and whose
	// claims are under way; took is signalled when one of them ends, taken or not.
	taking int
	took   *sync.Cond
	// watching is closed when the watch of the members has ended; nil when there is
	// none. stopWatch ends it.
	watching  chan struct{}
	stopWatch context.CancelFunc
	// wakeAt is the latest time for which a wake is set, and wakeTimer its timer.
	wakeAt    time.Time
	wakeTimer *time.Timer
	// others holds the claim keys that other stores held when the session last read
	// them, in the pass numbered seen: the session's claims of those runs fail without
	// a request until the next pass reads them again.
	others map[string]bool
	seen   int64
	// failures are what kept the session from reading the claims or the members, or
	// from watching the members, since the last EndPass, which returns them: the first
	// failure of each thing it could not do (KeepClaims and EndPass both join and count).
	failures []error
	failedAt map[string]bool // what the failures are of
}

// kept is a claim of a claim session.
type kept struct {
	ver   string  // the version of the claim
	ss    Session // the session that holds it
	inUse bool    // a Monitor works on the run: between ClaimRun and release
	pass  int64   // the pass that last claimed it
	// released is when its Monitor last released it: the Monitor's last poll of the
	// run had ended then.
	released time.Time
}

// register writes the session's member object if the store's live session does not
// hold it yet. A failure is left for the next pass to mend, and EndPass reports it.
// k.mu is held.
func (k *keeper) register(ctx context.Context) {
	ss, err := k.c.b.Session(ctx)
	if err != nil || ss == k.memberSS {
		return
	}
	member, ver, err := k.c.b.Join(ctx, ss, k.seq)
	if err != nil {
		k.fail("join the claim sessions", err)
	} else {
		k.member, k.memberVer, k.memberSS = member, ver, ss
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
	case c.ss.Lost():
		// The session, and the claim with it, is gone or going: claim the run anew.
		delete(k.claims, key)
		k.c.forget(key, c.ver)
		return nil, false, false
	}
	c.inUse, c.pass = true, k.pass
	return k.releaser(key, c.ver), true, false
}

// add makes a claim just made under ss the session's, in use; took says that mayTake
// allowed it. It returns the claim's release function, or nil when the session has
// ended.
func (k *keeper) add(key, ver string, ss Session, took bool) func() {
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
	k.claims[key] = &kept{ver: ver, ss: ss, inUse: true, pass: k.pass}
	return k.releaser(key, ver)
}

// releaser returns the release function of the session's claim under key made at ver:
// it keeps the claim for the session, or gives it up once the session has ended.
func (k *keeper) releaser(key, ver string) func() {
	var once sync.Once
	return func() {
		once.Do(func() {
			k.mu.Lock()
			c := k.claims[key]
			if c == nil || c.ver != ver {
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
			k.c.release(key, ver)
		})
	}
}

// heldByOther reports whether another store held the claim under key when the session
// last read the claims, reading them first once in each pass (and forgetting then the
// hand-overs that others took). A read that fails is not tried again in the pass, whose
// claims then all report false, so that ClaimRun asks the backend for each: a backend
// that refuses or does not answer costs one read a pass, not one a run.
func (k *keeper) heldByOther(ctx context.Context, key string) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.ended {
		return false
	}
	if k.seen != k.pass {
		ss, err := k.c.b.Session(ctx)
		if err != nil {
			return false
		}
		all, err := k.c.b.ListClaims(context.WithoutCancel(ctx))
		if err != nil {
			k.fail("read the claims", err)
			k.others, k.seen = nil, k.pass
			return false
		}
		var (
			others  = make(map[string]bool)
			markers = make(map[string]string) // the session's hand-overs not yet taken
		)
		for _, cl := range all {
			switch {
			case !cl.HandedOver && cl.Holder != ss.ID():
				others[cl.Key] = true
			case cl.HandedOver && k.markers[cl.Key] == cl.Version:
				markers[cl.Key] = cl.Version
			}
		}
		k.others, k.markers, k.seen = others, markers, k.pass
	}
	return k.others[key]
}

// forgetOthers drops what the session read of the claims of other stores, so that
// its next claim reads them again (their holders' sessions were ended).
func (k *keeper) forgetOthers() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.others, k.seen = nil, -1
}

// full reports whether the session holds its share of the runs or more. k.mu is held.
func (k *keeper) full() bool {
	return k.share >= 0 && len(k.claims) >= k.share
}

// mayTake reports whether the session may claim a run handed over, free from free, by the
// holder session holder. When the run of another store is not free yet, it has the
// session's Monitor make a pass when it is. When it reports true (and k is not nil), the
// caller must end the claim with add, or with untake when it does not make it.
//
// The claims under way count toward the share: a pass claims many runs at once, and
// without them a session that joined would take every free run it found, beyond its
// share, and hand the surplus back at the end of its pass, for another replica that
// joined with it to take an interval later. When the claims under way alone would fill the
// share, mayTake waits for them (each takes at most the backend's Timeout): one that
// fails, another replica having taken its run first, leaves room for this run.
func (k *keeper) mayTake(holder string, free time.Time, ss Session, now time.Time) bool {
	if k == nil {
		return !now.Before(free)
	}
	mine := holder == ss.ID()
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
	// Two intervals are added one at a time: time.Time.Add saturates, and 2*k.interval
	// would wrap around for the longest Duration, so that the run would be taken at once.
	if now.Before(free.Add(k.interval).Add(k.interval)) { // else no one took it for two intervals
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

// ClaimRun claims the run of o under the session (see Claimer.KeepClaims).
func (k *keeper) ClaimRun(ctx context.Context, o operations.Owner) (release func(), ok bool, err error) {
	return k.c.claim(ctx, o, k)
}

// EndPass ends a pass of the session's Monitor, which found runs runs (see KeepClaims),
// and returns what kept the session from reading or watching the claims and members
// since the last EndPass ([operations.ClaimSession]).
func (k *keeper) EndPass(runs int) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.ended {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), k.c.b.Timeout())
	defer cancel()
	k.register(ctx)

	var give []string // claims to give up: unused this pass, or their session lost
	for key, c := range k.claims {
		switch {
		case c.inUse:
		case c.ss.Lost():
			delete(k.claims, key)
			k.c.forget(key, c.ver)
		case c.pass != k.pass:
			give = append(give, key)
		}
	}
	k.pass++
	k.runs = runs
	census, rank, err := k.count(ctx)
	var handOver []string
	if err == nil {
		k.share = shareOf(int64(runs), int64(len(census.Members)), rank)
		handOver = k.surplus(len(give))
		k.watch(census.From)
	}
	k.settle(ctx, give, handOver)
	err = errors.Join(k.failures...)
	k.failures, k.failedAt = nil, nil
	return err
}

// fail keeps err, which kept the session from doing what, for EndPass to return,
// unless it keeps an error of what already. k.mu is held.
func (k *keeper) fail(what string, err error) {
	if k.failedAt[what] {
		return
	}
	if k.failedAt == nil {
		k.failedAt = make(map[string]bool)
	}
	k.failedAt[what] = true
	k.failures = append(k.failures, fmt.Errorf("claims: %s: %w", what, err))
}

// EndIncompletePass ends a pass of the session's Monitor whose lists of runs failed: it
// does nothing (see KeepClaims).
func (k *keeper) EndIncompletePass() {}

// joined counts the members again, now that another has joined, and hands over at once
// the claims beyond the session's new share (see KeepClaims). Before the session's first
// pass, the share is that of the runs claimed, as in KeepClaims. When the backend does
// not answer, the next pass balances.
func (k *keeper) joined() {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.ended {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), k.c.b.Timeout())
	defer cancel()
	census, rank, err := k.count(ctx)
	if err != nil {
		return
	}
	k.reshare(census.Claims, int64(len(census.Members)), rank)
	k.settle(ctx, nil, k.surplus(0))
}

// reshare sets the session's share among n members, at rank, of the runs its last pass
// found or, before its first pass, of the claims counted (a replica that joins others
// takes no more than its share of what they hand over). With no runs it keeps the share
// it had. k.mu is held.
func (k *keeper) reshare(claims, n, rank int64) {
	runs := int64(k.runs)
	if runs < 0 {
		runs = claims
	}
	if runs > 0 {
		k.share = shareOf(runs, n, rank)
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

// settle gives up the claims give and hands over the claims handOver, in one Apply, and
// forgets them all. k.mu is held.
func (k *keeper) settle(ctx context.Context, give, handOver []string) {
	if len(give)+len(handOver) == 0 {
		return
	}
	changes := make([]Change, 0, len(give)+len(handOver))
	for _, key := range give {
		changes = append(changes, Change{Key: key, Version: k.claims[key].ver})
	}
	for _, key := range handOver {
		c := k.claims[key]
		changes = append(changes, Change{Key: key, Version: c.ver, HandOver: true, Free: c.released.Add(k.interval), Session: c.ss})
	}
	vers := k.c.b.Apply(ctx, changes)
	for i, ch := range changes {
		delete(k.claims, ch.Key)
		k.c.forget(ch.Key, ch.Version)
		if ch.HandOver && vers[i] != "" {
			k.markers[ch.Key] = vers[i]
		}
	}
}

// watch starts watching the members from the point from on, unless the session watches
// them already: a member created (a replica that joins, or this one registering again)
// calls joined. When the watch ends otherwise than by End, the next pass starts
// another. k.mu is held.
func (k *keeper) watch(from string) {
	if k.watching != nil || k.ended {
		return
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	k.watching, k.stopWatch = done, stop
	go func() {
		defer close(done)
		defer stop()
		err := k.c.b.WatchMembers(ctx, from, k.joined)
		k.mu.Lock()
		if k.watching == done {
			k.watching = nil
		}
		if err != nil && ctx.Err() == nil && !k.ended {
			k.fail("watch the members", err)
		}
		k.mu.Unlock()
	}()
}

// count reads the census of claims and members, and the session's rank among the
// members: how many names sort before its own.
func (k *keeper) count(ctx context.Context) (census Census, rank int64, err error) {
	census, err = k.c.b.Census(context.WithoutCancel(ctx))
	if err != nil {
		k.fail("count the claims and members", err)
		return Census{}, 0, err
	}
	for _, m := range census.Members {
		if k.member == "" || m < k.member {
			rank++
		}
	}
	return census, rank, nil
}

// shareOf is the share of runs of the claim session of the given rank among n: runs/n,
// and one more for the first runs%n sessions by rank, so that the shares add up to runs
// and differ by at most one. (Each taking runs/n rounded up let one session end with
// much less: 40 runs over 6 sessions as 7, 7, 7, 7, 7 and 5.)
func shareOf(runs, n, rank int64) int {
	n = max(n, 1)
	if rank < runs%n {
		return int(runs/n + 1)
	}
	return int(runs / n)
}

// End ends the session (see KeepClaims).
func (k *keeper) End() { k.end(true) }

// Close ends every claim session of c that has not ended, as End does but without a
// request: its store calls it as it closes, having given up, or about to give up, all
// that its sessions keep (their claims, hand-overs and members are bound to the store's
// session). It waits for the sessions' watches of the members to end, so that no
// session outlives its store, whether or not its Monitor ended it: a Monitor that makes
// its passes with RunOnce and whose Close was never called, in particular.
func (c *Claimer) Close() {
	if c == nil {
		return // the zero Store's
	}
	c.keepMu.Lock()
	keepers := make([]*keeper, 0, len(c.keepers))
	for k := range c.keepers {
		keepers = append(keepers, k)
	}
	c.keepMu.Unlock()
	for _, k := range keepers {
		k.end(false)
	}
}

// end ends the session; with give, it gives up what the session keeps, waiting for the
// backend at most its Timeout, and otherwise only forgets it (see Claimer.Close).
func (k *keeper) end(give bool) {
	k.c.keepMu.Lock()
	delete(k.c.keepers, k)
	k.c.keepMu.Unlock()
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
	var changes []Change
	for key, c := range k.claims {
		if c.inUse {
			continue // its release gives it up
		}
		delete(k.claims, key)
		changes = append(changes, Change{Key: key, Version: c.ver})
	}
	for key, ver := range k.markers {
		changes = append(changes, Change{Key: key, Version: ver})
	}
	if k.memberSS != nil {
		changes = append(changes, Change{Key: k.member, Version: k.memberVer})
	}
	k.mu.Unlock()
	if watching != nil {
		// A hand-over under way finished before End took k.mu; the watch's goroutine
		// finds the session ended and calls joined no more.
		stopWatch()
		<-watching
	}
	if give {
		ctx, cancel := context.WithTimeout(context.Background(), k.c.b.Timeout())
		defer cancel()
		k.c.b.Apply(ctx, changes)
	}
	for _, ch := range changes {
		k.c.forget(ch.Key, ch.Version)
	}
}

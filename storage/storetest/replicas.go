package storetest

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/operations/monitor"
	"github.com/itemops/itemops/phase"
)

// Replicas is what [RunReplicas] needs of a store that several replicas share: the
// stores of the replicas, one per process as it were, and ways to look at and break
// what they share. Each check gets a Replicas of its own, on a shared store that is
// empty.
type Replicas struct {
	// Open opens the store of the replica called name, with a client of its own, on
	// the shared store, and registers its cleanup. name is the replica's identity in
	// the claims (the Identity option of storage/etcdstore and storage/kubestore). Its
	// claims must end by themselves a second or two after it stops renewing them, so
	// that the checks of a replica that dies end soon.
	Open func(name string) operations.Store
	// Kill makes the replica called name die, as its process would: from then on its
	// store reaches nothing, and so neither renews nor gives up its claims.
	Kill func(name string)
	// Expire ends, behind the back of the replica called name, what keeps its claims
	// alive, as the backend does when the replica could not renew it in time (etcd
	// revokes its lease; on Kubernetes another replica deletes its session's Lease).
	Expire func(name string)
	// Holdings reads the claims of the shared store: one Holding per run claimed.
	Holdings func() []Holding
	// Members reads the names of the replicas whose claim sessions (one per Run of a
	// Monitor) are registered in the shared store, one entry per session.
	Members func() []string
	// Interval is the interval of the Monitors of ShareRunsEvenly, which times the
	// joins of replicas by the passes of one of them: it should be long next to a pass
	// of a Monitor over 40 runs on the backend (a pass of 32 workers over 20 runs of 2
	// operations each). Zero means 400 ms.
	Interval time.Duration
}

// A Holding is a claim of a run in a shared store, as [Replicas.Holdings] reads it.
type Holding struct {
	Replica    string // the name of the replica that holds it, or handed it over
	HandedOver bool   // the replica handed the run over, and no other has taken it yet
}

// RunReplicas checks a store that several replicas share, through Monitors that run on
// the stores of several replicas at once, as [operations.RunClaimer] and
// [operations.ClaimKeeper] promise (storage/etcdstore and storage/kubestore run it):
//
//   - ShareRunsEvenly: the Runs of two replicas, then three, four, and six (two joining
//     at once) come to hold within ±20% of their share of the runs each, every run held;
//     the replicas that join hold their share before the first replica has started two
//     passes since they started; no operation is polled by two replicas within one
//     interval; when the Runs stop, no claim and no claim session is left.
//   - DeadReplicaLosesRuns: of two replicas, one dies while it polls; the other, which
//     found the runs held, takes them over once the dead one's claims end, and finishes
//     every run, each phase once; no run is polled by two Monitors at the same moment.
//   - StoppedPassLeavesNoClaim: a pass of a Monitor (RunOnce) stopped at a random moment
//     leaves no claim of its replica, so that another replica's pass skips no run.
//   - StoppedRunLeavesNoClaim: the Run of a Monitor stopped at a random moment, while
//     another replica's Run goes on, leaves no claim, hand-over or claim session of its
//     replica, and the other comes to hold every run.
//   - ClaimAfterSessionLost: a replica whose claims' liveness ended behind its back
//     claims the run again, and then holds it against another.
//   - TakeOverClaims: a replica that is an [operations.ClaimTaker] takes over the runs
//     that another, alive, holds, through claims and a claim session: the takeover
//     ends one session, leaves no claim or member behind, and the taker then claims
//     every run at once; the other gives up what it believed it held, which undoes
//     none of the taker's claims, and then finds each run held.
//
// The checks take seconds each, and DeadReplicaLosesRuns waits for the claims of a dead
// replica to end; with -short ([testing.Short]) ShareRunsEvenly is skipped. newReplicas
// is called once per check.
func RunReplicas[T TB[T]](t T, newReplicas func(t T) Replicas) {
	t.Helper()
	for _, c := range []struct {
		name string
		run  func(t tb, r Replicas)
	}{
		{"ShareRunsEvenly", testShareRunsEvenly},
		{"DeadReplicaLosesRuns", testDeadReplicaLosesRuns},
		{"StoppedPassLeavesNoClaim", testStoppedPassLeavesNoClaim},
		{"StoppedRunLeavesNoClaim", testStoppedRunLeavesNoClaim},
		{"ClaimAfterSessionLost", testClaimAfterSessionLost},
		{"TakeOverClaims", testTakeOverClaims},
	} {
		t.Run(c.name, func(t T) { c.run(wrap(t), newReplicas(t)) })
	}
}

// seedWaiting creates runs waiting for perRun New operations each, named backup-00 on,
// created now, so that no operation times out while the checks run.
func seedWaiting(t tb, s operations.Store, runs, perRun int) []operations.Owner {
	t.Helper()
	owners := make([]operations.Owner, runs)
	now := time.Now()
	for i := range owners {
		o := backup(fmt.Sprintf("backup-%02d", i))
		r := operations.Run{Owner: o, Phase: phase.New, Created: now}
		noError(t, r.SetPhase(phase.WaitingForPluginOperations, "seeded", now), "fixture: SetPhase of %s", o)
		mustCreate(t, s, r)
		ops := make([]operations.Operation, perRun)
		for j := range ops {
			ops[j] = operations.Operation{Owner: o, Action: "mover", ID: fmt.Sprintf("op-%03d", j),
				Status: operations.Status{Phase: operations.OperationNew, Created: now}}
		}
		mustPut(t, s, o, ops)
		owners[i] = o
	}
	return owners
}

// held counts the claims of holdings by replica, those handed over under "".
func held(holdings []Holding) map[string]int {
	out := make(map[string]int)
	for _, h := range holdings {
		if h.HandedOver {
			out[""]++
		} else {
			out[h.Replica]++
		}
	}
	return out
}

// of returns the claims of holdings that replica holds or handed over.
func of(holdings []Holding, replica string) []Holding {
	var out []Holding
	for _, h := range holdings {
		if h.Replica == replica {
			out = append(out, h)
		}
	}
	return out
}

// foreverTracker reports every operation a tenth done, forever; with onPoll, it tells
// which replica polled which operation, when.
type foreverTracker struct {
	replica string
	log     *pollLog
}

func (tr foreverTracker) Progress(_ context.Context, op operations.Operation) (operations.Progress, error) {
	if tr.log != nil {
		tr.log.add(tr.replica, op)
	}
	return operations.Progress{NCompleted: 1, NTotal: 10, OperationUnits: "Bytes"}, nil
}

func (foreverTracker) Cancel(context.Context, operations.Operation) error { return nil }

func (tr foreverTracker) resolver() operations.Resolver {
	return operations.ResolverFunc(func(string) (operations.Tracker, error) { return tr, nil })
}

// pollLog records every Progress call of several replicas.
type pollLog struct {
	mu     sync.Mutex
	calls  map[string][]poll    // by run/operation
	onPoll func(replica string) // when not nil, called at every Progress call
}

type poll struct {
	replica string
	at      time.Time
}

func (l *pollLog) add(replica string, op operations.Operation) {
	l.mu.Lock()
	key := op.Owner.String() + "/" + op.ID
	l.calls[key] = append(l.calls[key], poll{replica, time.Now()})
	l.mu.Unlock()
	if l.onPoll != nil {
		l.onPoll(replica)
	}
}

// duplicates returns the polls of an operation by a replica less than within after
// another replica polled it.
func (l *pollLog) duplicates(within time.Duration) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for key, calls := range l.calls {
		for i := 1; i < len(calls); i++ {
			prev, p := calls[i-1], calls[i]
			if p.replica != prev.replica && p.at.Sub(prev.at) < within {
				out = append(out, fmt.Sprintf("%s: %s polled it %s after %s", key, p.replica, p.at.Sub(prev.at), prev.replica))
			}
		}
	}
	slices.Sort(out)
	return out
}

// testShareRunsEvenly runs the Monitors of two replicas over 40 runs, then has a third
// join them, then a fourth, then a fifth and a sixth at once, and checks the shares each
// time. The join is timed by the passes of replica a, each of which starts an interval
// after the last one ended: the join starts as a pass of a ends, and the new replicas
// must hold their share before a starts its second pass since (two intervals and one
// pass of a). It logs how long each balance took, in intervals.
func testShareRunsEvenly(t tb, r Replicas) {
	// The interval is long next to a pass, whose 32 workers poll all of a replica's runs
	// at once, so that a's passes count intervals closely.
	if testing.Short() {
		t.Skip("runs six replicas for several seconds (-short)")
	}
	const (
		runs, perRun = 40, 2
		workers      = 32
	)
	interval := cmp.Or(r.Interval, 400*time.Millisecond)
	seedWaiting(t, r.Open("seed"), runs, perRun)
	log := &pollLog{calls: make(map[string][]poll)}
	var (
		wg   sync.WaitGroup
		errs = make(chan error, 6)
	)
	ctx, cancel := context.WithCancel(bg)
	defer func() { cancel(); wg.Wait() }()
	open := func(name string, opts ...monitor.Option) (run func()) {
		s := r.Open(name)
		opts = append([]monitor.Option{monitor.WithInterval(interval), monitor.WithWorkers(workers)}, opts...)
		m := monitor.New(s, foreverTracker{name, log}.resolver(), opts...)
		return func() {
			wg.Add(1)
			go func() { defer wg.Done(); errs <- m.Run(ctx) }()
		}
	}
	balanced := func(names ...string) {
		t.Helper()
		began := time.Now()
		share := float64(runs) / float64(len(names))
		var last map[string]int
		ok := func() bool {
			last = held(r.Holdings())
			total := 0
			for _, name := range names {
				n := float64(last[name])
				if n < 0.8*share || n > 1.2*share {
					return false
				}
				total += last[name]
			}
			return total == runs
		}
		for !ok() {
			if time.Since(began) > time.Minute {
				t.Fatalf("no balance among %v a minute after the last joined: the runs held, by replica (\"\" for handed over), are %v", names, last)
			}
			time.Sleep(interval / 10)
		}
		t.Logf("%d replicas balanced after %s (%.1f intervals): %v", len(names), time.Since(began).Round(time.Millisecond),
			float64(time.Since(began))/float64(interval), last)
	}

	var (
		aStarts  atomic.Int64
		aBetween atomic.Bool // a has ended a pass and not polled since
		aPassed  = make(chan struct{}, 1)
	)
	log.onPoll = func(replica string) {
		if replica == "a" && aBetween.Swap(false) {
			aStarts.Add(1)
		}
	}
	open("a", monitor.WithObserver(monitor.Observer{Pass: func(monitor.PassStats) {
		aBetween.Store(true)
		select {
		case aPassed <- struct{}{}:
		default:
		}
	}}))()
	open("b")()
	names := []string{"a", "b"}
	balanced(names...)
	for _, joining := range [][]string{{"c"}, {"d"}, {"e", "f"}} {
		var start []func()
		for _, name := range joining {
			start = append(start, open(name))
		}
		select {
		case <-aPassed: // a pass of a that ended earlier
		default:
		}
		<-aPassed
		before := aStarts.Load()
		for _, run := range start {
			run()
		}
		names = append(names, joining...)
		balanced(names...)
		passes := aStarts.Load() - before
		t.Logf("%v held their share when a had started %d passes since they started", joining, passes)
		if passes >= 2 {
			t.Errorf("%v, joining, held their share when a had started %d passes since they started, want at most 1", joining, passes)
		}
	}
	time.Sleep(3 * interval)
	balanced(names...)

	cancel()
	wg.Wait()
	close(errs)
	for err := range errs {
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Run returned %v, want context.Canceled", err)
		}
	}
	if d := log.duplicates(interval); len(d) > 0 {
		t.Errorf("operations polled by two replicas within one interval:\n%v", d)
	}
	if h := r.Holdings(); len(h) > 0 {
		t.Errorf("claims left after every Run returned: %v", h)
	}
	if m := r.Members(); len(m) > 0 {
		t.Errorf("claim sessions left after every Run returned: %v", m)
	}
	log.mu.Lock()
	defer log.mu.Unlock()
	if len(log.calls) != runs*perRun {
		t.Errorf("the replicas polled %d operations, want %d", len(log.calls), runs*perRun)
	}
}

// recorder is shared by the trackers of several Monitors. An operation completes on its
// second Progress call, whichever Monitor makes it; the recorder notes which Monitor
// polled which run, and any moment two Monitors polled one run at once.
type recorder struct {
	mu        sync.Mutex                // guards the fields below
	calls     map[string]int            // Progress calls per operation (run/id)
	inflight  map[string]map[string]int // run → Monitor → calls in flight
	polled    map[string]map[string]bool
	byMonitor map[string]int
	overlaps  []string
}

// completing is one Monitor's view of the recorder. onCall, when set, runs inside every
// Progress call with the number of calls this Monitor has made.
type completing struct {
	r      *recorder
	name   string
	onCall func(op operations.Operation, n int)
}

func (tr completing) Progress(_ context.Context, op operations.Operation) (operations.Progress, error) {
	r, run := tr.r, op.Owner.String()
	r.mu.Lock()
	for other, n := range r.inflight[run] {
		if other != tr.name && n > 0 {
			r.overlaps = append(r.overlaps, fmt.Sprintf("%s polled %s while %s was polling it", tr.name, run, other))
		}
	}
	if r.inflight[run] == nil {
		r.inflight[run], r.polled[run] = map[string]int{}, map[string]bool{}
	}
	r.inflight[run][tr.name]++
	r.polled[run][tr.name] = true
	r.calls[run+"/"+op.ID]++
	n := r.calls[run+"/"+op.ID]
	r.byMonitor[tr.name]++
	mine := r.byMonitor[tr.name]
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		r.inflight[run][tr.name]--
		r.mu.Unlock()
	}()
	if tr.onCall != nil {
		tr.onCall(op, mine)
	}
	p := operations.Progress{NCompleted: 1, NTotal: 2, OperationUnits: "Bytes", Started: base}
	if n >= 2 {
		p.Completed, p.NCompleted = true, 2
	}
	return p, nil
}

func (completing) Cancel(context.Context, operations.Operation) error { return nil }

func (tr completing) resolver() operations.Resolver {
	return operations.ResolverFunc(func(string) (operations.Tracker, error) { return tr, nil })
}

// testDeadReplicaLosesRuns runs two Monitors over 1,000 operations in 20 runs. Replica a
// starts first and claims every run in its first pass; b starts while that pass goes
// on, and finds the runs held. Midway through the pass a dies while it polls (Kill);
// b takes its runs over once a's claims end, and finishes everything.
func testDeadReplicaLosesRuns(t tb, r Replicas) {
	const (
		runs, perRun = 20, 50
		startBAt     = 50  // a's Progress calls before b starts
		killAt       = 150 // a's Progress calls before it dies
	)
	a, b := r.Open("a"), r.Open("b")
	owners := seedWaiting(t, b, runs, perRun)
	rec := &recorder{calls: map[string]int{}, inflight: map[string]map[string]int{}, polled: map[string]map[string]bool{}, byMonitor: map[string]int{}}
	ctxA, stopA := context.WithCancel(bg)
	ctxB, stopB := context.WithCancel(bg)
	defer stopA()
	defer stopB()
	var (
		startB, died = make(chan struct{}), make(chan struct{})
		deadRun      string
	)
	trA := completing{r: rec, name: "a", onCall: func(op operations.Operation, n int) {
		switch n {
		case startBAt:
			close(startB)
		case killAt:
			deadRun = op.Owner.String()
			// The process dies: its connection goes, then its goroutines.
			r.Kill("a")
			stopA()
			close(died)
		}
	}}
	var skipped atomic.Int64
	mopts := []monitor.Option{monitor.WithInterval(20 * time.Millisecond), monitor.WithWorkers(8),
		monitor.WithObserver(monitor.Observer{Pass: func(st monitor.PassStats) { skipped.Add(int64(st.Skipped)) }})}
	ma := monitor.New(a, trA.resolver(), mopts...)
	mb := monitor.New(b, completing{r: rec, name: "b"}.resolver(), mopts...)
	var wg sync.WaitGroup
	errs := make([]error, 2)
	wg.Add(2)
	go func() { defer wg.Done(); errs[0] = ma.Run(ctxA) }()
	<-startB
	go func() { defer wg.Done(); errs[1] = mb.Run(ctxB) }()

	<-died
	for began := time.Now(); ; time.Sleep(50 * time.Millisecond) {
		done, err := b.ListRuns(bg, operations.RunFilter{Phases: []phase.Phase{phase.Completed}})
		if err == nil && len(done) == runs {
			break
		}
		if time.Since(began) > 3*time.Minute {
			t.Fatalf("%d of %d runs Completed 3 minutes after a died (last error %v)", len(done), runs, err)
		}
	}
	stopB()
	wg.Wait()
	for i, err := range errs {
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Run of monitor %d returned %v, want context.Canceled", i, err)
		}
	}

	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.overlaps) > 0 {
		t.Errorf("moments two Monitors polled one run: %v", rec.overlaps)
	}
	if !rec.polled[deadRun]["b"] {
		t.Errorf("b did not take over %s, which a was polling when it died", deadRun)
	}
	for key, n := range rec.calls {
		if n < 2 {
			t.Errorf("%s was polled %d times, want 2 or more", key, n)
		}
	}
	if len(rec.calls) != runs*perRun {
		t.Errorf("%d operations polled, want %d", len(rec.calls), runs*perRun)
	}
	if skipped.Load() == 0 {
		t.Errorf("no pass skipped a run that the other Monitor held")
	}
	want := []phase.Phase{phase.InProgress, phase.WaitingForPluginOperations, phase.Finalizing, phase.Completed}
	for _, o := range owners {
		run, err := b.GetRun(bg, o)
		noError(t, err, "GetRun(%s)", o)
		var got []phase.Phase
		for _, h := range run.History {
			got = append(got, h.To)
		}
		if d := diff(want, got); d != "" {
			t.Errorf("phases %s entered, in order (-want +got):\n%s", o, d)
		}
	}
}

// testStoppedPassLeavesNoClaim stops a pass of replica a's Monitor at random moments, 120
// times, while its store stays open (a replica that lost leader election, or a caller
// cancelling RunOnce). After each stop no claim of a is left, and a pass of replica b
// polls every run: none is skipped as held. A claim whose request the stop interrupted
// after the backend had written it is the case this guards.
func testStoppedPassLeavesNoClaim(t tb, r Replicas) {
	const runs, perRun, tries = 10, 3, 120
	a, b := r.Open("a"), r.Open("b")
	seedWaiting(t, b, runs, perRun)
	resolver := foreverTracker{}.resolver()
	ma := monitor.New(a, resolver, monitor.WithWorkers(4))
	mb := monitor.New(b, resolver, monitor.WithWorkers(4))
	// The stops land anywhere in a pass, claims and releases included: at a random
	// moment up to the length of a whole pass, measured here.
	start := time.Now()
	_, err := ma.RunOnce(bg)
	noError(t, err, "RunOnce of a")
	pass := time.Since(start)
	interrupted := 0
	for i := range tries {
		ctx, cancel := context.WithCancel(bg)
		stop := time.AfterFunc(rand.N(pass), cancel)
		_, err := ma.RunOnce(ctx)
		stop.Stop()
		cancel()
		if errors.Is(err, context.Canceled) {
			interrupted++
		}
		if left := of(r.Holdings(), "a"); len(left) > 0 {
			t.Fatalf("try %d: claims of a left after its pass stopped: %v", i, left)
		}
		st, err := mb.RunOnce(bg)
		noError(t, err, "try %d: RunOnce of b", i)
		if st.Skipped != 0 || st.Runs != runs {
			t.Fatalf("try %d: a pass of b polled %d runs and skipped %d as held, want %d and 0", i, st.Runs, st.Skipped, runs)
		}
	}
	t.Logf("%d of %d passes of a were stopped before they ended", interrupted, tries)
	if interrupted == 0 {
		t.Errorf("no pass of a was stopped before it ended")
	}
}

// testStoppedRunLeavesNoClaim stops the Run of replica a at random moments, 40 times,
// while its store stays open: in a pass, between passes, while it claims or hands runs
// over to b, whose Run goes on. Each time Run returns, no claim, hand-over or claim
// session of a is left, and b comes to hold every run.
func testStoppedRunLeavesNoClaim(t tb, r Replicas) {
	const runs, perRun, tries = 10, 3, 40
	const interval = 20 * time.Millisecond
	a, b := r.Open("a"), r.Open("b")
	seedWaiting(t, b, runs, perRun)
	resolver := foreverTracker{}.resolver()
	mopts := []monitor.Option{monitor.WithWorkers(4), monitor.WithInterval(interval)}
	ma, mb := monitor.New(a, resolver, mopts...), monitor.New(b, resolver, mopts...)
	ctxB, stopB := context.WithCancel(bg)
	doneB := make(chan error, 1)
	go func() { doneB <- mb.Run(ctxB) }()
	defer func() { stopB(); <-doneB }()
	for i := range tries {
		ctx, cancel := context.WithCancel(bg)
		stop := time.AfterFunc(rand.N(10*interval), cancel)
		err := ma.Run(ctx)
		stop.Stop()
		cancel()
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("try %d: Run of a returned %v, want context.Canceled", i, err)
		}
		if left := of(r.Holdings(), "a"); len(left) > 0 {
			t.Fatalf("try %d: claims and hand-overs of a left after its Run returned: %v", i, left)
		}
		if slices.Contains(r.Members(), "a") {
			t.Fatalf("try %d: a claim session of a left after its Run returned", i)
		}
		for began := time.Now(); held(r.Holdings())["b"] < runs; time.Sleep(interval) {
			if time.Since(began) > time.Minute {
				t.Fatalf("try %d: the runs held a minute after a stopped, by replica: %v", i, held(r.Holdings()))
			}
		}
	}
}

// testClaimAfterSessionLost ends replica a's session behind its back while a holds a
// claim: a's next claim of the run starts a new session and holds the run, which b then
// finds held.
func testClaimAfterSessionLost(t tb, r Replicas) {
	a, b := claimer(t, r.Open("a")), claimer(t, r.Open("b"))
	o := backup("x")
	release := wantClaim(t, a.ClaimRun, o, true, "a")
	r.Expire("a")
	release() // its claim has gone with its session, or goes with it
	release = wantClaim(t, a.ClaimRun, o, true, "a, after its session was lost")
	wantClaim(t, b.ClaimRun, o, false, "b, while a holds the run in its new session")
	release()
	wantClaim(t, b.ClaimRun, o, true, "b, after a released the run")()
}

// testTakeOverClaims checks that replica b takes over at once the runs that replica a
// holds, some under a claim session, and that a then finds them held. A live a is the
// harder case: a dead one renews nothing that could bring its claims back.
func testTakeOverClaims(t tb, r Replicas) {
	a, b := r.Open("a"), r.Open("b")
	owners := seedWaiting(t, b, 4, 1)
	ca := claimer(t, a)
	var releasesA []func()
	for _, o := range owners[:3] {
		releasesA = append(releasesA, wantClaim(t, ca.ClaimRun, o, true, "a"))
	}
	keeper, ok := a.(operations.ClaimKeeper)
	if !ok {
		t.Fatalf("the store (%T) is not an operations.ClaimKeeper", a)
	}
	session := keeper.KeepClaims(bg, claimInterval, nil)
	defer session.End()
	wantClaim(t, session.ClaimRun, owners[3], true, "a's claim session")() // kept by the session
	wantClaim(t, claimer(t, b).ClaimRun, owners[0], false, "b, before it takes over")

	taker, ok := b.(operations.ClaimTaker)
	if !ok {
		t.Fatalf("the store (%T) is not an operations.ClaimTaker, so a Monitor newly elected waits for a dead leader's claims to end", b)
	}
	ended, err := taker.TakeOverClaims(bg)
	noError(t, err, "TakeOverClaims by b")
	if ended != 1 {
		t.Errorf("TakeOverClaims by b ended %d sessions, want 1 (a's)", ended)
	}
	if h := r.Holdings(); len(h) != 0 {
		t.Errorf("claims left after the takeover: %+v, want none", h)
	}
	if m := r.Members(); len(m) != 0 {
		t.Errorf("claim sessions left after the takeover: %q, want none", m)
	}
	var releases []func()
	for _, o := range owners {
		releases = append(releases, wantClaim(t, taker.ClaimRun, o, true, "b, at once after it took over"))
	}
	// a gives up what it believes it holds: that must not undo b's claims.
	for _, release := range releasesA {
		release()
	}
	session.End()
	for _, o := range owners {
		wantClaim(t, ca.ClaimRun, o, false, "a, whose session b ended, while b holds the run")
	}
	for _, release := range releases {
		release()
	}
}

// claimer returns s as an operations.RunClaimer, or stops the check.
func claimer(t tb, s operations.Store) operations.RunClaimer {
	t.Helper()
	c, ok := s.(operations.RunClaimer)
	if !ok {
		t.Fatalf("the store (%T) is not an operations.RunClaimer", s)
	}
	return c
}

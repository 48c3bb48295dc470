package controllerruntime

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	coordinationclient "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/operations/monitor"
	"github.com/itemops/itemops/operations/operationstest"
	"github.com/itemops/itemops/phase"
	"github.com/itemops/itemops/storage/memstore"
)

// The leader election's timing in TestLeaderElectionTakeover, shorter than
// controller-runtime's defaults (15s, 10s, 2s) so that waiting out a lease costs seconds.
// The leader gives up when it cannot renew for leaseRenew, which fails the test: four
// seconds, eight tries, leave room for the stalls of the local API server on a loaded
// two-core machine under the race detector. leaseDuration is two seconds longer, so
// that a leader that gives up has stopped before a standby may take over.
var (
	leaseDuration = 6 * time.Second
	leaseRenew    = 4 * time.Second
	leaseRetry    = 500 * time.Millisecond
)

const (
	leaderAction = "example.io/leader"
	lateCalls    = 5 // the calls of manager b that end a late operation
)

// TestLeaderElectionTakeover runs two managers with leader election on a real
// coordination.k8s.io Lease, each with a Monitor over one shared store: a memstore,
// as both managers run in the test's process. (The store that two processes can share
// is storage/etcdstore, a module of its own whose etcd client would enter this
// module's requirements; a boltstore file is open in one process at a time.) The
// plugin records which manager made each call, when it began and when it ended. The
// leader polls and the standby does not; when the leader's manager stops, the standby
// takes the Lease and polls from then on; every operation ends Completed, and no
// operation is polled by both managers at once. With LeaderElectionReleaseOnCancel
// the leader gives the Lease up as it stops; without it the standby waits out the
// lease. The release can fail (see testTakeover); the test then logs that b waited
// out the lease.
func TestLeaderElectionTakeover(t *testing.T) {
	cfg := kube.Config(t)
	for _, tc := range []struct {
		name    string
		release bool
		// wantHolders are the holders the Lease names in turn, until b holds it: "a"
		// and "b" for the managers, "" for none.
		wantHolders []string
	}{
		{name: "the leader releases the Lease as it stops", release: true, wantHolders: []string{"a", "", "b"}},
		{name: "the standby waits out the lease", release: false, wantHolders: []string{"a", "b"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			testTakeover(t, cfg, tc.release, tc.wantHolders)
		})
	}
}

// testTakeover is one case of TestLeaderElectionTakeover: release sets
// LeaderElectionReleaseOnCancel, and wantHolders are the holders the Lease names in turn.
func testTakeover(t *testing.T, cfg *rest.Config, release bool, wantHolders []string) {
	ctx := context.Background()
	kc, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	ns, err := kc.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "leader-"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	const leaseName = "itemops-leader"
	leases := kc.CoordinationV1().Leases(ns.Name)
	history := watchLease(t, leases, leaseName)

	store := memstore.New()
	calls := &callLog{}
	newManager := func(name string) (manager.Manager, *Monitor) {
		t.Helper()
		mgr, err := manager.New(cfg, manager.Options{
			Logger:                        logr.Discard(),
			Metrics:                       metricsserver.Options{BindAddress: "0"},
			LeaderElection:                true,
			LeaderElectionNamespace:       ns.Name,
			LeaderElectionID:              leaseName,
			LeaderElectionReleaseOnCancel: release,
			LeaseDuration:                 &leaseDuration,
			RenewDeadline:                 &leaseRenew,
			RetryPeriod:                   &leaseRetry,
		})
		require.NoError(t, err)
		plugins := operationstest.Resolver(map[string]operations.Tracker{leaderAction: &namedTracker{manager: name, calls: calls}})
		m, err := New(mgr, store, plugins, WithMonitorOptions(monitor.WithInterval(100*time.Millisecond)))
		require.NoError(t, err)
		return mgr, m
	}
	mgrA, monA := newManager("a")
	mgrB, _ := newManager("b")
	stopA := runManager(t, mgrA)
	waitClosed(t, mgrA.Elected(), "manager a elected")
	idA := holder(t, leases, leaseName)
	require.NotEmpty(t, idA, "the Lease names no holder once manager a is elected")

	// Two runs, each with an operation that ends at its first poll and two that end only
	// when manager b polls them: those are still running when the leader stops.
	runs := map[string][]string{"leader/one": {"early-1", "late-1", "late-2"}, "leader/two": {"early-2", "late-3", "late-4"}}
	early, late := []string{"early-1", "early-2"}, []string{"late-1", "late-2", "late-3", "late-4"}
	for name, ids := range runs {
		var ops []operations.Operation
		for _, id := range ids {
			ops = append(ops, operations.Operation{Action: leaderAction, ID: id})
		}
		_, err := monA.StartRun(ctx, operations.Run{Owner: operations.Owner{Kind: phase.Backup, Name: name, UID: "uid-" + name}},
			func(context.Context) (operations.MainRun, error) { return operations.MainRun{Operations: ops}, nil })
		require.NoError(t, err)
	}

	bRunning := make(chan struct{})
	require.NoError(t, mgrB.Add(standbyRunnable(func() { close(bRunning) })))
	stopB := runManager(t, mgrB)
	defer stopB()
	waitClosed(t, bRunning, "manager b running")
	// While b stands by (its leader elector starts right after its runnables that need
	// no election), a goes on polling the unfinished operations.
	from := calls.countBy("a", late...)
	require.Eventually(t, func() bool { return calls.countBy("a", late...) >= from+10*len(late) || calls.countBy("b") > 0 },
		time.Minute, 10*time.Millisecond, "manager a went on polling the running operations while b stood by")
	require.Zero(t, calls.countBy("b"), "the standby called the plugin while a leads")
	select {
	case <-mgrB.Elected():
		t.Fatal("manager b was elected while manager a leads")
	default:
	}
	require.Equal(t, idA, holder(t, leases, leaseName), "the Lease's holder while manager a leads")

	// Stop a just after a renewal, so that the stop does not cut a renewal short: the
	// write of a renewal cut short may still reach the API server, and then a's release
	// fails with a 409 Conflict, its resourceVersion being stale, and b waits out the
	// lease all the same.
	seen := len(history.until(t, "version of the Lease", func(specs []coordinationv1.LeaseSpec) bool { return len(specs) > 0 }))
	history.until(t, "renewal after the versions seen", func(specs []coordinationv1.LeaseSpec) bool { return len(specs) > seen })
	stopA()
	waitClosed(t, mgrB.Elected(), "manager b elected after manager a stopped")
	idB := holder(t, leases, leaseName)
	require.NotContains(t, []string{"", idA}, idB, "the Lease's holder once manager b is elected")
	require.Eventually(t, func() bool {
		for name := range runs {
			r, err := store.GetRun(ctx, operations.Owner{Kind: phase.Backup, Name: name})
			if err != nil || !phase.IsTerminal(r.Phase) {
				return false
			}
		}
		return true
	}, time.Minute, 10*time.Millisecond, "every run ended")

	for name, ids := range runs {
		o := operations.Owner{Kind: phase.Backup, Name: name}
		r, err := store.GetRun(ctx, o)
		require.NoError(t, err)
		require.Equal(t, phase.Completed, r.Phase, "run %s", name)
		got, err := operationstest.OperationPhases(ctx, store, o)
		require.NoError(t, err)
		want := map[string]operations.OperationPhase{}
		for _, id := range ids {
			want[id] = operations.OperationCompleted
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("the operations of run %s (-want +got):\n%s", name, diff)
		}
	}

	// Every call of a ended before the first call of b began, so no operation was
	// polled by both at once; a polled the operations that b then finished, and b never
	// polled one that had ended under a.
	require.Empty(t, calls.overlapping(), "calls for one operation in flight from both managers at once")
	lastA, firstB := calls.last("a"), calls.first("b")
	require.Less(t, lastA, firstB, "the index of a's last call's end and of b's first call's start")
	for _, id := range late {
		require.Positive(t, calls.countBy("a", id), "manager a's calls for %s", id)
		require.Equal(t, lateCalls, calls.countBy("b", id), "manager b's calls for %s", id)
	}
	for _, id := range early {
		require.Equal(t, 1, calls.countBy("a", id), "manager a's calls for %s", id)
		require.Zero(t, calls.countBy("b", id), "manager b's calls for %s, which ended under a", id)
	}

	specs := history.until(t, "Lease held by manager b", func(specs []coordinationv1.LeaseSpec) bool {
		return len(specs) > 0 && deref(specs[len(specs)-1].HolderIdentity) == idB
	})
	names := map[string]string{idA: "a", idB: "b", "": ""}
	var got []string
	for _, s := range specs {
		h, ok := names[deref(s.HolderIdentity)]
		require.True(t, ok, "the Lease named a holder %q that is neither manager", deref(s.HolderIdentity))
		if len(got) == 0 || got[len(got)-1] != h {
			got = append(got, h)
		}
	}
	if release && slices.Equal(got, []string{"a", "b"}) {
		// The stop met a renewal under way after all (see above).
		t.Log("manager a's release of the Lease failed: b waited out the lease")
	} else if diff := cmp.Diff(wantHolders, got); diff != "" {
		t.Errorf("the Lease's holders in turn (-want +got):\n%s", diff)
	}
}

// namedTracker is the plugin of one manager's Monitor: it records its calls in calls
// under the manager's name. An operation whose ID begins with "early" ends at its first
// poll; one whose ID begins with "late" ends only at the lateCalls-th call of manager b,
// so that a leader that went on polling after it stopped would be seen. Each call
// takes a few milliseconds, or until its context ends, so that calls overlap if two
// Monitors poll at once.
type namedTracker struct {
	manager string
	calls   *callLog
}

func (n *namedTracker) Progress(ctx context.Context, op operations.Operation) (operations.Progress, error) {
	end := n.calls.begin(n.manager, op.ID)
	defer end()
	select {
	case <-ctx.Done():
		return operations.Progress{}, ctx.Err()
	case <-time.After(5 * time.Millisecond):
	}
	done := !strings.HasPrefix(op.ID, "late") || n.manager == "b" && n.calls.countBy("b", op.ID) >= lateCalls
	return operations.Progress{Completed: done}, nil
}

func (n *namedTracker) Cancel(ctx context.Context, op operations.Operation) error {
	return fmt.Errorf("%s: cancel %s: no operation is cancelled in this test", n.manager, op.ID)
}

// callLog records the beginning and the end of every plugin call, in order. It is safe
// for concurrent use.
type callLog struct {
	mu       sync.Mutex                // guards the fields below
	events   []callEvent               // every call's beginning and end, in order
	inFlight map[string]map[string]int // by operation ID, the calls under way by manager
	overlaps []string                  // the calls that began while another manager's was in flight
}

type callEvent struct {
	manager, op string
	end         bool
}

// begin records the beginning of a call of manager for operation op, and returns what
// records its end.
func (c *callLog) begin(manager, op string) (end func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.inFlight == nil {
		c.inFlight = make(map[string]map[string]int)
	}
	if c.inFlight[op] == nil {
		c.inFlight[op] = make(map[string]int)
	}
	for other, n := range c.inFlight[op] {
		if other != manager && n > 0 {
			c.overlaps = append(c.overlaps, fmt.Sprintf("%s called for %s while a call of %s was in flight", manager, op, other))
		}
	}
	c.inFlight[op][manager]++
	c.events = append(c.events, callEvent{manager: manager, op: op})
	return func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.inFlight[op][manager]--
		c.events = append(c.events, callEvent{manager: manager, op: op, end: true})
	}
}

// countBy returns how many calls manager began for the operations ops, or for any
// operation when ops is empty.
func (c *callLog) countBy(manager string, ops ...string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, e := range c.events {
		if !e.end && e.manager == manager && (len(ops) == 0 || slices.Contains(ops, e.op)) {
			n++
		}
	}
	return n
}

// first returns the index of manager's first event, -1 for none.
func (c *callLog) first(manager string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.IndexFunc(c.events, func(e callEvent) bool { return e.manager == manager })
}

// last returns the index of manager's last event, -1 for none.
func (c *callLog) last(manager string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := len(c.events) - 1; i >= 0; i-- {
		if c.events[i].manager == manager {
			return i
		}
	}
	return -1
}

// overlapping returns what begin found: the calls for an operation that began while a
// call of another manager for it was in flight.
func (c *callLog) overlapping() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.overlaps)
}

// runManager starts mgr and returns what stops it: it cancels the manager's context,
// waits for Start to return and fails the test if Start failed. A manager that loses
// its Lease without being stopped fails the test too, when it is stopped.
func runManager(t *testing.T, mgr manager.Manager) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	var once sync.Once
	return func() {
		once.Do(func() {
			cancel()
			require.NoError(t, <-done, "the manager's Start")
		})
	}
}

// waitClosed waits until ch is closed, failing the test after a minute.
func waitClosed(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(time.Minute):
		t.Fatalf("a minute passed without %s", what)
	}
}

// standbyRunnable is a runnable that needs no leader election: the manager starts it,
// on the elected leader and on a standby alike, before it starts its leader elector.
type standbyRunnable func()

func (f standbyRunnable) Start(ctx context.Context) error {
	f()
	<-ctx.Done()
	return nil
}

func (standbyRunnable) NeedLeaderElection() bool { return false }

// holder reads the Lease name from the API and returns its holderIdentity, "" for none.
func holder(t *testing.T, leases coordinationclient.LeaseInterface, name string) string {
	t.Helper()
	l, err := leases.Get(context.Background(), name, metav1.GetOptions{})
	require.NoError(t, err)
	return deref(l.Spec.HolderIdentity)
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// leaseHistory holds every version of a Lease's spec that a watch delivered, in order.
type leaseHistory struct {
	w    watch.Interface
	done chan struct{} // closed when the watch has ended

	mu       sync.Mutex // guards the fields below
	specs    []coordinationv1.LeaseSpec
	err      error // why the watch failed, if it did before it was stopped
	stopping bool  // stop has begun: what the watch delivers now is left out
}

// watchLease watches the Lease name, which need not exist yet, until the test ends.
func watchLease(t *testing.T, leases coordinationclient.LeaseInterface, name string) *leaseHistory {
	t.Helper()
	w, err := leases.Watch(context.Background(), metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String()})
	require.NoError(t, err)
	h := &leaseHistory{w: w, done: make(chan struct{})}
	go func() {
		defer close(h.done)
		for ev := range w.ResultChan() {
			h.mu.Lock()
			switch l, ok := ev.Object.(*coordinationv1.Lease); {
			case h.stopping:
			case ok:
				h.specs = append(h.specs, l.Spec)
			case h.err == nil:
				h.err = fmt.Errorf("the watch delivered a %s event: %w", ev.Type, apierrors.FromObject(ev.Object))
			}
			h.mu.Unlock()
		}
	}()
	t.Cleanup(func() { h.stop() })
	return h
}

// until waits until the specs the watch delivered meet cond, and returns them. It fails
// the test when the watch failed (the server ended it, or delivered an error), and after
// a minute.
func (h *leaseHistory) until(t *testing.T, what string, cond func([]coordinationv1.LeaseSpec) bool) []coordinationv1.LeaseSpec {
	t.Helper()
	var specs []coordinationv1.LeaseSpec
	require.Eventually(t, func() bool {
		h.mu.Lock()
		defer h.mu.Unlock()
		specs = slices.Clone(h.specs)
		return h.err != nil || cond(specs)
	}, time.Minute, 10*time.Millisecond, "the watch of the Lease delivered no %s", what)
	h.mu.Lock()
	defer h.mu.Unlock()
	require.NoError(t, h.err)
	return specs
}

// stop ends the watch; the error a watch may deliver as it is stopped is left out.
func (h *leaseHistory) stop() {
	h.mu.Lock()
	h.stopping = true
	h.mu.Unlock()
	h.w.Stop()
	<-h.done
}

package kubestore_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/itemops/itemops/clock/clocktest"
	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/operations/monitor"
	"github.com/itemops/itemops/operations/operationstest"
	"github.com/itemops/itemops/phase"
	"github.com/itemops/itemops/storage/kubestore"
)

// leaseWrites counts the requests a client sends through it, and among them the writes
// of claim Leases: every create and delete of a Lease (claims, members and sessions),
// and every update of a claim's (named like a run's object, with a dot; the session
// Lease's renewals are left out).
type leaseWrites struct {
	next             http.RoundTripper
	requests, writes atomic.Int64
}

func (c *leaseWrites) RoundTrip(req *http.Request) (*http.Response, error) {
	c.requests.Add(1)
	if _, rest, ok := strings.Cut(req.URL.Path, "/leases"); ok {
		switch req.Method {
		case http.MethodPost, http.MethodDelete:
			c.writes.Add(1)
		case http.MethodPut, http.MethodPatch:
			if strings.Contains(rest, ".") {
				c.writes.Add(1)
			}
		}
	}
	return c.next.RoundTrip(req)
}

// polledBy is a Resolver whose Tracker records the runs it is asked about, in a pass,
// and answers that each operation goes on.
type polledBy struct {
	mu   sync.Mutex // guards runs
	runs map[string]int
}

func (p *polledBy) resolver() operations.Resolver {
	return operations.ResolverFunc(func(string) (operations.Tracker, error) {
		return &operationstest.Tracker{ProgressFunc: func(_ context.Context, op operations.Operation) (operations.Progress, error) {
			p.mu.Lock()
			p.runs[op.Owner.Name]++
			p.mu.Unlock()
			return operations.Progress{NCompleted: op.Status.NCompleted, NTotal: op.Status.NTotal}, nil
		}}, nil
	})
}

// take returns the runs polled since the last take, sorted.
func (p *polledBy) take() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for name := range p.runs {
		out = append(out, name)
	}
	p.runs = map[string]int{}
	slices.Sort(out)
	return out
}

// keptClaimsReplica is one replica of TestRunOnceKeepsClaims: its store, whose requests
// lw counts, and a Monitor with WithKeptClaims.
type keptClaimsReplica struct {
	s      *kubestore.Store
	lw     *leaseWrites
	polled *polledBy
	m      *monitor.Monitor
}

func openKeptClaimsReplica(t *testing.T, ns, name string, opts ...monitor.Option) *keptClaimsReplica {
	r := &keptClaimsReplica{lw: &leaseWrites{}, polled: &polledBy{runs: map[string]int{}}}
	r.s = openIn(t, ns, &kubestore.Options{Identity: name, ClaimTTL: 30 * time.Second},
		func(rt http.RoundTripper) http.RoundTripper { r.lw.next = rt; return r.lw })
	t.Cleanup(func() { r.s.Close() })
	// The operations were created at t0: the Monitor's clock stands there, lest they
	// run out of time.
	r.m = monitor.New(r.s, r.polled.resolver(), append([]monitor.Option{
		monitor.WithClock(clocktest.NewClock(t0)), monitor.WithInterval(time.Second)}, opts...)...)
	return r
}

// pass makes one RunOnce of r and returns its statistics and the requests and Lease
// writes it made.
func (r *keptClaimsReplica) pass(t *testing.T) (st monitor.PassStats, requests, writes int64) {
	t.Helper()
	req0, w0 := r.lw.requests.Load(), r.lw.writes.Load()
	st, err := r.m.RunOnce(context.Background())
	if err != nil {
		t.Fatalf("RunOnce: %v", err)
	}
	return st, r.lw.requests.Load() - req0, r.lw.writes.Load() - w0
}

// createKeptClaimsRuns creates n waiting backups of one InProgress operation each.
func createKeptClaimsRuns(t *testing.T, s *kubestore.Store, n int) []string {
	var names []string
	for i := range n {
		o := operations.Owner{Kind: phase.Backup, Name: fmt.Sprintf("run-%03d", i), UID: fmt.Sprintf("uid-%03d", i)}
		if err := s.CreateRunWithOperations(context.Background(), waitingRun(t, o), testOps(o, 1, operations.OperationInProgress)); err != nil {
			t.Fatalf("CreateRunWithOperations: %v", err)
		}
		names = append(names, o.Name)
	}
	return names
}

// claimLeases returns how many claim and member Leases the namespace holds.
func claimLeases(t *testing.T, ns string) (claims, members int) {
	t.Helper()
	for _, l := range leases(t, leaseClient(t, config(t), ns)) {
		switch l.Labels["itemops.io/role"] {
		case "claim":
			claims++
		case "member":
			members++
		}
	}
	return claims, members
}

// TestRunOnceKeepsClaims drives Monitors by RunOnce in a loop on the API server. Alone,
// a Monitor with WithKeptClaims claims its runs in its first pass and makes no Lease
// write in the passes after, where a Monitor without it creates and deletes a Lease per
// run per pass; the requests per pass of both are logged. Two replicas with
// WithKeptClaims then share the runs: within a few intervals each polls its half in
// each round of passes, and no run is polled by both; Close gives every claim and
// member Lease up.
func TestRunOnceKeepsClaims(t *testing.T) {
	const runs = 100
	s, _, ns := newStoreIn(t, nil)
	names := createKeptClaimsRuns(t, s, runs)

	plain := openKeptClaimsReplica(t, ns, "plain")
	var plainReq int64
	for i := range 3 {
		st, req, writes := plain.pass(t)
		if i == 0 {
			writes-- // the store's session Lease, created by its first claim
		}
		if st.Runs != runs || writes != 2*runs {
			t.Fatalf("pass %d without WithKeptClaims: polled %d runs with %d Lease writes, want %d and %d", i, st.Runs, writes, runs, 2*runs)
		}
		plainReq = req
	}
	if c, m := claimLeases(t, ns); c+m != 0 {
		t.Fatalf("after passes without WithKeptClaims: %d claim and %d member Leases, want none", c, m)
	}

	a := openKeptClaimsReplica(t, ns, "a", monitor.WithKeptClaims())
	st, _, writes := a.pass(t)
	if st.Runs != runs || writes < runs {
		t.Fatalf("first pass with WithKeptClaims: polled %d runs with %d Lease writes, want %d and at least %d", st.Runs, writes, runs, runs)
	}
	var keptReq int64
	for i := range 3 {
		st, req, writes := a.pass(t)
		if st.Runs != runs || writes != 0 {
			t.Fatalf("pass %d after the first with WithKeptClaims: polled %d runs with %d Lease writes, want %d and 0", i+1, st.Runs, writes, runs)
		}
		keptReq = req
	}
	t.Logf("requests per RunOnce pass over %d runs: %d without WithKeptClaims, %d with (%.2f per run, %.2f)",
		runs, plainReq, keptReq, float64(plainReq)/runs, float64(keptReq)/runs)
	if c, m := claimLeases(t, ns); c != runs || m != 1 {
		t.Fatalf("while a keeps its claims: %d claim and %d member Leases, want %d and 1", c, m, runs)
	}

	// A second replica joins: a hands over half of the runs, free an interval after its
	// last pass over them, and b takes them then.
	b := openKeptClaimsReplica(t, ns, "b", monitor.WithKeptClaims())
	a.polled.take()
	balanced := false
	for round := 0; round < 15 && !balanced; round++ {
		time.Sleep(time.Second) // an interval: the runs handed over become free
		_, _, _ = a.pass(t)
		_, _, _ = b.pass(t)
		balanced = shared(a.polled.take(), b.polled.take(), names)
	}
	if !balanced {
		t.Fatalf("the replicas did not come to poll %d runs each", runs/2)
	}
	for i := range 2 {
		for _, r := range []*keptClaimsReplica{a, b} {
			st, _, writes := r.pass(t)
			if st.Runs != runs/2 || st.Skipped != runs/2 || writes != 0 {
				t.Fatalf("balanced round %d: polled %d runs and skipped %d with %d Lease writes, want %d, %d and 0",
					i, st.Runs, st.Skipped, writes, runs/2, runs/2)
			}
		}
		if byA, byB := a.polled.take(), b.polled.take(); !shared(byA, byB, names) {
			t.Fatalf("balanced round %d: the replicas polled %v and %v, want half of the runs each, every run once", i, byA, byB)
		}
	}

	a.m.Close()
	b.m.Close()
	if c, m := claimLeases(t, ns); c+m != 0 {
		t.Fatalf("after Close: %d claim and %d member Leases, want none", c, m)
	}
}

// shared reports whether the runs polled by two replicas, byA and byB, are all the runs
// (names), each polled by one replica, half by each.
func shared(byA, byB, names []string) bool {
	all := slices.Concat(byA, byB)
	slices.Sort(all)
	return len(byA) == len(names)/2 && len(byB) == len(names)/2 && slices.Equal(all, names)
}

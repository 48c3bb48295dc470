package etcdstore_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/operations/monitor"
	"github.com/itemops/itemops/storage/etcdstore"
)

// pollRecorder is a plugin whose operations never end, and which records the runs it is
// asked about.
type pollRecorder struct {
	mu   sync.Mutex // guards runs
	runs map[string]bool
}

func (p *pollRecorder) Progress(_ context.Context, op operations.Operation) (operations.Progress, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.runs[op.Owner.Name] = true
	return forever{}.Progress(context.Background(), op)
}

func (*pollRecorder) Cancel(context.Context, operations.Operation) error { return nil }

// take returns the runs polled since the last take, sorted.
func (p *pollRecorder) take() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for name := range p.runs {
		out = append(out, name)
	}
	p.runs = map[string]bool{}
	slices.Sort(out)
	return out
}

// TestRunOnceKeepsClaims drives Monitors by RunOnce in a loop, on an etcd of its own, and
// counts the revisions each pass writes over runs whose operations report no change.
// Without WithKeptClaims a pass claims and gives up each run (two revisions per run);
// with it, the passes after the first write nothing, and the claims stay. Two replicas
// with WithKeptClaims then share the runs: within a few intervals each polls its half in
// each round of passes, no run polled by both, and write nothing; Close leaves no claim
// and no replica key.
func TestRunOnceKeepsClaims(t *testing.T) {
	const runs, perRun = 20, 2
	const interval = 200 * time.Millisecond
	srv := etcdstore.StartServer(t)
	c := etcdstore.NewClient(t, srv)
	prefix := etcdstore.NewPrefix()
	replica := func(name string, opts ...monitor.Option) (*monitor.Monitor, *pollRecorder) {
		s := etcdstore.OpenStore(t, etcdstore.NewClient(t, srv), prefix, &etcdstore.Options{Identity: name})
		p := &pollRecorder{runs: map[string]bool{}}
		resolver := operations.ResolverFunc(func(string) (operations.Tracker, error) { return p, nil })
		return monitor.New(s, resolver, append([]monitor.Option{monitor.WithInterval(interval)}, opts...)...), p
	}
	var names []string
	for _, o := range seed(t, etcdstore.OpenStore(t, c, prefix, nil), runs, perRun) {
		names = append(names, o.Name)
	}
	// pass makes a pass of m and returns its statistics and the revisions it wrote.
	pass := func(m *monitor.Monitor) (monitor.PassStats, int64) {
		t.Helper()
		before := revision(t, c)
		st, err := m.RunOnce(bg)
		require.NoError(t, err)
		return st, revision(t, c) - before
	}

	plain, _ := replica("plain")
	for i := range 3 {
		st, revs := pass(plain)
		require.Equal(t, runs, st.Runs, "runs polled in pass %d without WithKeptClaims", i)
		if i > 0 { // the first moves the operations from New
			require.Equal(t, int64(2*runs), revs, "revisions of pass %d without WithKeptClaims", i)
		}
	}
	require.Empty(t, rawKeys(t, c, prefix+"claims/"), "claims left by passes without WithKeptClaims")

	a, pa := replica("a", monitor.WithKeptClaims())
	st, revs := pass(a)
	require.Equal(t, runs, st.Runs, "runs polled in the first pass with WithKeptClaims")
	require.GreaterOrEqual(t, revs, int64(runs), "revisions of the first pass with WithKeptClaims")
	for i := range 3 {
		st, revs := pass(a)
		require.Equal(t, runs, st.Runs, "runs polled in pass %d with WithKeptClaims", i+1)
		require.Zero(t, revs, "revisions of pass %d with WithKeptClaims", i+1)
	}
	require.Len(t, rawKeys(t, c, prefix+"claims/"), runs, "claims kept between the passes")

	b, pb := replica("b", monitor.WithKeptClaims())
	pa.take()
	balanced := false
	for round := 0; round < 20 && !balanced; round++ {
		time.Sleep(interval) // the runs handed over become free
		pass(a)
		pass(b)
		balanced = halves(pa.take(), pb.take(), names)
	}
	require.True(t, balanced, "the replicas came to poll %d runs each", runs/2)
	for i := range 2 {
		for _, m := range []*monitor.Monitor{a, b} {
			st, revs := pass(m)
			require.Equal(t, runs/2, st.Runs, "runs polled in balanced round %d", i)
			require.Equal(t, runs/2, st.Skipped, "runs skipped in balanced round %d", i)
			require.Zero(t, revs, "revisions of balanced round %d", i)
		}
		byA, byB := pa.take(), pb.take()
		require.True(t, halves(byA, byB, names), "balanced round %d: runs polled %v and %v, want half each, every run once", i, byA, byB)
	}

	a.Close()
	b.Close()
	require.Empty(t, rawKeys(t, c, prefix+"claims/"), "claims left after Close")
	require.Empty(t, rawKeys(t, c, prefix+"replicas/"), "replica keys left after Close")
}

// halves reports whether the runs polled by two replicas, byA and byB, are all the runs
// (names), each polled by one replica, half by each.
func halves(byA, byB, names []string) bool {
	all := slices.Concat(byA, byB)
	slices.Sort(all)
	return len(byA) == len(names)/2 && len(byB) == len(names)/2 && slices.Equal(all, names)
}

// TestStoreCloseEndsRunOnceSession closes the store of a Monitor with WithKeptClaims
// whose Close was never called: the store's Close leaves no claim or replica key, and
// the Monitor's Close afterwards writes nothing. (That the store's Close stops the
// session's watch, which would otherwise last as long as the etcd client, is the test
// of claims.Claimer.Close: here the client ends with the test.)
func TestStoreCloseEndsRunOnceSession(t *testing.T) {
	const runs = 3
	srv := etcdstore.StartServer(t)
	c := etcdstore.NewClient(t, srv)
	prefix := etcdstore.NewPrefix()
	s := etcdstore.OpenStore(t, c, prefix, nil)
	seed(t, s, runs, 1)
	m := monitor.New(s, operations.ResolverFunc(func(string) (operations.Tracker, error) { return forever{}, nil }),
		monitor.WithKeptClaims())
	st, err := m.RunOnce(bg)
	require.NoError(t, err)
	require.Equal(t, runs, st.Runs, "runs polled")
	require.Len(t, rawKeys(t, c, prefix+"claims/"), runs, "claims kept after the pass")
	require.NotEmpty(t, rawKeys(t, c, prefix+"replicas/"), "replica keys of the session")

	require.NoError(t, s.Close())
	require.Empty(t, rawKeys(t, c, prefix+"claims/"), "claims left after the store's Close")
	require.Empty(t, rawKeys(t, c, prefix+"replicas/"), "replica keys left after the store's Close")
	before := revision(t, c)
	m.Close()
	require.Equal(t, before, revision(t, c), "revisions written by the Monitor's Close after the store's")
}

package etcdstore_test

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/itemops/itemops/internal/testutil/scalebench"
	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/operations/decorate"
	"github.com/itemops/itemops/operations/monitor"
	"github.com/itemops/itemops/storage/etcdstore"
)

// revision returns the revision of the etcd server c reaches.
func revision(t *testing.T, c *clientv3.Client) int64 {
	t.Helper()
	resp, err := c.Get(bg, "revision", clientv3.WithCountOnly())
	require.NoError(t, err)
	return resp.Header.Revision
}

// TestKeptClaimsWriteOnlyChanges runs a Monitor on 20 runs of 5 operations, on an etcd of
// its own, and counts the revisions each pass of Run writes once the first pass has
// claimed the runs: one per run (the batch of its operations) when every operation
// reports new progress, none when nothing moves. The claims stay with the Monitor from
// pass to pass; when Run returns, no claim and no key of the replica is left. A pass of
// RunOnce, outside Run, still claims and gives up each run: three revisions per run.
func TestKeptClaimsWriteOnlyChanges(t *testing.T) {
	const runs, perRun, passes = 20, 5, 6
	for _, tc := range []struct {
		name    string
		plugin  operations.Tracker
		perPass int64
	}{
		{"every operation moves", &scalebench.Moving{}, runs},
		{"nothing moves", forever{}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := etcdstore.StartServer(t)
			c := etcdstore.NewClient(t, srv)
			prefix := etcdstore.NewPrefix()
			s := etcdstore.OpenStore(t, c, prefix, nil)
			seed(t, s, runs, perRun)
			// The first pass claims the runs and moves the operations from New; the
			// second finds the progress the first wrote. The next ones are counted.
			const warmUp = 2
			var (
				mu    sync.Mutex
				revs  []int64
				stats []monitor.PassStats
				done  = make(chan struct{})
			)
			observe := func(st monitor.PassStats) {
				rev := revision(t, c)
				mu.Lock()
				defer mu.Unlock()
				if len(revs) == warmUp+passes {
					return
				}
				revs, stats = append(revs, rev), append(stats, st)
				if len(revs) == warmUp+passes {
					close(done)
				}
			}
			resolver := operations.ResolverFunc(func(string) (operations.Tracker, error) { return tc.plugin, nil })
			m := monitor.New(s, resolver, monitor.WithInterval(10*time.Millisecond), monitor.WithObserver(monitor.Observer{Pass: observe}))
			ctx, cancel := context.WithCancel(bg)
			defer cancel()
			errc := make(chan error, 1)
			go func() { errc <- m.Run(ctx) }()
			select {
			case <-done:
			case err := <-errc:
				t.Fatalf("Run returned %v", err)
			}
			cancel()
			require.ErrorIs(t, <-errc, context.Canceled)

			// Run has returned; RunOnce below calls observe, which then changes nothing.
			mu.Lock()
			revs, stats = slices.Clone(revs), slices.Clone(stats)
			mu.Unlock()
			for i, st := range stats {
				require.Equal(t, runs, st.Runs, "runs polled in pass %d", i)
				require.Zero(t, st.Skipped, "runs skipped in pass %d", i)
			}
			var got, want []int64
			for i := warmUp; i < len(revs); i++ {
				got, want = append(got, revs[i]-revs[i-1]), append(want, tc.perPass)
			}
			if d := cmp.Diff(want, got); d != "" {
				t.Errorf("revisions written per pass (-want +got):\n%s", d)
			}
			require.Empty(t, rawKeys(t, c, prefix+"claims/"), "claims left after Run")
			require.Empty(t, rawKeys(t, c, prefix+"replicas/"), "replica keys left after Run")

			before := revision(t, c)
			st, err := m.RunOnce(bg)
			require.NoError(t, err)
			require.Equal(t, runs, st.Runs, "runs polled by RunOnce")
			require.Equal(t, 2*runs+tc.perPass, revision(t, c)-before, "revisions of a RunOnce pass")
			require.Empty(t, rawKeys(t, c, prefix+"claims/"), "claims left after RunOnce")
		})
	}
}

// rawKeys returns the keys under prefix.
func rawKeys(t *testing.T, c *clientv3.Client, prefix string) []string {
	t.Helper()
	resp, err := c.Get(bg, prefix, clientv3.WithPrefix(), clientv3.WithKeysOnly())
	require.NoError(t, err)
	var keys []string
	for _, kv := range resp.Kvs {
		keys = append(keys, string(kv.Key))
	}
	return keys
}

// claimRevisions returns the ModRevision of each claim key under prefix, by key.
func claimRevisions(t *testing.T, c *clientv3.Client, prefix string) map[string]int64 {
	t.Helper()
	resp, err := c.Get(bg, prefix+"claims/", clientv3.WithPrefix())
	require.NoError(t, err)
	out := make(map[string]int64)
	for _, kv := range resp.Kvs {
		out[string(kv.Key)] = kv.ModRevision
	}
	return out
}

// forever is a plugin whose operations never end.
type forever struct{}

func (forever) Progress(context.Context, operations.Operation) (operations.Progress, error) {
	return operations.Progress{NCompleted: 1, NTotal: 10, OperationUnits: "Bytes"}, nil
}
func (forever) Cancel(context.Context, operations.Operation) error { return nil }

// TestPollBorrowsKeptClaim polls a run that the Run of another Monitor of the same store
// keeps between its passes (as a controller's reconcile does while the Run goes on): the
// poll borrows the claim, and gives it back to the Run's session, whose claim key stays
// as it was. A Monitor of another store finds the run held.
func TestPollBorrowsKeptClaim(t *testing.T) {
	const runs, perRun = 3, 2
	prefix := etcdstore.NewPrefix()
	c := etcdstore.NewTestClient(t)
	s := etcdstore.OpenStore(t, c, prefix, &etcdstore.Options{Identity: "replica-a"})
	other := etcdstore.OpenStore(t, etcdstore.NewTestClient(t), prefix, &etcdstore.Options{Identity: "replica-b"})
	owners := seed(t, s, runs, perRun)
	resolver := operations.ResolverFunc(func(string) (operations.Tracker, error) { return forever{}, nil })
	passed := make(chan struct{}, 1)
	observe := func(monitor.PassStats) {
		select {
		case passed <- struct{}{}:
		default:
		}
	}
	// One pass, then none for an hour: the claims stay kept, and unused.
	m := monitor.New(s, resolver, monitor.WithInterval(time.Hour), monitor.WithObserver(monitor.Observer{Pass: observe}))
	ctx, cancel := context.WithCancel(bg)
	errc := make(chan error, 1)
	go func() { errc <- m.Run(ctx) }()
	defer func() { cancel(); <-errc }()
	<-passed

	before := claimRevisions(t, c, prefix)
	require.Len(t, before, runs, "claims kept by Run")

	res, err := monitor.New(s, resolver).Poll(bg, owners[0])
	require.NoError(t, err)
	require.False(t, res.Skipped, "a poll by the store of the Run is skipped")
	require.Equal(t, perRun, res.Running, "operations polled")
	res, err = monitor.New(other, resolver).Poll(bg, owners[1])
	require.NoError(t, err)
	require.True(t, res.Skipped, "a poll by another store is not skipped")
	if d := cmp.Diff(before, claimRevisions(t, c, prefix)); d != "" {
		t.Errorf("claims after the polls (-before +after):\n%s", d)
	}

	cancel()
	require.ErrorIs(t, <-errc, context.Canceled)
	errc <- context.Canceled // for the deferred receive
	require.Empty(t, rawKeys(t, c, prefix+"claims/"), "claims left after Run")
}

// TestDecoratedStoresKeepClaims runs the Monitors of two replicas over stores that
// decorate.Store wraps (as a controller that adds metrics does): the decorated stores
// keep the claim sessions of etcdstore, so each replica counts itself among the replicas
// while its Run goes on, the two come to hold five runs each of ten, and from then on
// hold the same claims, unchanged in etcd, from pass to pass. Every claim of a pass, made
// under the session, passes through the decorator. When the Runs return, no claim and no
// replica key is left.
func TestDecoratedStoresKeepClaims(t *testing.T) {
	const runs, perRun, interval = 10, 2, 50 * time.Millisecond
	prefix := etcdstore.NewPrefix()
	c := etcdstore.NewTestClient(t)
	seed(t, etcdstore.OpenStore(t, c, prefix, nil), runs, perRun)
	resolver := operations.ResolverFunc(func(string) (operations.Tracker, error) { return forever{}, nil })

	// A replica's Monitor, with the claims its decorator saw and its passes.
	type replica struct {
		name   string
		claims atomic.Int64
		passes chan [2]int64 // for each pass, its number (from 1) and the claims seen when it ended
	}
	ctx, cancel := context.WithCancel(bg)
	errc := make(chan error, 2)
	var replicas []*replica
	for _, name := range []string{"replica-a", "replica-b"} {
		r := &replica{name: name, passes: make(chan [2]int64, 1000)}
		replicas = append(replicas, r)
		s := decorate.Store(etcdstore.OpenStore(t, etcdstore.NewTestClient(t), prefix, &etcdstore.Options{Identity: name}),
			func(ctx context.Context, call decorate.Call, do func(context.Context) error) error {
				if call.Method == "ClaimRun" {
					r.claims.Add(1)
				}
				return do(ctx)
			})
		var n int64
		m := monitor.New(s, resolver, monitor.WithInterval(interval), monitor.WithObserver(monitor.Observer{
			Pass: func(monitor.PassStats) { n++; r.passes <- [2]int64{n, r.claims.Load()} },
		}))
		go func() { errc <- m.Run(ctx) }()
	}
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		for range replicas {
			require.ErrorIs(t, <-errc, context.Canceled, "Run")
		}
	}
	defer stop()
	// pass waits for the next pass of r to end, and checks that each of its claims (one
	// per run listed: no run is finalizing) passed through the decorator.
	pass := func(r *replica) {
		t.Helper()
		p := <-r.passes
		require.Equal(t, p[0]*runs, p[1], "%s: claims the decorator saw by the end of pass %d", r.name, p[0])
	}
	for _, r := range replicas {
		pass(r)
	}
	require.Len(t, rawKeys(t, c, prefix+"replicas/"), 2, "replica keys of the claim sessions while the Runs go on")

	want := map[string]int{"replica-a": runs / 2, "replica-b": runs / 2}
	for began := time.Now(); ; time.Sleep(interval / 5) {
		got := holdings(t, c, prefix)
		if cmp.Equal(want, got) {
			break
		}
		if time.Since(began) > 30*time.Second {
			t.Fatalf("the claims held, by replica, 30 s after both Runs made a pass (-want +got):\n%s", cmp.Diff(want, got))
		}
	}
	before := claimRevisions(t, c, prefix)
	for _, r := range replicas {
		for len(r.passes) > 0 {
			pass(r) // passes that ended before the claims were read
		}
		for range 3 {
			pass(r)
		}
	}
	if d := cmp.Diff(before, claimRevisions(t, c, prefix)); d != "" {
		t.Errorf("claims after three more passes of each replica (-before +after):\n%s", d)
	}

	stop()
	require.Empty(t, rawKeys(t, c, prefix+"claims/"), "claims left after the Runs")
	require.Empty(t, rawKeys(t, c, prefix+"replicas/"), "replica keys left after the Runs")
}

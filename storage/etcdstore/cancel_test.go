package etcdstore_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/operations/monitor"
	"github.com/itemops/itemops/phase"
	"github.com/itemops/itemops/storage/etcdstore"
)

// cancels counts Cancel calls per operation (run/id), whichever Monitor makes them.
// before, when set, runs at the start of every call.
type cancels struct {
	mu     sync.Mutex
	calls  map[string]int
	before func()
}

func (c *cancels) Progress(context.Context, operations.Operation) (operations.Progress, error) {
	return operations.Progress{}, nil
}

func (c *cancels) Cancel(ctx context.Context, op operations.Operation) error {
	if c.before != nil {
		c.before()
	}
	c.mu.Lock()
	c.calls[op.Owner.String()+"/"+op.ID]++
	c.mu.Unlock()
	time.Sleep(time.Millisecond) // a plugin's gRPC call, so that passes overlap
	return nil
}

func (c *cancels) resolver() operations.Resolver {
	return operations.ResolverFunc(func(string) (operations.Tracker, error) { return c, nil })
}

// requestCancels requests the cancel of every run of owners.
func requestCancels(t *testing.T, s operations.Store, owners []operations.Owner, reason string) {
	t.Helper()
	for _, o := range owners {
		_, err := operations.RequestCancel(bg, s, o, reason, time.Now())
		require.NoError(t, err, "RequestCancel(%s)", o)
	}
}

// waitCancelled waits until every run of owners is Failed, then checks that each
// failed for reason with every operation Failed for it.
func waitCancelled(t *testing.T, s operations.Store, owners []operations.Owner, perRun int, reason string) {
	t.Helper()
	require.Eventually(t, func() bool {
		runs, err := s.ListRuns(bg, operations.RunFilter{Phases: []phase.Phase{phase.Failed}})
		return err == nil && len(runs) == len(owners)
	}, 3*time.Minute, 20*time.Millisecond, "every run Failed")
	for _, o := range owners {
		r, err := s.GetRun(bg, o)
		require.NoError(t, err)
		require.Equal(t, reason, r.FailureReason, "failure reason of %s", o)
		require.Equal(t, perRun, r.Errors, "errors of %s", o)
		ops, err := s.ListOperations(bg, o, operations.OperationFilter{})
		require.NoError(t, err)
		require.Len(t, ops, perRun)
		for _, op := range ops {
			require.Equal(t, operations.OperationFailed, op.Status.Phase, "%s/%s", o, op.ID)
			require.True(t, strings.HasPrefix(op.Status.Error, monitor.CanceledPrefix+reason), "%s/%s: %q", o, op.ID, op.Status.Error)
		}
	}
}

// TestMonitorsShareCancel runs two Monitors on two stores (two clients, as two replicas
// would) over 20 cancelled runs of 30 operations: the claims make sure that Cancel is
// called once per operation, not once per Monitor.
func TestMonitorsShareCancel(t *testing.T) {
	const runs, perRun = 20, 30
	prefix := etcdstore.NewPrefix()
	opts := func(id string) *etcdstore.Options { return &etcdstore.Options{ClaimTTL: 5 * time.Second, Identity: id} }
	a := etcdstore.OpenStore(t, etcdstore.NewTestClient(t), prefix, opts("replica-a"))
	b := etcdstore.OpenStore(t, etcdstore.NewTestClient(t), prefix, opts("replica-b"))
	owners := seed(t, a, runs, perRun)
	const reason = "ops: the cluster is being drained"
	requestCancels(t, b, owners, reason)

	c := &cancels{calls: map[string]int{}}
	ctx, stop := context.WithCancel(bg)
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i, s := range []operations.Store{a, b} {
		m := monitor.New(s, c.resolver(), monitor.WithInterval(10*time.Millisecond), monitor.WithWorkers(4))
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = m.Run(ctx) }()
	}
	waitCancelled(t, a, owners, perRun, reason)
	stop()
	wg.Wait()
	for i, err := range errs {
		require.ErrorIs(t, err, context.Canceled, "Run of monitor %d", i)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	require.Len(t, c.calls, runs*perRun, "operations cancelled")
	for key, n := range c.calls {
		require.Equal(t, 1, n, "Cancel calls of %s", key)
	}
}

// TestCancelSurvivesRestart requests the cancel of runs, restarts etcd, and checks that
// the requests are still there; then it stops etcd again in the middle of the pass that
// cancels the operations, and starts it again: the cancel completes after the restart.
func TestCancelSurvivesRestart(t *testing.T) {
	const runs, perRun = 3, 20
	srv := etcdstore.StartServer(t)
	prefix := etcdstore.NewPrefix()
	s := etcdstore.OpenStore(t, etcdstore.NewClient(t, srv), prefix, &etcdstore.Options{RequestTimeout: 300 * time.Millisecond})
	owners := seed(t, s, runs, perRun)
	const reason = "jane: wrong backup"
	requestCancels(t, s, owners, reason)

	srv.Stop()
	require.NoError(t, srv.Restart())
	// A new client and store, as a restarted process would open.
	s = etcdstore.OpenStore(t, etcdstore.NewClient(t, srv), prefix, &etcdstore.Options{RequestTimeout: 300 * time.Millisecond})
	for _, o := range owners {
		r, err := s.GetRun(bg, o)
		require.NoError(t, err)
		require.True(t, r.CancelRequested(), "the request of %s survived the restart", o)
		require.Equal(t, reason, r.Cancel.Reason)
		require.Equal(t, phase.WaitingForPluginOperations, r.Phase)
	}

	down := newRestartMidPass()
	c := &cancels{calls: map[string]int{}, before: down.hold}
	m := monitor.New(s, c.resolver(), monitor.WithInterval(20*time.Millisecond), down.observer())
	ctx, cancel := context.WithCancel(bg)
	stopped := make(chan error)
	go func() { stopped <- m.Run(ctx) }()
	down.run(t, srv)

	waitCancelled(t, s, owners, perRun, reason)
	cancel()
	require.ErrorIs(t, <-stopped, context.Canceled)
	c.mu.Lock()
	defer c.mu.Unlock()
	require.Len(t, c.calls, runs*perRun, "operations cancelled")
}

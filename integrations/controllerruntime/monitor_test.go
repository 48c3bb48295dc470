package controllerruntime

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/itemops/itemops/clock/clocktest"
	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/operations/monitor"
	"github.com/itemops/itemops/operations/operationstest"
	"github.com/itemops/itemops/phase"
	"github.com/itemops/itemops/storage/memstore"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(kube.StopAfter(m))
}

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// blockingStore holds Recover's first call (ListRuns of InProgress runs) until released.
type blockingStore struct {
	operations.Store
	once    sync.Once
	entered chan struct{}
	release chan struct{}
}

func (s *blockingStore) ListRuns(ctx context.Context, f operations.RunFilter) ([]operations.Run, error) {
	s.once.Do(func() {
		close(s.entered)
		<-s.release
	})
	return s.Store.ListRuns(ctx, f)
}

// TestGateHoldsReconcilesUntilRecovered is the race of a reconcile that starts a run
// while Recover runs: the gated reconcile waits, so Recover fails only the run left
// InProgress by the previous process, not the one the reconcile starts.
func TestGateHoldsReconcilesUntilRecovered(t *testing.T) {
	mem := memstore.New()
	stale := operations.Owner{Kind: phase.Backup, Name: "ns/stale"}
	run := operations.Run{Owner: stale, Phase: phase.New}
	require.NoError(t, run.SetPhase(phase.InProgress, "main run started", t0))
	require.NoError(t, mem.CreateRun(context.Background(), run)) // left by a process that died

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	store := &blockingStore{Store: mem, entered: make(chan struct{}), release: make(chan struct{})}
	m := newMonitor(store, operationstest.Resolver(nil), logr.Discard(), []monitor.Option{monitor.WithInterval(time.Hour)})
	fresh := operations.Owner{Kind: phase.Backup, Name: "ns/fresh"}
	var reconciled atomic.Bool
	r := Gate(m, reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
		reconciled.Store(true)
		_, err := operations.StartRun(ctx, mem, operations.Run{Owner: fresh}, func(context.Context) (operations.MainRun, error) {
			return operations.MainRun{Operations: []operations.Operation{{Action: "p", ID: "op-1"}}}, nil
		})
		return reconcile.Result{}, err
	}))
	reconcileDone := make(chan error)
	go func() {
		_, err := r.Reconcile(ctx, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "fresh"}})
		reconcileDone <- err
	}()
	started := make(chan error)
	go func() { started <- m.Start(ctx) }()

	<-store.entered // Recover has begun and is held
	for range 100 {
		time.Sleep(100 * time.Microsecond) // room for an ungated reconcile to run
	}
	require.False(t, reconciled.Load(), "a reconcile ran before Recover ended")
	close(store.release)
	require.NoError(t, <-reconcileDone)
	<-m.Recovered()

	got, err := mem.GetRun(ctx, fresh)
	require.NoError(t, err)
	require.Equal(t, phase.WaitingForPluginOperations, got.Phase)
	got, err = mem.GetRun(ctx, stale)
	require.NoError(t, err)
	require.Equal(t, phase.Failed, got.Phase)

	cancel()
	require.NoError(t, <-started, "a clean shutdown returns nil")
}

// A gated reconcile whose context ends before Recover does returns the context's error.
func TestGateCancelled(t *testing.T) {
	m := newMonitor(memstore.New(), operationstest.Resolver(nil), logr.Discard(), nil)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := Gate(m, reconcile.Func(func(context.Context, reconcile.Request) (reconcile.Result, error) {
		t.Fatal("reconciled")
		return reconcile.Result{}, nil
	})).Reconcile(ctx, reconcile.Request{})
	require.ErrorIs(t, err, context.Canceled)
}

// TestSourceEnqueuesChangedRuns: the objects whose runs the Monitor moved are enqueued,
// on the sources of their kind only.
func TestSourceEnqueuesChangedRuns(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	store := memstore.New()
	tracker := &operationstest.Tracker{ProgressFunc: func(context.Context, operations.Operation) (operations.Progress, error) {
		return operations.Progress{Completed: true}, nil
	}}
	clock := clocktest.NewClock(t0)
	m := newMonitor(store, operationstest.Resolver(map[string]operations.Tracker{"p": tracker}), logr.Discard(),
		[]monitor.Option{monitor.WithClock(clock), monitor.WithInterval(time.Hour)})

	backups := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	restores := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	defer backups.ShutDown()
	defer restores.ShutDown()
	require.NoError(t, m.Source(phase.Backup).Start(ctx, backups))
	require.NoError(t, m.Source(phase.Restore).Start(ctx, restores))

	o := operations.Owner{Kind: phase.Backup, Name: "shop/nightly"}
	_, err := operations.StartRun(ctx, store, operations.Run{Owner: o, Created: t0}, func(context.Context) (operations.MainRun, error) {
		return operations.MainRun{Operations: []operations.Operation{{Action: "p", ID: "op-1"}}}, nil
	})
	require.NoError(t, err)
	started := make(chan error)
	go func() { started <- m.Start(ctx) }()

	req, shutdown := backups.Get()
	require.False(t, shutdown)
	require.Equal(t, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "shop", Name: "nightly"}}, req)
	backups.Done(req)
	require.Zero(t, restores.Len(), "a backup's change is not a restore's")
	cancel()
	require.NoError(t, <-started)
}

// TestNew adds the Monitor to a manager (which is not started: it would need a cluster)
// and registers the metrics; a second Monitor in the process shares them.
func TestNew(t *testing.T) {
	mgr, err := manager.New(&rest.Config{Host: "http://127.0.0.1:1"}, manager.Options{
		Metrics: metricsserver.Options{BindAddress: "0"}, Logger: logr.Discard(),
	})
	require.NoError(t, err)
	m1, err := New(mgr, memstore.New(), operationstest.Resolver(nil))
	require.NoError(t, err)
	m2, err := New(mgr, memstore.New(), operationstest.Resolver(nil))
	require.NoError(t, err)
	require.NotSame(t, m1, m2)
}

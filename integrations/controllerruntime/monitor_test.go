package controllerruntime

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
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
	// Another reconcile, whose context ends while Recover is held, returns the context's
	// error without reconciling; an ungated one would reconcile at once.
	early, stop := context.WithTimeout(ctx, 50*time.Millisecond)
	_, err := r.Reconcile(early, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "fresh"}})
	stop()
	require.ErrorIs(t, err, context.DeadlineExceeded)
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
	require.NoError(t, m.Source(Kind{Name: phase.Backup}).Start(ctx, backups))
	require.NoError(t, m.Source(Kind{Name: phase.Restore}).Start(ctx, restores))

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
// and registers the metrics on controller-runtime's registry; a second Monitor of
// another name in the process shares them.
func TestNew(t *testing.T) {
	mgr, err := manager.New(&rest.Config{Host: "http://127.0.0.1:1"}, manager.Options{
		Metrics: metricsserver.Options{BindAddress: "0"}, Logger: logr.Discard(),
	})
	require.NoError(t, err)
	m1, err := New(mgr, memstore.New(), operationstest.Resolver(nil))
	require.NoError(t, err)
	m2, err := New(mgr, memstore.New(), operationstest.Resolver(nil), WithName("second"))
	require.NoError(t, err)
	require.NotSame(t, m1, m2)
	_, err = m1.RunOnce(context.Background())
	require.NoError(t, err)
	_, err = m2.RunOnce(context.Background())
	require.NoError(t, err)
	got := gatherSeries(t, metrics.Registry)
	for _, name := range []string{"default", "second"} {
		require.Contains(t, got, `itemops_monitor_pass_duration_seconds{monitor="`+name+`"}`, "series: %v", got)
	}
}

// TestNewRegistry: WithRegistry puts a Monitor's metrics, under its name, on the registry
// given, and nil on none; when the manager stops, the Monitor's gauges leave the
// registry, and its counters stay.
func TestNewRegistry(t *testing.T) {
	ctx := context.Background()
	store := memstore.New()
	o := operations.Owner{Kind: phase.Backup, Name: "shop/nightly", UID: "u1"}
	_, err := operations.StartRun(ctx, store, operations.Run{Owner: o, Created: t0}, func(context.Context) (operations.MainRun, error) {
		return operations.MainRun{Operations: []operations.Operation{{Action: "p", ID: "op-1"}}}, nil
	})
	require.NoError(t, err)
	quiet := operationstest.Resolver(map[string]operations.Tracker{"p": &operationstest.Tracker{
		ProgressFunc: func(context.Context, operations.Operation) (operations.Progress, error) {
			return operations.Progress{}, nil
		},
	}})
	mgr, err := manager.New(&rest.Config{Host: "http://127.0.0.1:1"}, manager.Options{
		Metrics: metricsserver.Options{BindAddress: "0"}, Logger: logr.Discard(),
	})
	require.NoError(t, err)
	reg := prometheus.NewRegistry()
	passes := make(chan monitor.PassStats, 100)
	m, err := New(mgr, store, quiet, WithName("east"), WithRegistry(reg), WithMonitorOptions(
		monitor.WithClock(clocktest.NewClock(t0)), monitor.WithInterval(time.Hour),
		monitor.WithObserver(monitor.Observer{Pass: func(s monitor.PassStats) { passes <- s }})))
	require.NoError(t, err)
	unmeasured, err := New(mgr, memstore.New(), quiet, WithName("unmeasured"), WithRegistry(nil))
	require.NoError(t, err)
	_, err = unmeasured.RunOnce(ctx)
	require.NoError(t, err)
	for _, r := range []prometheus.Gatherer{metrics.Registry, reg} {
		for series := range gatherSeries(t, r) {
			require.NotContains(t, series, `monitor="unmeasured"`, "WithRegistry(nil) registered its metrics")
		}
	}

	ctx, cancel := context.WithCancel(ctx)
	done := make(chan error)
	go func() { done <- mgr.Start(ctx) }()
	<-m.Recovered()
	<-passes // the first pass, which the start of Run makes at once
	runs := `itemops_runs{kind="Backup",monitor="east",phase="WaitingForPluginOperations"}`
	got := gatherSeries(t, reg)
	require.Equal(t, 1.0, got[runs], "series: %v", got)
	require.Equal(t, 1.0, got[`itemops_plugin_calls_total{action="p",call="progress",monitor="east",outcome="succeeded"}`], "series: %v", got)
	cancel()
	require.NoError(t, <-done)
	got = gatherSeries(t, reg)
	require.NotContains(t, got, runs, "a stopped Monitor's gauge")
	require.NotContains(t, got, `itemops_operations{monitor="east",phase="New"}`, "a stopped Monitor's gauge")
	require.Equal(t, 1.0, got[`itemops_plugin_calls_total{action="p",call="progress",monitor="east",outcome="succeeded"}`], "series: %v", got)
}

// gatherSeries returns the value of each series of r (a histogram's sample count) by its
// name and labels, as Prometheus writes them.
func gatherSeries(t *testing.T, r prometheus.Gatherer) map[string]float64 {
	t.Helper()
	families, err := r.Gather()
	require.NoError(t, err)
	got := map[string]float64{}
	for _, f := range families {
		for _, mt := range f.GetMetric() {
			var labels []string
			for _, l := range mt.GetLabel() {
				labels = append(labels, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
			}
			v := mt.GetCounter().GetValue() + mt.GetGauge().GetValue() + float64(mt.GetHistogram().GetSampleCount())
			got[f.GetName()+"{"+strings.Join(labels, ",")+"}"] = v
		}
	}
	return got
}

// TestSourceOfAnotherKindLogs: a source given another kind than the runs' (phase.Backup
// for runs of a declared kind) enqueues nothing, and the Monitor says so in its log,
// once per kind.
func TestSourceOfAnotherKindLogs(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var logMu sync.Mutex
	var lines []string
	log := funcr.New(func(prefix, args string) {
		logMu.Lock()
		defer logMu.Unlock()
		lines = append(lines, args)
	}, funcr.Options{})
	snapshots, err := DeclareKind("DatabaseSnapshot", phase.Backup)
	require.NoError(t, err)
	store := memstore.New()
	done := &operationstest.Tracker{ProgressFunc: func(context.Context, operations.Operation) (operations.Progress, error) {
		return operations.Progress{Completed: true}, nil
	}}
	m := newMonitor(store, operationstest.Resolver(map[string]operations.Tracker{"p": done}), log,
		[]monitor.Option{monitor.WithClock(clocktest.NewClock(t0)), monitor.WithInterval(time.Hour)})
	backups := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	defer backups.ShutDown()
	require.NoError(t, m.Source(Kind{Name: phase.Backup}).Start(ctx, backups)) // the mistake
	for _, name := range []string{"a", "b"} {
		obj := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name, UID: types.UID("uid-" + name)}}
		_, err := operations.StartRun(ctx, store, snapshots.Run(obj), func(context.Context) (operations.MainRun, error) {
			return operations.MainRun{Operations: []operations.Operation{{Action: "p", ID: "op-1"}}}, nil
		})
		require.NoError(t, err)
	}
	for range 2 { // each pass moves both runs, a phase on
		_, err := m.RunOnce(ctx)
		require.NoError(t, err)
	}
	require.Zero(t, backups.Len())
	logMu.Lock()
	defer logMu.Unlock()
	var unheard []string
	for _, l := range lines {
		if strings.Contains(l, "no source watches its kind") {
			unheard = append(unheard, l)
		}
	}
	require.Len(t, unheard, 1, "log: %q", lines)
	require.Contains(t, unheard[0], `"kind"="DatabaseSnapshot"`)
	require.Contains(t, unheard[0], `"watched"=["Backup"]`)
}

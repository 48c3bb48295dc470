package controllerruntime

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/itemops/itemops/adapters"
	"github.com/itemops/itemops/clock/clocktest"
	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/operations/monitor"
	"github.com/itemops/itemops/phase"
	"github.com/itemops/itemops/storage/memstore"
)

// jobs is a v2 plugin whose operations are jobs in another system: they run until
// cancelled. It records the object each call was given.
type jobs struct {
	mu        sync.Mutex
	running   map[string]bool      // by operation ID
	cancelled map[string]types.UID // by operation ID: the UID of the object Cancel got
	progress  chan string          // receives the ID of each Progress call, when not nil
}

var _ adapters.BackupItemAction[*corev1.ConfigMap] = (*jobs)(nil)

func newJobs() *jobs {
	return &jobs{running: map[string]bool{}, cancelled: map[string]types.UID{}}
}

// start starts a job and returns the main run that records it.
func (j *jobs) start(ids ...string) func(context.Context) (operations.MainRun, error) {
	return func(context.Context) (operations.MainRun, error) {
		var res operations.MainRun
		j.mu.Lock()
		defer j.mu.Unlock()
		for _, id := range ids {
			j.running[id] = true
			res.Operations = append(res.Operations, operations.Operation{Action: j.Name(), ID: id})
		}
		return res, nil
	}
}

// left returns the IDs of the jobs still running, sorted.
func (j *jobs) left() []string {
	j.mu.Lock()
	defer j.mu.Unlock()
	var out []string
	for id, ok := range j.running {
		if ok {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out
}

func (*jobs) Name() string { return "jobs" }

func (*jobs) AppliesTo(context.Context) (adapters.ResourceSelector, error) {
	return adapters.ResourceSelector{}, nil
}

func (*jobs) Execute(context.Context, runtime.Unstructured, *corev1.ConfigMap) (runtime.Unstructured, []operations.ResourceIdentifier, string, []operations.ResourceIdentifier, error) {
	return nil, nil, "", nil, errors.New("not used")
}

func (j *jobs) Progress(_ context.Context, id string, _ *corev1.ConfigMap) (operations.Progress, error) {
	if j.progress != nil {
		j.progress <- id
	}
	return operations.Progress{}, nil
}

func (j *jobs) Cancel(_ context.Context, id string, obj *corev1.ConfigMap) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.running[id] = false
	j.cancelled[id] = obj.UID
	return nil
}

func newConfigMap(uid types.UID) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: cmKey.Namespace, Name: cmKey.Name, UID: uid}}
}

var cmKey = types.NamespacedName{Namespace: "shop", Name: "nightly"}

// resolverOf returns a registry of j whose objects c fetches.
func resolverOf(t *testing.T, c client.Reader, j *jobs) *adapters.Registry[*corev1.ConfigMap, struct{}] {
	t.Helper()
	reg := adapters.NewRegistry[*corev1.ConfigMap, struct{}](Lookup(c, func() *corev1.ConfigMap { return new(corev1.ConfigMap) }), nil)
	require.NoError(t, reg.RegisterBackupItemAction(j))
	return reg
}

// reconcile is what an operator's reconcile does with the object of cmKey: keep the
// finalizer or act on the deletion, then start the run.
func reconcileConfigMap(ctx context.Context, m *Monitor, c client.Client, main func(context.Context) (operations.MainRun, error)) error {
	var obj corev1.ConfigMap
	if err := c.Get(ctx, cmKey, &obj); err != nil {
		return client.IgnoreNotFound(err)
	}
	if deleted, err := m.HandleDeletion(ctx, c, &obj, Kind{Name: phase.Backup}); deleted || err != nil {
		return err
	}
	_, err := m.StartRun(ctx, operations.Run{Owner: OwnerOf(phase.Backup, &obj)}, main)
	return err
}

// TestDeletionCancelsOperations: deleting an object whose run still waits cancels every
// job through the plugin, which gets the object; then the run and the object are gone.
func TestDeletionCancelsOperations(t *testing.T) {
	ctx := context.Background()
	c := fake.NewClientBuilder().WithObjects(newConfigMap("uid-1")).Build()
	j := newJobs()
	m := newMonitor(memstore.New(), resolverOf(t, c, j), logr.Discard(), nil)

	require.NoError(t, reconcileConfigMap(ctx, m, c, j.start("a", "b")))
	var obj corev1.ConfigMap
	require.NoError(t, c.Get(ctx, cmKey, &obj))
	require.Equal(t, []string{Finalizer}, obj.Finalizers)
	require.Equal(t, []string{"a", "b"}, j.left())

	require.NoError(t, c.Delete(ctx, &obj)) // held by the finalizer
	require.NoError(t, reconcileConfigMap(ctx, m, c, j.start("never")))
	require.Empty(t, j.left(), "jobs left running")
	if diff := cmp.Diff(map[string]types.UID{"a": "uid-1", "b": "uid-1"}, j.cancelled); diff != "" {
		t.Errorf("cancels (-want +got):\n%s", diff)
	}
	_, err := m.store.GetRun(ctx, operations.Owner{Kind: phase.Backup, Name: "shop/nightly"})
	require.ErrorIs(t, err, operations.ErrNotFound)
	require.True(t, apierrors.IsNotFound(c.Get(ctx, cmKey, &obj)), "the finalizer is removed")
}

// TestRecreatedObjectCancelsStaleRun: an object deleted without the finalizer's work and
// created again under its name gets its own run only after the old run's jobs are
// cancelled; the plugin gets a stand-in of the old object (its UID).
func TestRecreatedObjectCancelsStaleRun(t *testing.T) {
	ctx := context.Background()
	c := fake.NewClientBuilder().WithObjects(newConfigMap("uid-1")).Build()
	j := newJobs()
	m := newMonitor(memstore.New(), resolverOf(t, c, j), logr.Discard(), nil)
	old := OwnerOf(phase.Backup, newConfigMap("uid-1"))
	_, err := m.StartRun(ctx, operations.Run{Owner: old}, j.start("old-a", "old-b"))
	require.NoError(t, err)
	require.NoError(t, c.Delete(ctx, newConfigMap("uid-1"))) // no finalizer: gone at once
	require.NoError(t, c.Create(ctx, newConfigMap("uid-2")))

	require.NoError(t, reconcileConfigMap(ctx, m, c, j.start("new-a")))
	require.Equal(t, []string{"new-a"}, j.left())
	if diff := cmp.Diff(map[string]types.UID{"old-a": "uid-1", "old-b": "uid-1"}, j.cancelled); diff != "" {
		t.Errorf("cancels (-want +got):\n%s", diff)
	}
	run, err := m.store.GetRun(ctx, OwnerOf(phase.Backup, newConfigMap("uid-2")))
	require.NoError(t, err)
	require.Equal(t, phase.WaitingForPluginOperations, run.Phase)
	ops, err := m.store.ListOperations(ctx, run.Owner, operations.OperationFilter{})
	require.NoError(t, err)
	require.Len(t, ops, 1)
}

// An owner without a UID is refused: it would take any run of its name.
func TestOwnerWithoutUIDRefused(t *testing.T) {
	ctx := context.Background()
	c := fake.NewClientBuilder().WithObjects(newConfigMap("")).Build()
	j := newJobs()
	m := newMonitor(memstore.New(), resolverOf(t, c, j), logr.Discard(), nil)
	_, err := m.StartRun(ctx, operations.Run{Owner: operations.Owner{Kind: phase.Backup, Name: "shop/nightly"}}, j.start("a"))
	require.ErrorIs(t, err, operations.ErrInvalid)
	_, err = m.HandleDeletion(ctx, c, newConfigMap(""), Kind{Name: phase.Backup})
	require.ErrorIs(t, err, operations.ErrInvalid)
	require.Empty(t, j.left())
}

// startManager starts a manager on c (no cluster: it runs no controller that watches)
// with the Monitor of New, and returns the Monitor; the manager stops at the test's end.
func startManager(t *testing.T, c client.Client, resolver operations.Resolver, opts ...monitor.Option) *Monitor {
	t.Helper()
	return startManagerOn(t, c, memstore.New(), resolver, opts...)
}

// startManagerOn starts a manager whose client is c, with a Monitor over store, and
// returns the Monitor once it has recovered; the manager stops when the test ends.
func startManagerOn(t *testing.T, c client.Client, store operations.Store, resolver operations.Resolver, opts ...monitor.Option) *Monitor {
	t.Helper()
	mgr, err := manager.New(&rest.Config{Host: "http://127.0.0.1:1"}, manager.Options{
		Metrics: metricsserver.Options{BindAddress: "0"}, Logger: logr.Discard(),
		NewClient: func(*rest.Config, client.Options) (client.Client, error) { return c, nil },
	})
	require.NoError(t, err)
	m, err := New(mgr, store, resolver, WithMonitorOptions(opts...))
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
	})
	select {
	case <-m.Recovered():
	case err := <-done:
		t.Fatalf("manager stopped: %v", err)
	}
	return m
}

// TestFirstPollAtOnce: on a manager, a run started while the Monitor waits out its 10 s
// interval is polled at once. The Monitor's clock is fake and never moves, so the
// interval never ends: only the wake of StartRun can bring the poll.
func TestFirstPollAtOnce(t *testing.T) {
	ctx := context.Background()
	c := fake.NewClientBuilder().WithObjects(newConfigMap("uid-1")).Build()
	j := newJobs()
	j.progress = make(chan string, 1)
	clock := clocktest.NewClock(t0)
	passes := make(chan monitor.PassStats, 10)
	m := startManager(t, c, resolverOf(t, c, j), monitor.WithClock(clock), monitor.WithInterval(10*time.Second),
		monitor.WithObserver(monitor.Observer{Pass: func(s monitor.PassStats) { passes <- s }}))
	require.Zero(t, (<-passes).Runs, "the first pass finds no run")
	clock.BlockUntilWaiters(1) // the Monitor waits out its interval

	require.NoError(t, reconcileConfigMap(ctx, m, c, j.start("a")))
	select {
	case id := <-j.progress:
		require.Equal(t, "a", id)
	case <-time.After(time.Minute): // a guard against hanging: no poll can come but the wake's
		t.Fatal("no poll: starting the run did not wake the Monitor")
	}
	require.Equal(t, 1, (<-passes).Runs)
}

// TestDeletionOnManager: the deletion of an object whose jobs run, on a manager whose
// Monitor polls them at the same time, leaves no job running, no run and no object.
func TestDeletionOnManager(t *testing.T) {
	ctx := context.Background()
	c := fake.NewClientBuilder().WithObjects(newConfigMap("uid-1")).Build()
	j := newJobs()
	j.progress = make(chan string, 100)
	m := startManager(t, c, resolverOf(t, c, j), monitor.WithInterval(time.Millisecond))

	require.NoError(t, reconcileConfigMap(ctx, m, c, j.start("a", "b", "c")))
	<-j.progress // the Monitor polls them
	var obj corev1.ConfigMap
	require.NoError(t, c.Get(ctx, cmKey, &obj))
	require.NoError(t, c.Delete(ctx, &obj))
	require.NoError(t, reconcileConfigMap(ctx, m, c, j.start("never")))
	require.Empty(t, j.left(), "jobs left running")
	_, err := m.store.GetRun(ctx, operations.Owner{Kind: phase.Backup, Name: "shop/nightly"})
	require.ErrorIs(t, err, operations.ErrNotFound)
	require.True(t, apierrors.IsNotFound(c.Get(ctx, cmKey, &obj)))
}

// A second Monitor over one store, or of one name, in one manager is refused, and the
// refused New holds neither; over another store and with another name it is welcome.
func TestNewRefusesSecondMonitorOverOneStore(t *testing.T) {
	mgr, err := manager.New(&rest.Config{Host: "http://127.0.0.1:1"}, manager.Options{
		Metrics: metricsserver.Options{BindAddress: "0"}, Logger: logr.Discard(),
	})
	require.NoError(t, err)
	store := memstore.New()
	_, err = New(mgr, store, newJobsResolver(), WithRegistry(nil))
	require.NoError(t, err)
	_, err = New(mgr, store, newJobsResolver(), WithRegistry(nil), WithName("second"))
	require.ErrorIs(t, err, ErrDuplicateMonitor)
	require.ErrorContains(t, err, "over *memstore.Store")
	_, err = New(mgr, memstore.New(), newJobsResolver(), WithRegistry(nil))
	require.ErrorIs(t, err, ErrDuplicateMonitor)
	require.ErrorContains(t, err, `named "default"`)
	_, err = New(mgr, memstore.New(), newJobsResolver(), WithRegistry(nil), WithName("second"))
	require.NoError(t, err, "the refused New kept the name")
	_, err = New(mgr, nil, newJobsResolver())
	require.ErrorIs(t, err, operations.ErrInvalid)
}

func newJobsResolver() operations.Resolver {
	return adapters.NewRegistry[*corev1.ConfigMap, struct{}](nil, nil)
}

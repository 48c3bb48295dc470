package controllerruntime

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"sync"

	"github.com/go-logr/logr"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/itemops/itemops/integrations/controllerruntime/prommetrics"
	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/operations/monitor"
	"github.com/itemops/itemops/phase"
)

// A Monitor is a [monitor.Monitor] that runs in a controller-runtime manager: see
// [New]. Its methods are safe for concurrent use.
type Monitor struct {
	*monitor.Monitor

	store operations.Store

	recovered   chan struct{} // closed once Recover has succeeded
	recoverOnce sync.Once

	// queuesMu guards queues: the workqueues of the started sources, by kind.
	queuesMu sync.Mutex
	queues   map[phase.Kind][]*queue
}

type queue struct {
	q workqueue.TypedRateLimitingInterface[reconcile.Request]
}

// New returns a Monitor of the runs in store, whose plugins resolver finds, and adds it
// to mgr. opts are passed to [monitor.New] after the integration's own: the
// manager's logger, named "itemops" (through logr's slog bridge), an observer of the run
// changes its sources need, and the metrics of package prommetrics, registered on
// controller-runtime's metrics registry (shared with the other Monitors of the process,
// whose counts add up). A WithLogger among opts replaces the logger.
//
// The Monitor runs only on the elected leader (when the manager has leader election).
// When the manager starts it, it calls [monitor.Monitor.Recover], then runs
// [monitor.Monitor.Run] until the manager stops, and returns nil then. A failure of
// Recover stops the manager: the restart rules must be applied before any run is
// started. Reconcilers wrapped with [Gate] wait for Recover.
//
// New fails with an error wrapping [ErrDuplicateMonitor] when mgr already has a Monitor
// over store (two would poll every operation twice), with one wrapping
// [operations.ErrInvalid] for a nil store or manager, and when the metrics cannot be
// registered or the manager refuses the runnable.
func New(mgr manager.Manager, store operations.Store, resolver operations.Resolver, opts ...monitor.Option) (*Monitor, error) {
	if err := claimStore(mgr, store); err != nil {
		return nil, err
	}
	pm := prommetrics.New()
	if err := pm.Register(metrics.Registry); err != nil {
		releaseStore(mgr, store)
		return nil, fmt.Errorf("register itemops metrics: %w", err)
	}
	m := newMonitor(store, resolver, mgr.GetLogger().WithName("itemops"), append(pm.MonitorOptions(), opts...))
	if err := mgr.Add(manager.RunnableFunc(m.Start)); err != nil {
		releaseStore(mgr, store)
		return nil, err
	}
	return m, nil
}

// ErrDuplicateMonitor is the error (wrapped) of [New] for a second Monitor over one store
// in one manager.
var ErrDuplicateMonitor = errors.New("a Monitor over this store is already in this manager")

// monitored holds the managers and stores that [New] has paired. An entry lives as long
// as the process: managers are not many, and nothing says when one is done with.
var (
	monitoredMu sync.Mutex
	monitored   = map[[2]any]bool{}
)

// claimStore records that mgr has a Monitor over store, or fails with
// ErrDuplicateMonitor. A store whose type cannot be compared (not a pointer, as the
// stores of itemops are) is not recorded, and never refused.
func claimStore(mgr manager.Manager, store operations.Store) error {
	if store == nil || mgr == nil {
		return fmt.Errorf("controllerruntime: new Monitor: nil store or manager: %w", operations.ErrInvalid)
	}
	if !reflect.TypeOf(store).Comparable() || !reflect.TypeOf(mgr).Comparable() {
		return nil
	}
	monitoredMu.Lock()
	defer monitoredMu.Unlock()
	key := [2]any{mgr, store}
	if monitored[key] {
		return fmt.Errorf("controllerruntime: new Monitor over %T: %w", store, ErrDuplicateMonitor)
	}
	monitored[key] = true
	return nil
}

// releaseStore undoes claimStore, for a New that failed.
func releaseStore(mgr manager.Manager, store operations.Store) {
	if !reflect.TypeOf(store).Comparable() || !reflect.TypeOf(mgr).Comparable() {
		return
	}
	monitoredMu.Lock()
	defer monitoredMu.Unlock()
	delete(monitored, [2]any{mgr, store})
}

func newMonitor(store operations.Store, resolver operations.Resolver, log logr.Logger, opts []monitor.Option) *Monitor {
	m := &Monitor{
		store:     store,
		recovered: make(chan struct{}),
		queues:    make(map[phase.Kind][]*queue),
	}
	base := []monitor.Option{
		monitor.WithLogger(slog.New(logr.ToSlogHandler(log))),
		monitor.WithObserver(monitor.Observer{RunChanged: m.enqueue}),
	}
	m.Monitor = monitor.New(store, resolver, append(base, opts...)...)
	return m
}

// Start applies the restart rules, then runs the Monitor until ctx ends, and returns
// nil then; it fails with the error of Recover. [New] adds it to the manager, which
// calls it; call it only once.
func (m *Monitor) Start(ctx context.Context) error {
	if _, err := m.Recover(ctx); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("itemops: recover: %w", err)
	}
	m.recoverOnce.Do(func() { close(m.recovered) })
	err := m.Run(ctx)
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return nil
	}
	return err
}

// Recovered returns a channel closed once the Monitor has applied the restart rules.
func (m *Monitor) Recovered() <-chan struct{} { return m.recovered }

// Gate returns a reconciler that waits until m has applied the restart rules, then calls
// r. A reconcile that waits returns ctx.Err() when ctx ends first. Wrap every reconciler
// that starts runs with it: a run started before Recover could be failed by it.
func Gate[request comparable](m *Monitor, r reconcile.TypedReconciler[request]) reconcile.TypedReconciler[request] {
	return reconcile.TypedFunc[request](func(ctx context.Context, req request) (reconcile.Result, error) {
		select {
		case <-m.recovered:
		case <-ctx.Done():
			return reconcile.Result{}, ctx.Err()
		}
		return r.Reconcile(ctx, req)
	})
}

// Source returns a source that enqueues, for each run of kind that the Monitor changes
// (see [monitor.RunChange]), the object [ObjectKey] names. A change is delivered to
// every source of its kind started at the time; the workqueue merges requests for one
// object. Changes made before a source starts are not delivered to it (a controller
// reconciles every object when it starts anyway).
func (m *Monitor) Source(kind phase.Kind) source.Source {
	return source.Func(func(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
		entry := &queue{q: q}
		m.queuesMu.Lock()
		m.queues[kind] = append(m.queues[kind], entry)
		m.queuesMu.Unlock()
		context.AfterFunc(ctx, func() {
			m.queuesMu.Lock()
			defer m.queuesMu.Unlock()
			qs := m.queues[kind]
			for i, e := range qs {
				if e == entry {
					m.queues[kind] = append(qs[:i:i], qs[i+1:]...)
					break
				}
			}
		})
		return nil
	})
}

// enqueue adds a request for the object of the run c changed to each workqueue of its
// kind. Adding to a workqueue never blocks, so the Monitor's pass is not held up.
func (m *Monitor) enqueue(c monitor.RunChange) {
	req := reconcile.Request{NamespacedName: ObjectKey(c.Owner)}
	m.queuesMu.Lock()
	defer m.queuesMu.Unlock()
	for _, e := range m.queues[c.Owner.Kind] {
		e.q.Add(req)
	}
}

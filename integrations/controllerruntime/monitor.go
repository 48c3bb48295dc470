package controllerruntime

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"reflect"
	"slices"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/itemops/itemops/integrations/controllerruntime/prommetrics"
	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/operations/decorate"
	"github.com/itemops/itemops/operations/monitor"
	"github.com/itemops/itemops/phase"
)

// A Monitor is a [monitor.Monitor] that runs in a controller-runtime manager: see
// [New]. Its methods are safe for concurrent use.
type Monitor struct {
	*monitor.Monitor

	store    operations.Store
	log      logr.Logger
	shared   bool                  // WithSharedClaims: on every replica, no takeover
	reporter *prommetrics.Reporter // nil without metrics

	recovered   chan struct{} // closed once Recover has succeeded
	recoverOnce sync.Once

	// passMu guards passEnd and running: passEnd is closed, and replaced, when a pass
	// of the Monitor's Run ends, and running says whether Run is under way (Start has
	// called it and it has not returned), so that endRun can tell a claim held by the
	// Monitor's own pass from one held by another Monitor.
	passMu  sync.Mutex
	passEnd chan struct{}
	running bool

	blocked blocked // the errors that keep runs from moving, for RunBlocked

	// queuesMu guards queues, unheard and shown: the workqueues of the started
	// sources, by kind, and when each run's object was last enqueued, or will be.
	queuesMu sync.Mutex
	queues   map[phase.Kind][]*queue
	unheard  map[phase.Kind]bool // the kinds whose changes no source took, logged once
	// shown holds, for each run whose object was enqueued within the last
	// progressEvery, when it was, or, when later than now, when a request for a change
	// of progress only is due (see enqueue).
	shown         map[blockedKey]time.Time
	progressEvery time.Duration // WithProgressInterval; 0: progress enqueued at once
}

type queue struct {
	q workqueue.TypedRateLimitingInterface[reconcile.Request]
}

// New returns a Monitor of the runs in store, whose plugins resolver finds, and adds it
// to mgr. The Monitor logs through the manager's logger, named "itemops" (through logr's
// slog bridge), and reports the metrics of package prommetrics, under the label
// monitor="default", on controller-runtime's metrics registry, which the manager serves;
// opts change these ([WithName], [WithRegistry]) and pass options to [monitor.New]
// ([WithMonitorOptions]).
//
// The Monitor runs only on the elected leader (when the manager has leader election),
// or, with [WithSharedClaims], on every replica. When the manager starts it, it takes
// over the claims of the other replicas (see [Monitor.Start]; not with
// WithSharedClaims), calls [monitor.Monitor.Recover], then runs [monitor.Monitor.Run]
// until the manager stops, and returns nil then; its gauges leave the registry when it
// returns (see prommetrics.Reporter.Close). A failure of Recover stops the manager: the
// restart rules must be applied before any run is started. Reconcilers wrapped with
// [Gate] wait for Recover.
//
// New fails with an error wrapping [ErrDuplicateMonitor] when mgr already has a Monitor
// over store (two would poll every operation twice) or of the same name (their series
// would be one), with one wrapping [operations.ErrInvalid] for a nil store or manager,
// or for WithSharedClaims over a store that is not an [operations.RunClaimer] (every
// replica would poll every run), and when the metrics cannot be registered or the
// manager refuses the runnable.
func New(mgr manager.Manager, store operations.Store, resolver operations.Resolver, opts ...Option) (*Monitor, error) {
	cfg := config{name: "default", registry: metrics.Registry, progressEvery: DefaultProgressInterval}
	for _, o := range opts {
		o.apply(&cfg)
	}
	if _, ok := store.(operations.RunClaimer); cfg.shared && store != nil && !ok {
		return nil, fmt.Errorf("controllerruntime: new Monitor: WithSharedClaims over %T, which has no claims: %w", store, operations.ErrInvalid)
	}
	claims, err := claim(mgr, store, cfg.name)
	if err != nil {
		return nil, err
	}
	var reporter *prommetrics.Reporter
	mopts := cfg.monitorOptions
	if cfg.registry != nil {
		pm := prommetrics.New()
		if err := pm.Register(cfg.registry); err != nil {
			release(claims)
			return nil, fmt.Errorf("register itemops metrics: %w", err)
		}
		reporter = pm.Reporter(cfg.name)
		mopts = append(reporter.MonitorOptions(), mopts...)
	}
	m := newMonitor(store, resolver, mgr.GetLogger().WithName("itemops"), mopts)
	m.reporter = reporter
	m.shared = cfg.shared
	m.progressEvery = cfg.progressEvery
	var runnable manager.Runnable = manager.RunnableFunc(m.Start) // on the leader alone
	if cfg.shared {
		runnable = everyReplica(m.Start)
	}
	if err := mgr.Add(runnable); err != nil {
		release(claims)
		return nil, err
	}
	return m, nil
}

// An Option configures a Monitor that [New] builds.
type Option interface{ apply(*config) }

type config struct {
	name           string
	registry       prometheus.Registerer
	monitorOptions []monitor.Option
	shared         bool
	progressEvery  time.Duration
}

// everyReplica is the runnable of a Monitor with shared claims, which the manager runs
// whether or not it leads (see manager.LeaderElectionRunnable).
type everyReplica func(context.Context) error

func (f everyReplica) Start(ctx context.Context) error { return f(ctx) }

func (everyReplica) NeedLeaderElection() bool { return false }

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

// WithName names the Monitor: its metrics carry the label monitor=name. A manager takes
// one Monitor of each name. The default is "default"; name a second Monitor of a
// manager.
func WithName(name string) Option {
	return optionFunc(func(c *config) { c.name = name })
}

// WithRegistry registers the Monitor's metrics on r. The default is controller-runtime's
// metrics.Registry, which the manager serves; nil registers no metrics.
func WithRegistry(r prometheus.Registerer) Option {
	return optionFunc(func(c *config) { c.registry = r })
}

// DefaultProgressInterval is how often, at most, [Monitor.Source] enqueues an object
// whose run only progressed, unless [WithProgressInterval] says otherwise.
const DefaultProgressInterval = 30 * time.Second

// WithProgressInterval bounds how often [Monitor.Source] enqueues the object of a run
// whose operations only progressed (see monitor.RunChange.Progressed): at most once
// every d, so that a reconcile that writes the status ([RunStatus.SetFromStore])
// writes progress at most that often per object. The first such change after a
// request for the object is enqueued at once when the last request is d old, else
// enqueued to come d after it; the changes in between are merged into that one, and
// the reconcile shows the latest. A change of phase, an operation that ended, and a
// run blocked or unblocked ([Monitor.RunBlocked]) are enqueued at once, whatever d.
// The default is [DefaultProgressInterval]; d ≤ 0 enqueues every change at once. The
// Monitor writes progress to its store as often as it polls, unless
// monitor.WithProgressWriteInterval holds it back longer (pass it in
// [WithMonitorOptions]): the status cannot show progress more often than the store has
// it.
func WithProgressInterval(d time.Duration) Option {
	return optionFunc(func(c *config) { c.progressEvery = max(d, 0) })
}

// WithMonitorOptions passes opts to [monitor.New], after the integration's own options
// (the logger, the observers of the sources and the metrics): a monitor.WithLogger among
// them replaces the logger. Each WithMonitorOptions adds to those before it.
func WithMonitorOptions(opts ...monitor.Option) Option {
	return optionFunc(func(c *config) { c.monitorOptions = append(c.monitorOptions, opts...) })
}

// WithSharedClaims runs the Monitor on every replica of the operator, elected leader or
// not, and has the replicas share the runs through the store's claims: each run is
// polled by one replica at a time, and with a store that keeps claims from pass to pass
// ([operations.ClaimKeeper], as storage/kubestore and storage/etcdstore do) they balance
// the runs among them. The Monitor never takes over the others' claims: the runs of a
// replica that dies wait until its claims end by themselves (storage/kubestore's
// Options.ClaimTTL after its last renewal, as the others see it). The store must be an
// [operations.RunClaimer] that the replicas share ([New] fails otherwise).
//
// Without it (the default) the Monitor runs only on the leader that the manager's
// leader election elects, and when the store is an [operations.ClaimTaker] it ends the
// claims of every other replica as it starts, before Recover (see [Monitor.Start]), so
// that a leader newly elected polls at once the runs that a dead leader held. The
// controllers of an operator run on the leader alone by default too: see the
// operator guide (docs/operators.md, "Replica models") for what each model costs.
// Several replicas whose managers have no leader election must be given
// WithSharedClaims: without it each of them, as its Monitor starts, ends the claims of
// the others, which then start new sessions. A run may then be polled by two of them in
// the passes that follow, and, worse, the starting replica's restart rules (Recover)
// get the claims of the runs whose main runs another replica is running, and fail them.
func WithSharedClaims() Option {
	return optionFunc(func(c *config) { c.shared = true })
}

// ErrDuplicateMonitor is the error (wrapped) of [New] for a second Monitor over one store,
// or of one name, in one manager.
var ErrDuplicateMonitor = errors.New("a Monitor over this store, or of this name, is already in this manager")

// monitored holds the stores and names of the Monitors that [New] has added to each
// manager. An entry lives as long as the process: managers are not many, and nothing
// says when one is done with.
var (
	monitoredMu sync.Mutex
	monitored   = map[[2]any]bool{}
)

// claim records that mgr has a Monitor over store and one named name, or fails with
// ErrDuplicateMonitor, recording nothing. It returns the keys it recorded, for release. A
// store whose type cannot be compared (not a pointer, as the stores of itemops are) is
// not recorded, and never refused; nor are the names of such a manager.
func claim(mgr manager.Manager, store operations.Store, name string) ([][2]any, error) {
	if store == nil || mgr == nil {
		return nil, fmt.Errorf("controllerruntime: new Monitor: nil store or manager: %w", operations.ErrInvalid)
	}
	if !reflect.TypeOf(mgr).Comparable() {
		return nil, nil
	}
	keys := [][2]any{{mgr, monitorName(name)}}
	if reflect.TypeOf(store).Comparable() {
		keys = append(keys, [2]any{mgr, store})
	}
	monitoredMu.Lock()
	defer monitoredMu.Unlock()
	if monitored[keys[0]] {
		return nil, fmt.Errorf("controllerruntime: new Monitor named %q: %w", name, ErrDuplicateMonitor)
	}
	if len(keys) > 1 && monitored[keys[1]] {
		return nil, fmt.Errorf("controllerruntime: new Monitor over %T: %w", store, ErrDuplicateMonitor)
	}
	for _, k := range keys {
		monitored[k] = true
	}
	return keys, nil
}

// monitorName is the type of a name among the keys of monitored, apart from any store.
type monitorName string

// release undoes claim, for a New that failed.
func release(keys [][2]any) {
	monitoredMu.Lock()
	defer monitoredMu.Unlock()
	for _, k := range keys {
		delete(monitored, k)
	}
}

func newMonitor(store operations.Store, resolver operations.Resolver, log logr.Logger, opts []monitor.Option) *Monitor {
	m := &Monitor{
		store:     store,
		log:       log,
		recovered: make(chan struct{}),
		passEnd:   make(chan struct{}),
		blocked:   blocked{runs: make(map[blockedKey]*BlockedError)},
		queues:    make(map[phase.Kind][]*queue),
		unheard:   make(map[phase.Kind]bool),
		shown:     make(map[blockedKey]time.Time),
	}
	base := []monitor.Option{
		monitor.WithLogger(slog.New(logr.ToSlogHandler(log))),
		monitor.WithObserver(monitor.Observer{RunChanged: m.enqueue, Pass: m.passEnded}),
	}
	// The Monitor's calls go through m.around, which records the errors that keep runs
	// from moving (RunBlocked); decorate.Store keeps the store's optional abilities.
	m.Monitor = monitor.New(decorate.Store(store, m.around), resolver, append(base, opts...)...)
	return m
}

// Start applies the restart rules, then runs the Monitor until ctx ends, and returns
// nil then; it fails with the error of Recover. Either way it removes the Monitor's
// gauges from its metrics before it returns. [New] adds it to the manager, which calls
// it; call it only once.
//
// Unless the Monitor has [WithSharedClaims], Start first takes over the claims of the
// other replicas when the store is an [operations.ClaimTaker]
// ([operations.ClaimTaker.TakeOverClaims]): it runs on the elected leader alone, and the
// runs a dead leader held are then polled by the first pass, without waiting for its
// claims to end. It logs at Info how many replicas' sessions it ended. A takeover that
// fails is logged as an error and does not stop the Monitor: the claims it did not end
// end by themselves, and the runs they hold are polled then.
func (m *Monitor) Start(ctx context.Context) error {
	if m.reporter != nil {
		defer m.reporter.Close()
	}
	m.takeOver(ctx)
	if _, err := m.Recover(ctx); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("itemops: recover: %w", err)
	}
	m.recoverOnce.Do(func() { close(m.recovered) })
	m.setRunning(true)
	err := m.Run(ctx)
	m.setRunning(false)
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return nil
	}
	return err
}

// takeOver ends the claims of the other replicas, as Start says.
func (m *Monitor) takeOver(ctx context.Context) {
	taker, ok := m.store.(operations.ClaimTaker)
	if m.shared || !ok {
		return
	}
	ended, err := taker.TakeOverClaims(ctx)
	switch {
	case ctx.Err() != nil:
	case err != nil:
		m.log.Error(err, "could not take over the claims of other replicas; the runs they hold wait until their claims expire",
			"sessionsEnded", ended)
	default:
		m.log.Info("took over the claims of other replicas: their runs are polled from the first pass", "sessionsEnded", ended)
	}
}

// setRunning records whether the Monitor's Run is under way, and wakes those who wait
// for the end of a pass when it stops: no pass will end then.
func (m *Monitor) setRunning(on bool) {
	m.passMu.Lock()
	defer m.passMu.Unlock()
	m.running = on
	if !on {
		close(m.passEnd)
		m.passEnd = make(chan struct{})
	}
}

// passEnded is the Monitor's Pass observer: it wakes those who wait for the end of a pass.
func (m *Monitor) passEnded(monitor.PassStats) {
	m.passMu.Lock()
	close(m.passEnd)
	m.passEnd = make(chan struct{})
	m.passMu.Unlock()
	m.forgetShown(time.Now())
}

// nextPassEnd returns a channel closed when the Monitor's next pass ends (or its Run
// stops), and whether its Run is under way now.
func (m *Monitor) nextPassEnd() (<-chan struct{}, bool) {
	m.passMu.Lock()
	defer m.passMu.Unlock()
	return m.passEnd, m.running
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

// Source returns a source that enqueues, for each run of kind k (k.Name) that the
// Monitor changes (see [monitor.RunChange]), the object [ObjectKey] names. Pass it the
// Kind the reconciler starts its runs with ([Kind.Run]): a source of another kind never
// enqueues them. A change is delivered to every source of its kind started at the time;
// the workqueue merges requests for one object. A change of progress only
// (monitor.RunChange.Progressed) is delivered at most once every [WithProgressInterval]
// per run, the changes in between merged into one request at the interval's end; a
// phase change, operations that ended, and a run blocked or unblocked are delivered at
// once. Changes made before a source starts are
// not delivered to it (a controller reconciles every object when it starts anyway).
//
// When the Monitor changes a run of a kind that no started source watches while some
// source is started, it logs so, once per kind, naming the kinds the sources watch.
func (m *Monitor) Source(k Kind) source.Source {
	kind := k.Name
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
			if len(m.queues[kind]) == 0 {
				delete(m.queues, kind)
			}
		})
		return nil
	})
}

// enqueue adds a request for the object of the run c changed to each workqueue of its
// kind: at once, or, for a change of progress only, at most once every progressEvery
// (see WithProgressInterval). Adding to a workqueue never blocks, so the Monitor's pass
// is not held up.
func (m *Monitor) enqueue(c monitor.RunChange) {
	req := reconcile.Request{NamespacedName: ObjectKey(c.Owner)}
	m.queuesMu.Lock()
	defer m.queuesMu.Unlock()
	qs := m.queues[c.Owner.Kind]
	delay, add := m.due(c, time.Now())
	for _, e := range qs {
		switch {
		case !add:
		case delay > 0:
			e.q.AddAfter(req, delay)
		default:
			e.q.Add(req)
		}
	}
	if len(qs) == 0 && len(m.queues) > 0 && !m.unheard[c.Owner.Kind] {
		m.unheard[c.Owner.Kind] = true
		watched := slices.Sorted(maps.Keys(m.queues))
		m.log.Info("a run changed, but no source watches its kind: pass Monitor.Source the Kind the runs are started with",
			"kind", c.Owner.Kind, "watched", watched)
	}
}

// due returns when the request for the object of c's run is to be added, at now: after
// delay (at once when it is 0), or not at all (add is false) when a request for an
// earlier change of progress is due later and will show this one too. It records the
// time in m.shown, and forgets a run that ended. queuesMu must be held.
func (m *Monitor) due(c monitor.RunChange, now time.Time) (delay time.Duration, add bool) {
	k := keyOfOwner(c.Owner)
	if !c.Progressed || m.progressEvery <= 0 {
		if c.To != "" && phase.IsTerminal(c.To) {
			delete(m.shown, k)
		} else {
			m.shown[k] = now
		}
		return 0, true
	}
	last, ok := m.shown[k]
	switch next := last.Add(m.progressEvery); {
	case !ok || !now.Before(next):
		m.shown[k] = now
		return 0, true
	case last.After(now):
		return 0, false // a request is due at last
	default:
		m.shown[k] = next
		return next.Sub(now), true
	}
}

// forgetShown forgets the runs whose objects were last enqueued progressEvery before
// now or earlier, with no request due: a change of their progress is enqueued at once,
// as it would be were they remembered. It keeps m.shown to the runs that moved lately.
func (m *Monitor) forgetShown(now time.Time) {
	m.queuesMu.Lock()
	defer m.queuesMu.Unlock()
	for k, t := range m.shown {
		if !now.Before(t.Add(m.progressEvery)) {
			delete(m.shown, k)
		}
	}
}

package velero_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	velerov1api "github.com/vmware-tanzu/velero/pkg/apis/velero/v1"
	"github.com/vmware-tanzu/velero/pkg/builder"
	"github.com/vmware-tanzu/velero/pkg/itemoperation"
	"github.com/vmware-tanzu/velero/pkg/itemoperationmap"
	"github.com/vmware-tanzu/velero/pkg/plugin/clientmgmt"
	"github.com/vmware-tanzu/velero/pkg/plugin/clientmgmt/process"
	"github.com/vmware-tanzu/velero/pkg/plugin/framework"
	vplugin "github.com/vmware-tanzu/velero/pkg/plugin/velero"

	itemvelero "github.com/itemops/itemops/integrations/velero"
	"github.com/itemops/itemops/integrations/velero/internal/benchplugin"
	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/operations/monitor"
	"github.com/itemops/itemops/phase"
	"github.com/itemops/itemops/storage/memstore"
)

// TestMain runs the tests, then removes the plugin binary the benchmarks built, if
// they built one. When the process was started as Velero's plugin binary, it serves
// Velero's plugins instead: Velero's plugin registry asks the program it runs in
// (os.Args[0], with the argument "run-plugins", which Velero's own binary answers with
// the plugins built into it) for its plugins before it asks the binaries of the plugin
// directory, and here that program is the test binary, which has none.
func TestMain(m *testing.M) {
	if servingPlugins() {
		framework.NewServer().Serve()
		return
	}
	code := m.Run()
	pluginBinary.remove()
	os.Exit(code)
}

// servingPlugins reports whether Velero's plugin registry started this process to ask
// it for its plugins: go-plugin sets the handshake's cookie in the environment of the
// processes it starts.
func servingPlugins() bool {
	h := framework.Handshake()
	return len(os.Args) > 1 && os.Args[1] == "run-plugins" && os.Getenv(h.MagicCookieKey) == h.MagicCookieValue
}

// A builtPlugin is internal/cmd/benchplugin, built at most once per test process, and
// only by a benchmark that needs it, into a directory of its own: Velero's plugin
// directory.
type builtPlugin struct {
	once sync.Once
	dir  string
	err  error
}

var pluginBinary builtPlugin

// pluginDir returns the plugin directory, building the plugin binary into it the first
// time.
func pluginDir(b *testing.B) string {
	b.Helper()
	p := &pluginBinary
	p.once.Do(func() {
		if p.dir, p.err = os.MkdirTemp("", "itemops-velero-plugins-"); p.err != nil {
			return
		}
		// The go command is on PATH: go test puts its own first.
		cmd := exec.Command("go", "build", "-o", filepath.Join(p.dir, "itemops-bench-plugin"), "./internal/cmd/benchplugin")
		if out, err := cmd.CombinedOutput(); err != nil {
			p.err = fmt.Errorf("build the plugin: %w\n%s", err, out)
		}
	})
	if p.err != nil {
		b.Fatal(p.err)
	}
	return p.dir
}

// remove removes the plugin directory, if one was made.
func (p *builtPlugin) remove() {
	if p.dir != "" {
		os.RemoveAll(p.dir)
	}
}

// BenchmarkRealPlugins polls 10,000 operations (100 waiting backups of 100 InProgress
// operations) through a real Velero plugin: package benchplugin's BackupItemAction v2,
// built into a binary, served by Velero's plugin framework from a process of its own,
// and called over gRPC through Velero's plugin registry and manager (clientmgmt), as
// Velero's server calls its plugins. The plugin answers each Progress with progress
// that has moved on and never completes, at once or after a delay (delay=0ms, 2ms), so
// every pass calls Progress once for every operation and has every operation to write.
// One op is one pass over the 10,000 operations; ops/s counts operations polled. The
// ways of making a pass (they run in the order velero-sequential, pool-no-store,
// pool-workers, pool, monitor):
//
//   - velero-sequential: Velero's way: for each backup in turn, its operations as
//     Velero's item-operations map holds them in memory, one Progress call after
//     another through the plugin manager, the status updated from each report and the
//     operations put back into the map.
//   - pool-no-store: the standard pattern with nothing but the calls: 64 goroutines
//     at a time, each call under context.WithTimeout in a goroutine with recover,
//     through the Resolver; no store.
//   - pool: the standard pattern doing a pass: the waiting runs listed from a memstore,
//     64 polled at a time; each run's unfinished operations listed, their calls made as
//     in pool-no-store (64 at a time across all runs), the reports copied into the
//     operations and the run's operations written in one batch.
//   - pool-workers: the pool with 64 goroutines that each pass starts, each checking
//     operations one after another and making their calls itself, still under
//     context.WithTimeout and with recover: the classic worker pool, which cannot give
//     up a call that hangs (Velero's plugin calls take no context, so only a goroutine
//     of the call's own can be left behind). Beside the pool, it shows what a goroutine
//     per call costs.
//   - monitor: the itemops Monitor with 64 workers over a memstore, one RunOnce.
//
// Each also reports client-cpu-us/operation and plugin-cpu-us/operation, the CPU time
// the benchmark's process and the plugin's spent per operation polled, which the other
// work on a shared machine disturbs far less than the wall time. The Monitor also
// reports of-pool and of-velero-sequential: its operations per second over those of the
// pool and of the sequential loop measured before it in the same process (their mean,
// when -count repeated them; go test runs each sub-benchmark -count times in a row, so
// run the command several times with -count 1 to pair each Monitor figure with the
// baselines measured minutes before it). Run with -benchtime=3x: the sequential pass
// over a plugin that waits 2 ms waits for each of its 10,000 calls, 20 s in all.
func BenchmarkRealPlugins(b *testing.B) {
	for _, delay := range []time.Duration{0, 2 * time.Millisecond} {
		b.Run(fmt.Sprintf("delay=%dms", delay.Milliseconds()), func(b *testing.B) {
			b.Setenv(benchplugin.DelayEnv, delay.String()) // before the plugin process starts
			f := newRealFixture(b, pluginDir(b))
			rates := passRates{}
			run := func(name string, setup func(b *testing.B) func(context.Context) (int, error)) {
				b.Run("impl="+name, func(b *testing.B) {
					pass := setup(b)
					ctx := context.Background()
					b.ReportAllocs()
					b.ResetTimer()
					cpu, pluginCPU := benchplugin.ProcessCPU(), f.pluginCPU(b)
					for range b.N {
						n, err := pass(ctx)
						if err != nil {
							b.Fatal(err)
						}
						if n != benchRuns*benchPerRun {
							b.Fatalf("a pass polled %d operations, want %d", n, benchRuns*benchPerRun)
						}
					}
					cpu, pluginCPU = benchplugin.ProcessCPU()-cpu, f.pluginCPU(b)-pluginCPU
					polled := float64(benchRuns * benchPerRun * b.N)
					perSec := polled / b.Elapsed().Seconds()
					b.ReportMetric(perSec, "ops/s")
					if cpu > 0 && pluginCPU > 0 {
						b.ReportMetric(float64(cpu.Microseconds())/polled, "client-cpu-us/operation")
						b.ReportMetric(float64(pluginCPU.Microseconds())/polled, "plugin-cpu-us/operation")
					}
					rates.add(name, b.N, perSec)
					if name != "monitor" {
						return
					}
					for _, base := range []string{"pool", "velero-sequential"} {
						if r, ok := rates.of(base); ok {
							b.ReportMetric(perSec/r, "of-"+base)
						}
					}
				})
			}
			run("velero-sequential", f.sequential)
			run("pool-no-store", f.poolNoStore)
			run("pool-workers", f.poolWorkers)
			run("pool", f.pool)
			run("monitor", f.monitor)
		})
	}
}

// passRates holds the operations per second each way of making a pass reached, by its
// name.
type passRates map[string]*rates

// rates are the results of the runs go test reports, and that of its first probe (b.N
// = 1), which it reports only when -benchtime is 1x.
type rates struct {
	results []float64
	probe   float64
}

func (r passRates) add(name string, n int, perSec float64) {
	if r[name] == nil {
		r[name] = &rates{}
	}
	if n == 1 {
		r[name].probe = perSec
		return
	}
	r[name].results = append(r[name].results, perSec)
}

// of returns the mean of the results of name, or its probe when it has none; false
// when name has not run.
func (r passRates) of(name string) (float64, bool) {
	v := r[name]
	switch {
	case v == nil:
		return 0, false
	case len(v.results) == 0:
		return v.probe, true
	}
	var sum float64
	for _, x := range v.results {
		sum += x
	}
	return sum / float64(len(v.results)), true
}

const (
	benchRuns, benchPerRun = 100, 100
	benchWorkers           = 64
	// benchCallTimeout bounds each call of the pools, as the Monitor's default call
	// timeout bounds its calls.
	benchCallTimeout = 30 * time.Second
)

// realFixture is what every way of making a pass shares: Velero's plugin manager with
// the plugin process started, the backups and the operations each starts with.
type realFixture struct {
	plugins  clientmgmt.Manager
	backups  []*velerov1api.Backup
	byName   map[string]*velerov1api.Backup
	ops      [][]operations.Operation // by backup
	resolver *itemvelero.Resolver
}

func newRealFixture(b *testing.B, dir string) *realFixture {
	b.Helper()
	log := logrus.New()
	log.SetOutput(io.Discard)
	log.SetLevel(logrus.ErrorLevel)
	registry := process.NewRegistry(dir, log, log.Level)
	if err := registry.DiscoverPlugins(); err != nil {
		b.Fatal(err)
	}
	f := &realFixture{plugins: clientmgmt.NewManager(log, log.Level, registry), byName: map[string]*velerov1api.Backup{}}
	b.Cleanup(f.plugins.CleanupClients)

	created := time.Now()
	for i := range benchRuns {
		backup := builder.ForBackup(velerov1api.DefaultNamespace, fmt.Sprintf("backup-%03d", i)).
			Phase(velerov1api.BackupPhaseWaitingForPluginOperations).Result()
		f.backups = append(f.backups, backup)
		f.byName[backup.Name] = backup
		owner := operations.Owner{Kind: phase.Backup, Name: backup.Name}
		ops := make([]operations.Operation, benchPerRun)
		for j := range ops {
			ops[j] = operations.Operation{Owner: owner, Action: benchplugin.Name, ID: fmt.Sprintf("op-%03d", j),
				Status: operations.Status{Phase: operations.OperationInProgress, Created: created, Started: benchplugin.Started}}
		}
		f.ops = append(f.ops, ops)
	}
	f.resolver = itemvelero.NewResolver(f.plugins, itemvelero.Objects{
		Backup: func(_ context.Context, o operations.Owner) (*velerov1api.Backup, error) {
			if backup, ok := f.byName[o.Name]; ok {
				return backup, nil
			}
			return nil, fmt.Errorf("no backup %q", o.Name)
		},
	})

	// The plugin process starts with the first call, before the benchmarks time.
	action, err := f.plugins.GetBackupItemActionV2(benchplugin.Name)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := action.Progress("warm-up", f.backups[0]); err != nil {
		b.Fatal(err)
	}
	return f
}

// pluginCPU returns the CPU time the plugin process has used so far.
func (f *realFixture) pluginCPU(b *testing.B) time.Duration {
	b.Helper()
	action, err := f.plugins.GetBackupItemActionV2(benchplugin.Name)
	if err != nil {
		b.Fatal(err)
	}
	p, err := action.Progress(benchplugin.CPUOperationID, f.backups[0])
	if err != nil {
		b.Fatal(err)
	}
	ns, err := strconv.ParseInt(p.Description, 10, 64)
	if err != nil {
		b.Fatalf("the plugin's CPU time: %v", err)
	}
	return time.Duration(ns)
}

// store returns a memstore holding every backup, waiting, with its operations, recorded
// as a fork's server records them (operations.StartRun).
func (f *realFixture) store(b *testing.B) operations.Store {
	b.Helper()
	ctx := context.Background()
	s := memstore.New()
	for i, backup := range f.backups {
		ops := f.ops[i]
		run, err := operations.StartRun(ctx, s, operations.Run{Owner: ops[0].Owner}, func(context.Context) (operations.MainRun, error) {
			return operations.MainRun{Operations: ops}, nil
		})
		if err != nil {
			b.Fatal(err)
		}
		if !phase.IsWaiting(run.Phase) {
			b.Fatalf("backup %s started in %s, want a waiting phase", backup.Name, run.Phase)
		}
	}
	return s
}

// monitor makes passes of the itemops Monitor. All of the Monitor's own API that the
// benchmark uses is in this function.
func (f *realFixture) monitor(b *testing.B) func(context.Context) (int, error) {
	m := monitor.New(f.store(b), f.resolver, monitor.WithWorkers(benchWorkers))
	return func(ctx context.Context) (int, error) {
		stats, err := m.RunOnce(ctx)
		if err == nil && stats.Failed > 0 {
			err = fmt.Errorf("%d operations failed", stats.Failed)
		}
		return stats.Operations, err
	}
}

// sequential makes passes Velero's way. Velero's backup operations controller also
// fetches each backup and its storage location from the API server, makes a plugin
// manager (and so starts the plugin processes) for each backup it reconciles, and
// patches the backup; the loop leaves those out, and keeps one plugin manager.
func (f *realFixture) sequential(b *testing.B) func(context.Context) (int, error) {
	b.Helper()
	held := itemoperationmap.NewBackupItemOperationsMap()
	for i, backup := range f.backups {
		var ops []*itemoperation.BackupOperation
		for _, op := range f.ops[i] {
			vop, err := itemvelero.ToBackupOperation(op)
			if err != nil {
				b.Fatal(err)
			}
			ops = append(ops, vop)
		}
		held.PutOperationsForBackup(&itemoperationmap.OperationsForBackup{Operations: ops}, backup.Name)
	}
	return func(context.Context) (int, error) {
		polled := 0
		for _, backup := range f.backups {
			// The map holds every backup's operations, so it never asks the
			// backup store for them.
			ops, err := held.GetOperationsForBackup(nil, backup.Name)
			if err != nil {
				return polled, err
			}
			changed := false
			for _, op := range ops.Operations {
				if op.Status.Phase != itemoperation.OperationPhaseNew && op.Status.Phase != itemoperation.OperationPhaseInProgress {
					continue
				}
				action, err := f.plugins.GetBackupItemActionV2(op.Spec.BackupItemAction)
				if err != nil {
					return polled, err
				}
				p, err := action.Progress(op.Spec.OperationID, backup)
				if err != nil {
					return polled, err
				}
				polled++
				if recordVelero(&op.Status, p) {
					changed = true
				}
			}
			if changed {
				ops.ChangesSinceUpdate = true
				held.PutOperationsForBackup(ops, backup.Name)
			}
		}
		return polled, nil
	}
}

// recordVelero copies report p into status s, as Velero's controller does, and reports
// whether s changed.
func recordVelero(s *itemoperation.OperationStatus, p vplugin.OperationProgress) bool {
	changed := s.NCompleted != p.NCompleted || s.NTotal != p.NTotal ||
		s.OperationUnits != p.OperationUnits || s.Description != p.Description
	s.NCompleted, s.NTotal, s.OperationUnits, s.Description = p.NCompleted, p.NTotal, p.OperationUnits, p.Description
	for _, t := range []struct {
		field **metav1.Time
		to    time.Time
	}{{&s.Started, p.Started}, {&s.Updated, p.Updated}} {
		if t.to.IsZero() || *t.field != nil && (*t.field).Time.Equal(t.to) {
			continue
		}
		mt := metav1.NewTime(t.to)
		*t.field, changed = &mt, true
	}
	next := s.Phase
	switch {
	case p.Completed && p.Err != "":
		next, s.Error = itemoperation.OperationPhaseFailed, p.Err
	case p.Completed:
		next = itemoperation.OperationPhaseCompleted
	case s.Phase == itemoperation.OperationPhaseNew && !p.Started.IsZero():
		next = itemoperation.OperationPhaseInProgress
	}
	changed = changed || next != s.Phase
	s.Phase = next
	return changed
}

var (
	waitingRuns = operations.RunFilter{Phases: []phase.Phase{phase.WaitingForPluginOperations, phase.WaitingForPluginOperationsPartiallyFailed}}
	unfinished  = operations.OperationFilter{Phases: []operations.OperationPhase{operations.OperationNew, operations.OperationInProgress}}
)

// pool makes passes the standard way: what the Monitor is without its long-lived
// workers and its bookkeeping. A pass lists the waiting runs and polls up to 64 at a
// time; a run's poll lists its unfinished operations, checks each in a goroutine of its
// own, which takes a slot of 64 shared by all runs, with progress, and writes them in
// one batch. It leaves out the Monitor's bookkeeping: no run is read or moved, and
// reports are not validated.
func (f *realFixture) pool(b *testing.B) func(context.Context) (int, error) {
	return f.poolWith(b, func() (func(check func()), func()) {
		calls := make(chan struct{}, benchWorkers) // a slot for each check in flight
		return func(check func()) {
			calls <- struct{}{}
			go func() {
				defer func() { <-calls }()
				check()
			}()
		}, func() {}
	}, f.progress)
}

// poolWorkers makes the pool's passes with 64 goroutines that each pass starts and
// that check operations one after another, each call made with progressInline: in the
// worker's goroutine, so that a call that hangs holds its worker.
func (f *realFixture) poolWorkers(b *testing.B) func(context.Context) (int, error) {
	return f.poolWith(b, func() (func(check func()), func()) {
		checks := make(chan func())
		for range benchWorkers {
			go func() {
				for check := range checks {
					check()
				}
			}()
		}
		return func(check func()) { checks <- check }, func() { close(checks) }
	}, f.progressInline)
}

// poolWith makes the pool's passes. start begins a pass: it returns the function that
// runs an operation's check, at most 64 at a time, and the one that ends the pass. Each
// check makes its call with progress.
func (f *realFixture) poolWith(b *testing.B, start func() (run func(check func()), end func()),
	progress func(context.Context, operations.Operation) (operations.Progress, error)) func(context.Context) (int, error) {
	s := f.store(b)
	poll := func(ctx context.Context, o operations.Owner, run func(func())) (int, error) {
		ops, err := s.ListOperations(ctx, o, unfinished)
		if err != nil {
			return 0, err
		}
		errs := make([]error, len(ops))
		var wg sync.WaitGroup
		for i := range ops {
			wg.Add(1)
			run(func() {
				defer wg.Done()
				p, err := progress(ctx, ops[i])
				if err != nil {
					errs[i] = err
					return
				}
				record(&ops[i], p)
			})
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			return 0, err
		}
		return len(ops), s.PutOperations(ctx, o, ops)
	}
	return func(ctx context.Context) (int, error) {
		runs, err := s.ListRuns(ctx, waitingRuns)
		if err != nil {
			return 0, err
		}
		run, end := start()
		defer end()
		var (
			polled atomic.Int64
			errs   = make([]error, len(runs))
			slots  = make(chan struct{}, benchWorkers) // a slot for each run polled
			wg     sync.WaitGroup
		)
		for i, r := range runs {
			slots <- struct{}{}
			wg.Add(1)
			go func() {
				defer func() { <-slots; wg.Done() }()
				n, err := poll(ctx, r.Owner, run)
				polled.Add(int64(n))
				errs[i] = err
			}()
		}
		wg.Wait()
		return int(polled.Load()), errors.Join(errs...)
	}
}

// poolNoStore makes the pool's calls, 64 at a time, and nothing else.
func (f *realFixture) poolNoStore(*testing.B) func(context.Context) (int, error) {
	return func(ctx context.Context) (int, error) {
		var (
			polled atomic.Int64
			calls  = make(chan struct{}, benchWorkers)
			errs   = make([]error, len(f.ops))
			mu     sync.Mutex // guards errs
			wg     sync.WaitGroup
		)
		for i, ops := range f.ops {
			for _, op := range ops {
				calls <- struct{}{}
				wg.Add(1)
				go func() {
					defer func() { <-calls; wg.Done() }()
					if _, err := f.progress(ctx, op); err != nil {
						mu.Lock()
						errs[i] = err
						mu.Unlock()
						return
					}
					polled.Add(1)
				}()
			}
		}
		wg.Wait()
		return int(polled.Load()), errors.Join(errs...)
	}
}

// progress asks the plugin of op for its progress through the Resolver, as the
// standard pattern makes a call: under context.WithTimeout (benchCallTimeout), in a
// goroutine of its own that turns a panic into an error. A call that outlasts the
// timeout is given up, and its goroutine left to end when the plugin answers.
func (f *realFixture) progress(ctx context.Context, op operations.Operation) (operations.Progress, error) {
	ctx, cancel := context.WithTimeout(ctx, benchCallTimeout)
	defer cancel()
	type result struct {
		p   operations.Progress
		err error
	}
	done := make(chan result, 1)
	go func() {
		defer func() {
			if v := recover(); v != nil {
				done <- result{err: fmt.Errorf("plugin panicked: %v", v)}
			}
		}()
		tracker, err := f.resolver.Resolve(op.Action)
		if err != nil {
			done <- result{err: err}
			return
		}
		p, err := tracker.Progress(ctx, op)
		done <- result{p, err}
	}()
	select {
	case r := <-done:
		return r.p, r.err
	case <-ctx.Done():
		return operations.Progress{}, ctx.Err()
	}
}

// progressInline makes the call as progress does, under context.WithTimeout and with
// recover, but in the calling goroutine: a call that hangs holds that goroutine until
// the plugin answers.
func (f *realFixture) progressInline(ctx context.Context, op operations.Operation) (p operations.Progress, err error) {
	ctx, cancel := context.WithTimeout(ctx, benchCallTimeout)
	defer cancel()
	defer func() {
		if v := recover(); v != nil {
			p, err = operations.Progress{}, fmt.Errorf("plugin panicked: %v", v)
		}
	}()
	tracker, err := f.resolver.Resolve(op.Action)
	if err != nil {
		return operations.Progress{}, err
	}
	return tracker.Progress(ctx, op)
}

// record copies report p into op, as the Monitor does.
func record(op *operations.Operation, p operations.Progress) {
	s := &op.Status
	s.NCompleted, s.NTotal, s.OperationUnits, s.Description = p.NCompleted, p.NTotal, p.OperationUnits, p.Description
	s.Started, s.Updated = p.Started.UTC(), p.Updated.UTC()
	switch {
	case p.Completed && p.Err != "":
		s.Phase, s.Error = operations.OperationFailed, p.Err
	case p.Completed:
		s.Phase = operations.OperationCompleted
	}
}

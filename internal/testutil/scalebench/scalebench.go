// Package scalebench is the workload of the Monitor's benchmarks at scale, shared by
// the benchmarks of package operations/monitor (memstore and boltstore) and of module
// storage/etcdstore (etcdstore), so that every store is measured on the same one:
// waiting backups of 100 InProgress operations each, loaded by 16 goroutines with
// CreateRunWithOperations, then one Monitor pass (RunOnce, 64 workers) per op, with a
// plugin that answers at once with new progress, so every pass writes every operation.
//
// The Monitor keeps its claims from one pass to the next (monitor.WithKeptClaims), as
// a replica that calls RunOnce in a loop does, or Monitor.Run: on a store that keeps
// claims (etcdstore, kubestore) the first pass takes a claim on each run, and the
// passes after it make no claim write. That first pass is made before the timer starts,
// so that the figures are those of the steady state; the Monitor is closed, which ends
// its claims, at the end of each sub-benchmark. On a store that keeps no claims
// (memstore, boltstore) the option does nothing, and the first pass only warms up.
package scalebench

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/operations/monitor"
	"github.com/itemops/itemops/phase"
)

// PerRun is the number of operations of each run.
const PerRun = 100

// A Store is a store to measure: its name, and how to open a new, empty one for b.
// Count, when set, returns counters of the store's own (requests sent, bytes read): Run
// reports how much each grew per pass, as "<name>/pass".
type Store struct {
	Name  string
	Open  func(b *testing.B) operations.Store
	Count func() map[string]int64
}

// Runs returns the number of waiting runs to load: n unless the environment variable
// ITEMOPS_SCALE_RUNS gives another; b fails when that is not a positive number.
func Runs(b *testing.B, n int) int {
	if v := os.Getenv("ITEMOPS_SCALE_RUNS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1 {
			b.Fatalf("ITEMOPS_SCALE_RUNS=%q: want a positive number", v)
		}
	}
	return n
}

// Run measures each of stores as a sub-benchmark "store=<name>", the first being the
// baseline the others report of-baseline against (its own operations/s divided by the
// baseline's, measured earlier in the same process). Each loads runs waiting runs,
// makes one pass before the timer starts (it takes the claims, which the Monitor
// keeps; see the package documentation), and reports the operations polled per
// second, the bytes and allocations per polled operation, heap-growth-MiB (the most
// the heap grew above where it stood before the timed passes, sampled every 10 ms;
// under the garbage collector's default pacing this counts up to as much garbage as
// the heap holds live), held-MiB (about the most memory one more pass, untimed, holds
// at once; see heldByPass), the load's time (load-s) and rate (load-ops/s), and the
// growth per pass of the store's own counters (Store.Count).
func Run(b *testing.B, runs int, stores ...Store) {
	var baseline float64
	for i, st := range stores {
		b.Run("store="+st.Name, func(b *testing.B) {
			s := st.Open(b)
			start := time.Now()
			Load(b, s, runs)
			loaded := time.Since(start)
			plugin := &Moving{}
			m := monitor.New(s, operations.ResolverFunc(func(string) (operations.Tracker, error) { return plugin, nil }),
				monitor.WithWorkers(64), monitor.WithKeptClaims())
			defer m.Close()
			pass(b, m, runs) // untimed: it takes the claims that the timed passes keep

			runtime.GC()
			var before runtime.MemStats
			runtime.ReadMemStats(&before)
			peak := sampleHeap()
			var counted map[string]int64
			if st.Count != nil {
				counted = st.Count()
			}
			b.ReportAllocs()
			b.ResetTimer()
			start = time.Now()
			for range b.N {
				pass(b, m, runs)
			}
			elapsed := time.Since(start)
			b.StopTimer()
			if st.Count != nil {
				for name, n := range st.Count() {
					b.ReportMetric(float64(n-counted[name])/float64(b.N), name+"/pass")
				}
			}
			high := peak()
			var after runtime.MemStats
			runtime.ReadMemStats(&after)
			held := heldByPass(b, m)
			total := float64(runs * PerRun * b.N)
			perSec := total / elapsed.Seconds()
			b.ReportMetric(perSec, "ops/s")
			if i == 0 {
				baseline = perSec
			} else if baseline > 0 {
				b.ReportMetric(perSec/baseline, "of-"+stores[0].Name)
			}
			b.ReportMetric(float64(max(high, before.HeapAlloc)-before.HeapAlloc)/(1<<20), "heap-growth-MiB")
			b.ReportMetric(held/(1<<20), "held-MiB")
			b.ReportMetric(loaded.Seconds(), "load-s")
			b.ReportMetric(float64(runs*PerRun)/loaded.Seconds(), "load-ops/s")
			// ns/op, B/op and allocs/op are per pass; these are per polled operation.
			b.ReportMetric(float64(after.TotalAlloc-before.TotalAlloc)/total, "B/polled-op")
			b.ReportMetric(float64(after.Mallocs-before.Mallocs)/total, "allocs/polled-op")
		})
	}
}

// pass makes one pass of m over runs waiting runs, and fails b when the pass fails or
// checks another number of operations than runs*PerRun.
func pass(b *testing.B, m *monitor.Monitor, runs int) {
	b.Helper()
	st, err := m.RunOnce(context.Background())
	if err != nil || st.Err != nil {
		b.Fatal(err, st.Err)
	}
	if st.Operations != runs*PerRun {
		b.Fatalf("a pass checked %d operations, want %d", st.Operations, runs*PerRun)
	}
}

// Moving is the plugin of the Monitor's benchmarks and of the tests that need every pass
// to write every operation: its operations never end, and each Progress call reports
// progress that has moved on (NCompleted counts the calls), after Latency, slept as a
// remote call of that length would hold its worker. The zero value answers at once. Its
// methods are safe for concurrent use.
type Moving struct {
	Latency      time.Duration
	calls, slept atomic.Int64
}

// movingStart is the Started time of every report of Moving, fixed so that reports
// differ only in their counts.
var movingStart = time.Unix(1e9, 0).UTC()

// Progress sleeps Latency, when it is set, and reports one more completed unit than
// the call before it.
func (p *Moving) Progress(context.Context, operations.Operation) (operations.Progress, error) {
	if p.Latency > 0 {
		start := time.Now()
		time.Sleep(p.Latency)
		p.slept.Add(int64(time.Since(start)))
	}
	n := p.calls.Add(1)
	return operations.Progress{NCompleted: n, NTotal: 1 << 62, OperationUnits: "Bytes", Started: movingStart}, nil
}

// Cancel does nothing.
func (*Moving) Cancel(context.Context, operations.Operation) error { return nil }

// Calls returns how many Progress calls were made.
func (p *Moving) Calls() int64 { return p.calls.Load() }

// Slept returns how long the Progress calls slept in all: time.Sleep overshoots, so
// that it may exceed Calls times Latency.
func (p *Moving) Slept() time.Duration { return time.Duration(p.slept.Load()) }

// Load writes runs waiting backups of PerRun InProgress operations each, from 16
// goroutines at once, in one CreateRunWithOperations each where the store has it. It
// fails t at the first error.
func Load(t testing.TB, s operations.Store, runs int) {
	const loaders = 16
	ctx := context.Background()
	starter, _ := s.(operations.RunStarter)
	var (
		next atomic.Int64
		wg   sync.WaitGroup
		errs = make(chan error, loaders)
	)
	now := time.Now()
	for range loaders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1) - 1); i < runs; i = int(next.Add(1) - 1) {
				o := operations.Owner{Kind: phase.Backup, Name: fmt.Sprintf("backup-%06d", i)}
				r := operations.Run{Owner: o, Phase: phase.New, Created: now}
				if err := r.SetPhase(phase.WaitingForPluginOperations, "loaded", now); err != nil {
					errs <- err
					return
				}
				ops := make([]operations.Operation, PerRun)
				for j := range ops {
					ops[j] = operations.Operation{Owner: o, Action: "mover", ID: fmt.Sprintf("op-%03d", j),
						Resource: operations.ResourceIdentifier{Resource: "persistentvolumeclaims", Namespace: "ns", Name: fmt.Sprintf("pvc-%03d", j)},
						Status:   operations.Status{Phase: operations.OperationInProgress, Created: now, Started: now}}
				}
				var err error
				if starter != nil {
					err = starter.CreateRunWithOperations(ctx, r, ops)
				} else if err = s.CreateRun(ctx, r); err == nil {
					err = s.PutOperations(ctx, o, ops)
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// sampleHeap samples the live heap every 10 ms until the function it returns is
// called, which returns the highest HeapAlloc seen.
func sampleHeap() func() uint64 {
	var (
		high uint64
		done = make(chan struct{})
		wg   sync.WaitGroup
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(10 * time.Millisecond)
		defer t.Stop()
		for {
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			high = max(high, ms.HeapAlloc)
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	}()
	return func() uint64 {
		close(done)
		wg.Wait()
		return high
	}
}

// heldByPass makes one more pass of m with the garbage collector collecting once the heap
// has grown by 10% (GOGC=10) and returns about the most memory the pass held at once:
// the highest heap seen, less the 10% of it that may be garbage, less the heap before
// the pass.
func heldByPass(b *testing.B, m *monitor.Monitor) float64 {
	old := debug.SetGCPercent(10)
	defer debug.SetGCPercent(old)
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	peak := sampleHeap()
	if _, err := m.RunOnce(context.Background()); err != nil {
		b.Fatal(err)
	}
	high := float64(peak())
	return max(high/1.1-float64(before.HeapAlloc), 0)
}

package monitor_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/itemops/itemops/internal/testutil/scalebench"
	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/operations/monitor"
	"github.com/itemops/itemops/phase"
	"github.com/itemops/itemops/storage/memstore"
)

// countingStore counts the write calls a Monitor makes.
type countingStore struct {
	operations.Store
	puts, updates atomic.Int64
}

func (s *countingStore) PutOperations(ctx context.Context, o operations.Owner, ops []operations.Operation) error {
	s.puts.Add(1)
	return s.Store.PutOperations(ctx, o, ops)
}

func (s *countingStore) UpdateRun(ctx context.Context, o operations.Owner, f func(*operations.Run) error) (operations.Run, error) {
	s.updates.Add(1)
	return s.Store.UpdateRun(ctx, o, f)
}

// benchStore holds runs × perRun operations, all waiting.
func benchStore(b *testing.B, runs, perRun int) (*countingStore, []operations.Owner) {
	ctx := context.Background()
	s := &countingStore{Store: memstore.New()}
	owners := make([]operations.Owner, runs)
	for i := range owners {
		o := operations.Owner{Kind: phase.Backup, Name: fmt.Sprintf("backup-%03d", i)}
		r := operations.Run{Owner: o, Phase: phase.New}
		if err := r.SetPhase(phase.WaitingForPluginOperations, "bench", t0); err != nil {
			b.Fatal(err)
		}
		if err := s.CreateRun(ctx, r); err != nil {
			b.Fatal(err)
		}
		ops := make([]operations.Operation, perRun)
		for j := range ops {
			ops[j] = operations.Operation{Owner: o, Action: "mover", ID: fmt.Sprintf("op-%03d", j),
				Status: operations.Status{Phase: operations.OperationInProgress, Created: time.Now()}}
		}
		if err := s.PutOperations(ctx, o, ops); err != nil {
			b.Fatal(err)
		}
		owners[i] = o
	}
	s.puts.Store(0)
	s.updates.Store(0)
	return s, owners
}

// BenchmarkMonitorPass polls 10,000 operations across 100 runs whose plugin takes 2 ms per
// Progress call: the Monitor with 64 workers, and a sequential loop doing the same work
// (one Progress call after another, one batch per run), as Velero's controllers do. One op
// is one pass over all 10,000 operations. Run with -benchtime=3x: the sequential pass
// waits 2 ms for each of its 10,000 calls, 20 s in all.
func BenchmarkMonitorPass(b *testing.B) {
	const (
		runs, perRun = 100, 100
		latency      = 2 * time.Millisecond
		workers      = 64
	)
	total := float64(runs * perRun)
	ideal := float64(workers) / latency.Seconds() // operations per second
	// of-ideal compares with workers / 2 ms; of-ideal-measured with workers / the mean
	// time the plugin's calls really took, which time.Sleep makes longer than asked.
	// The store's writes are counted when there is one.
	report := func(b *testing.B, s *countingStore, tr *scalebench.Moving, elapsed time.Duration) {
		perSec := total * float64(b.N) / elapsed.Seconds()
		b.ReportMetric(perSec, "ops/s")
		b.ReportMetric(perSec/ideal, "of-ideal")
		mean := tr.Slept() / time.Duration(tr.Calls())
		b.ReportMetric(perSec/(float64(workers)/mean.Seconds()), "of-ideal-measured")
		if s == nil {
			return
		}
		b.ReportMetric(float64(s.puts.Load())/float64(runs*b.N), "batches/run/pass")
		b.ReportMetric(float64(s.updates.Load())/float64(runs*b.N), "run-updates/run/pass")
	}
	b.Run("impl=monitor-64", func(b *testing.B) {
		s, owners := benchStore(b, runs, perRun)
		tr := &scalebench.Moving{Latency: latency}
		m := monitor.New(s, operations.ResolverFunc(func(string) (operations.Tracker, error) { return tr, nil }),
			monitor.WithWorkers(workers))
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		b.ReportAllocs()
		b.ResetTimer()
		start := time.Now()
		for i := 0; i < b.N; i++ {
			pollAll(ctx, b, m, owners)
		}
		report(b, s, tr, time.Since(start))
	})
	// The ceiling: 64 goroutines doing nothing but the plugin calls, no store, no
	// bookkeeping. On a quiet machine it sits near 1.0 of ideal; on a loaded one it shows
	// how much the scheduler alone takes. The same pool spending 2 µs of CPU after each
	// call shows what a little work between calls costs: on two cores, the goroutines
	// whose sleeps end together wait for each other's work before they run.
	for _, work := range []time.Duration{0, 2 * time.Microsecond} {
		name := "impl=bare-pool-64"
		if work > 0 {
			name += fmt.Sprintf("+%dus-work", work.Microseconds())
		}
		b.Run(name, func(b *testing.B) {
			tr := &scalebench.Moving{Latency: latency}
			ctx := context.Background()
			b.ResetTimer()
			start := time.Now()
			for i := 0; i < b.N; i++ {
				jobs := make(chan struct{}, runs*perRun)
				for range runs * perRun {
					jobs <- struct{}{}
				}
				close(jobs)
				done := make(chan struct{})
				for range workers {
					go func() {
						for range jobs {
							_, _ = tr.Progress(ctx, operations.Operation{})
							for t := time.Now(); time.Since(t) < work; {
							}
						}
						done <- struct{}{}
					}()
				}
				for range workers {
					<-done
				}
			}
			report(b, nil, tr, time.Since(start))
		})
	}
	b.Run("impl=sequential", func(b *testing.B) {
		s, owners := benchStore(b, runs, perRun)
		tr := &scalebench.Moving{Latency: latency}
		ctx := context.Background()
		b.ReportAllocs()
		b.ResetTimer()
		start := time.Now()
		for i := 0; i < b.N; i++ {
			for _, o := range owners {
				ops, err := s.ListOperations(ctx, o, operations.OperationFilter{Phases: []operations.OperationPhase{operations.OperationNew, operations.OperationInProgress}})
				if err != nil {
					b.Fatal(err)
				}
				for j := range ops {
					p, err := tr.Progress(ctx, ops[j])
					if err != nil {
						b.Fatal(err)
					}
					ops[j].Status.NCompleted, ops[j].Status.NTotal = p.NCompleted, p.NTotal
				}
				if err := s.PutOperations(ctx, o, ops); err != nil {
					b.Fatal(err)
				}
			}
		}
		report(b, s, tr, time.Since(start))
	})
}

// pollAll polls the runs of owners with m all at once, as a pass of Run does, and fails
// b when a poll fails.
func pollAll(ctx context.Context, b *testing.B, m *monitor.Monitor, owners []operations.Owner) {
	done := make(chan struct{})
	var errs atomic.Int64
	for _, o := range owners {
		go func() {
			if _, err := m.Poll(ctx, o); err != nil {
				errs.Add(1)
			}
			done <- struct{}{}
		}()
	}
	for range owners {
		<-done
	}
	if errs.Load() > 0 {
		b.Fatal("poll failed")
	}
}

// BenchmarkMonitorPassLatency polls runs of 100 InProgress operations each, all at once,
// with a Monitor of 64 workers on memstore and a plugin whose Progress takes latency:
// 0 (the Monitor's own cost per call), 100µs, 1ms and 10ms (16 runs, so that a pass
// takes about as long as at 1ms). One op is one pass over every run.
//
//	go test ./operations/monitor -run '^$' -bench MonitorPassLatency -benchtime 3x -benchmem
func BenchmarkMonitorPassLatency(b *testing.B) {
	for _, c := range []struct {
		latency time.Duration
		runs    int
	}{{0, 100}, {100 * time.Microsecond, 100}, {time.Millisecond, 100}, {10 * time.Millisecond, 16}} {
		b.Run(fmt.Sprintf("latency=%s", c.latency), func(b *testing.B) {
			s, owners := benchStore(b, c.runs, 100)
			tr := &scalebench.Moving{Latency: c.latency}
			m := monitor.New(s, operations.ResolverFunc(func(string) (operations.Tracker, error) { return tr, nil }),
				monitor.WithWorkers(64))
			ctx := context.Background()
			b.ReportAllocs()
			b.ResetTimer()
			start := time.Now()
			for i := 0; i < b.N; i++ {
				pollAll(ctx, b, m, owners)
			}
			b.ReportMetric(float64(c.runs*100*b.N)/time.Since(start).Seconds(), "ops/s")
		})
	}
}

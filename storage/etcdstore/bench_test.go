package etcdstore_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/itemops/itemops/internal/testutil/contend"
	"github.com/itemops/itemops/internal/testutil/cputime"
	"github.com/itemops/itemops/internal/testutil/scalebench"
	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/operations/monitor"
	"github.com/itemops/itemops/phase"
	"github.com/itemops/itemops/storage/boltstore"
	"github.com/itemops/itemops/storage/etcdstore"
	"github.com/itemops/itemops/storage/memstore"
)

// The benchmarks compare etcdstore with boltstore in the same run. etcd runs inside the
// test process, on loopback, with fsync on (etcdstore.BenchServer), as boltstore syncs
// every commit by default; cpu-ns/op counts the CPU time of the whole process, the etcd
// server's included.

// backend is a store under benchmark.
type backend struct {
	name string
	open func(b *testing.B) operations.Store
}

func backends() []backend {
	return []backend{
		{"store=boltstore", func(b *testing.B) operations.Store {
			s, err := boltstore.Open(filepath.Join(b.TempDir(), "store.db"), nil)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { s.Close() })
			return s
		}},
		{"store=etcdstore", func(b *testing.B) operations.Store {
			srv := etcdstore.BenchServer(b)
			return etcdstore.OpenStore(b, etcdstore.NewClient(b, srv), etcdstore.NewPrefix(), nil)
		}},
	}
}

// measure resets the timer and, when the benchmark ends, reports cpu-ns/op beside the
// wall time, and ops/s: operations written per second of wall time, perOp per op.
func measure(b *testing.B, perOp int) func() {
	b.ReportAllocs()
	b.ResetTimer()
	start, cpu := time.Now(), cputime.Used()
	return func() {
		b.StopTimer()
		if c := cputime.Used(); cpu >= 0 && c >= 0 {
			b.ReportMetric(float64((c-cpu).Nanoseconds())/float64(b.N), "cpu-ns/op")
		}
		if perOp > 0 {
			b.ReportMetric(float64(perOp*b.N)/time.Since(start).Seconds(), "ops/s")
		}
	}
}

func benchRun(b *testing.B, s operations.Store, name string) operations.Owner {
	b.Helper()
	o := operations.Owner{Kind: phase.Backup, Name: name, UID: "uid-" + name}
	r := operations.Run{Owner: o, Phase: phase.New}
	if err := r.SetPhase(phase.WaitingForPluginOperations, "bench", time.Now()); err != nil {
		b.Fatal(err)
	}
	if err := s.CreateRun(context.Background(), r); err != nil {
		b.Fatal(err)
	}
	return o
}

// benchOps returns n operations of o, as a data mover's would look.
func benchOps(o operations.Owner, n int, p operations.OperationPhase, done int64) []operations.Operation {
	ops := make([]operations.Operation, n)
	now := time.Now()
	for i := range ops {
		id := fmt.Sprintf("du-%06d", i)
		ops[i] = operations.Operation{
			Owner: o, Action: "velero.io/csi-pvc-backupper", ID: id,
			Resource:           operations.ResourceIdentifier{Resource: "persistentvolumeclaims", Namespace: "app", Name: "data-" + id},
			PostOperationItems: []operations.ResourceIdentifier{{Group: "velero.io", Resource: "datauploads", Namespace: "velero", Name: id}},
			Status: operations.Status{Phase: p, NCompleted: done, NTotal: 1 << 30, OperationUnits: "Bytes",
				Description: "uploading", Created: now, Started: now, Updated: now},
		}
	}
	return ops
}

// BenchmarkBatch writes batches of 1,000 operations: insert puts 1,000 new operations
// into a new run per op; update rewrites the status of the same 1,000 InProgress
// operations per op, as a Monitor's pass does.
func BenchmarkBatch(b *testing.B) {
	const n = 1000
	ctx := context.Background()
	for _, be := range backends() {
		b.Run("insert/"+be.name, func(b *testing.B) {
			s := be.open(b)
			owners := make([]operations.Owner, b.N)
			batches := make([][]operations.Operation, b.N)
			for i := range owners {
				owners[i] = benchRun(b, s, fmt.Sprintf("insert-%06d", i))
				batches[i] = benchOps(owners[i], n, operations.OperationInProgress, 0)
			}
			done := measure(b, n)
			for i := 0; i < b.N; i++ {
				if err := s.PutOperations(ctx, owners[i], batches[i]); err != nil {
					b.Fatal(err)
				}
			}
			done()
		})
		b.Run("update/"+be.name, func(b *testing.B) {
			s := be.open(b)
			o := benchRun(b, s, "update")
			if err := s.PutOperations(ctx, o, benchOps(o, n, operations.OperationInProgress, 0)); err != nil {
				b.Fatal(err)
			}
			batches := make([][]operations.Operation, b.N)
			for i := range batches {
				batches[i] = benchOps(o, n, operations.OperationInProgress, int64(i+1))
			}
			done := measure(b, n)
			for i := 0; i < b.N; i++ {
				if err := s.PutOperations(ctx, o, batches[i]); err != nil {
					b.Fatal(err)
				}
			}
			done()
		})
	}
}

// BenchmarkUpdateRun changes one run per op: an atomic read-modify-write that counts one
// more error.
func BenchmarkUpdateRun(b *testing.B) {
	ctx := context.Background()
	for _, be := range backends() {
		b.Run(be.name, func(b *testing.B) {
			s := be.open(b)
			o := benchRun(b, s, "update-run")
			done := measure(b, 1)
			for i := 0; i < b.N; i++ {
				if _, err := s.UpdateRun(ctx, o, func(r *operations.Run) error { r.Errors++; return nil }); err != nil {
					b.Fatal(err)
				}
			}
			done()
		})
	}
}

// BenchmarkWritesOfOneRun has 8 goroutines put batches of 10 new operations to one run,
// on etcd. In "one Store" they share a Store, whose writes of one run take turns (see
// package storage/kv); in "a Store each" each has a Store (and client) of its own, as 8
// processes would, so their writes race, read again when they lose, and may retry
// 10,000 times. worst-ms is the longest single write.
func BenchmarkWritesOfOneRun(b *testing.B) {
	const writers, batch = 8, 10
	for _, shared := range []bool{true, false} {
		name := "one Store"
		if !shared {
			name = "a Store each"
		}
		b.Run(name, func(b *testing.B) {
			srv, prefix := etcdstore.BenchServer(b), etcdstore.NewPrefix()
			stores := make([]*etcdstore.Store, writers)
			for i := range stores {
				if i == 0 || !shared {
					stores[i] = etcdstore.OpenStore(b, etcdstore.NewClient(b, srv), prefix, &etcdstore.Options{ConflictRetries: 10_000})
				} else {
					stores[i] = stores[0]
				}
			}
			o := benchRun(b, stores[0], "contended")
			done := measure(b, batch)
			contend.Writes(b, writers, func(w, i int) error {
				ops := benchOps(o, batch, operations.OperationNew, 0)
				for j := range ops {
					ops[j].ID = fmt.Sprintf("w%d-%d-%d", w, i, j)
				}
				return stores[w].PutOperations(context.Background(), o, ops)
			})
			done()
		})
	}
}

// BenchmarkMonitorPass is the Monitor benchmark of package operations/monitor on etcdstore: 100
// waiting runs of 100 InProgress operations each, a plugin that takes 2 ms per Progress
// call, a Monitor with 64 workers; one op polls every run once, concurrently, so 10,000
// Progress calls and 100 batches of 100 operations. memstore (the figure in package
// operations/monitor) and boltstore run beside it. With etcdstore the Monitor also claims and
// releases each run (two more transactions per run).
func BenchmarkMonitorPass(b *testing.B) {
	const (
		runs, perRun = 100, 100
		latency      = 2 * time.Millisecond
		workers      = 64
	)
	all := append([]backend{{"store=memstore", func(*testing.B) operations.Store { return memstore.New() }}}, backends()...)
	for _, be := range all {
		b.Run(be.name, func(b *testing.B) {
			ctx := context.Background()
			s := be.open(b)
			owners := make([]operations.Owner, runs)
			for i := range owners {
				owners[i] = benchRun(b, s, fmt.Sprintf("backup-%03d", i))
				if err := s.PutOperations(ctx, owners[i], benchOps(owners[i], perRun, operations.OperationInProgress, 0)); err != nil {
					b.Fatal(err)
				}
			}
			tr := &scalebench.Moving{Latency: latency}
			m := monitor.New(s, operations.ResolverFunc(func(string) (operations.Tracker, error) { return tr, nil }),
				monitor.WithWorkers(workers))
			done := measure(b, runs*perRun)
			for i := 0; i < b.N; i++ {
				errs := make(chan error, runs)
				for _, o := range owners {
					go func() {
						res, err := m.Poll(ctx, o)
						if err == nil && (res.Skipped || res.Running != perRun) {
							err = fmt.Errorf("poll %s: %+v", o, res)
						}
						errs <- err
					}()
				}
				for range owners {
					if err := <-errs; err != nil {
						b.Fatal(err)
					}
				}
			}
			done()
		})
	}
}

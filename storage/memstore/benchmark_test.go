package memstore_test

import (
	"context"
	"fmt"
	"runtime"
	"testing"

	"github.com/itemops/itemops/internal/testutil/cputime"
	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/phase"
	"github.com/itemops/itemops/storage/memstore"
)

// benchOps returns n operations of o in phase p, IDs prefix000000, prefix000001, ...
func benchOps(o operations.Owner, prefix string, n int, p operations.OperationPhase) []operations.Operation {
	ops := make([]operations.Operation, n)
	for i := range ops {
		ops[i] = operations.Operation{
			Owner:              o,
			Action:             "example.io/snapshotter",
			Resource:           operations.ResourceIdentifier{Resource: "persistentvolumeclaims", Namespace: "app", Name: fmt.Sprint("data-", i)},
			ID:                 fmt.Sprintf("%s%06d", prefix, i),
			PostOperationItems: []operations.ResourceIdentifier{{Group: "snapshot.storage.k8s.io", Resource: "volumesnapshots", Namespace: "app", Name: fmt.Sprint("snap-", i)}},
			Status:             operations.Status{Phase: p, NTotal: 1 << 30, OperationUnits: "Bytes"},
		}
	}
	return ops
}

// benchStore returns a store holding one waiting backup run with ops.
func benchStore(b *testing.B, ops []operations.Operation) (*memstore.Store, operations.Owner) {
	b.Helper()
	ctx := context.Background()
	o := operations.Owner{Kind: phase.Backup, Name: "bench"}
	s := memstore.New()
	r := operations.Run{Owner: o, Phase: phase.New}
	if err := r.SetPhase(phase.WaitingForPluginOperations, "", r.Created); err != nil {
		b.Fatal(err)
	}
	if err := s.CreateRun(ctx, r); err != nil {
		b.Fatal(err)
	}
	for i := 0; i < len(ops); i += 10_000 {
		if err := s.PutOperations(ctx, o, ops[i:min(i+10_000, len(ops))]); err != nil {
			b.Fatal(err)
		}
	}
	return s, o
}

// BenchmarkPutOperation reports the cost of writing one operation: inserted one per call,
// inserted in batches of 1,000, and replaced one per call. Inserting stores start afresh
// every 10,000 operations (untimed), so the figure does not depend on b.N.
func BenchmarkPutOperation(b *testing.B) {
	ctx := context.Background()
	const perStore = 10_000
	insert := func(b *testing.B, batch int) {
		o := operations.Owner{Kind: phase.Backup, Name: "bench"}
		ops := benchOps(o, "op-", perStore, operations.OperationInProgress)
		b.ReportAllocs()
		b.ResetTimer()
		var s *memstore.Store
		for i := 0; i < b.N; i += batch {
			j := i % perStore
			if j == 0 {
				b.StopTimer()
				s, o = benchStore(b, nil)
				b.StartTimer()
			}
			n := min(batch, b.N-i, perStore-j)
			if err := s.PutOperations(ctx, o, ops[j:j+n]); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Run("insert/batch=1", func(b *testing.B) { insert(b, 1) })
	b.Run("insert/batch=1000", func(b *testing.B) { insert(b, 1000) })
	b.Run("replace/batch=1", func(b *testing.B) {
		s, o := benchStore(b, benchOps(operations.Owner{Kind: phase.Backup, Name: "bench"}, "op-", perStore, operations.OperationInProgress))
		ops := benchOps(o, "op-", perStore, operations.OperationInProgress)
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			op := ops[i%perStore : i%perStore+1]
			op[0].Status.NCompleted++
			if err := s.PutOperations(ctx, o, op); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkGetOperation reads one operation of a run holding 100,000.
func BenchmarkGetOperation(b *testing.B) {
	ctx := context.Background()
	const n = 100_000
	ops := benchOps(operations.Owner{Kind: phase.Backup, Name: "bench"}, "op-", n, operations.OperationCompleted)
	s, o := benchStore(b, ops)
	ids := make([]string, n)
	for i := range ops {
		ids[i] = ops[i].ID
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := s.GetOperation(ctx, o, ids[(i*7919)%n]); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkListUnfinished lists a run's 1,000 unfinished operations: alone, beside
// 100,000 finished ones (the index at work), and beside them through a filter the index
// does not serve (New, InProgress and Failed; nothing failed, so the result is the same
// 1,000), which visits every operation: the cost the index saves.
func BenchmarkListUnfinished(b *testing.B) {
	ctx := context.Background()
	const unfinished, finished = 1_000, 1_000_000
	o := operations.Owner{Kind: phase.Backup, Name: "bench"}
	pending := benchOps(o, "pending-", unfinished, operations.OperationInProgress)
	var mixed []operations.Operation
	// Unfinished operations spread evenly among the finished ones.
	done := benchOps(o, "done-", finished, operations.OperationCompleted)
	for i := range pending {
		mixed = append(mixed, pending[i])
		mixed = append(mixed, done[i*finished/unfinished:(i+1)*finished/unfinished]...)
	}
	indexed := operations.OperationFilter{Phases: []operations.OperationPhase{operations.OperationNew, operations.OperationInProgress}}
	scanned := operations.OperationFilter{Phases: []operations.OperationPhase{operations.OperationNew, operations.OperationInProgress, operations.OperationFailed}}
	cases := []struct {
		name   string
		ops    []operations.Operation
		filter operations.OperationFilter
	}{
		{"1000-alone", pending, indexed},
		{"1000-beside-1000000-finished", mixed, indexed},
		{"1000-beside-1000000-finished-unindexed-filter", mixed, scanned},
	}
	// Build the stores, then drop the fixture's own million operations, so that the heap
	// the garbage collector marks is the stores', not the benchmark's.
	stores := make([]*memstore.Store, len(cases))
	for i := range cases {
		stores[i], o = benchStore(b, cases[i].ops)
		cases[i].ops = nil
	}
	pending, mixed, done = nil, nil, nil
	runtime.GC()
	for i, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			s := stores[i]
			b.ReportAllocs()
			cputime.PerOp(b)
			for i := 0; i < b.N; i++ {
				got, err := s.ListOperations(ctx, o, tc.filter)
				if err != nil || len(got) != unfinished {
					b.Fatalf("ListOperations = %d operations, %v; want %d", len(got), err, unfinished)
				}
			}
		})
	}
}

// BenchmarkListWaitingRuns lists 1,000 waiting runs: alone, and beside 100,000 completed
// runs.
func BenchmarkListWaitingRuns(b *testing.B) {
	ctx := context.Background()
	const waiting, completed = 1_000, 100_000
	newRuns := func(prefix string, n int, p phase.Phase) []operations.Run {
		runs := make([]operations.Run, n)
		for i := range runs {
			runs[i] = operations.Run{Owner: operations.Owner{Kind: phase.Backup, Name: fmt.Sprintf("%s%06d", prefix, i)}, Phase: phase.New}
			if err := runs[i].SetPhase(p, "", runs[i].Created); err != nil {
				b.Fatal(err)
			}
		}
		return runs
	}
	filter := operations.RunFilter{Phases: []phase.Phase{phase.WaitingForPluginOperations, phase.WaitingForPluginOperationsPartiallyFailed}}
	for _, tc := range []struct {
		name string
		runs []operations.Run
	}{
		{"1000-alone", newRuns("w-", waiting, phase.WaitingForPluginOperations)},
		{"1000-beside-100000-completed", append(newRuns("w-", waiting, phase.WaitingForPluginOperations), newRuns("c-", completed, phase.Completed)...)},
	} {
		b.Run(tc.name, func(b *testing.B) {
			s := memstore.New()
			for _, r := range tc.runs {
				if err := s.CreateRun(ctx, r); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				got, err := s.ListRuns(ctx, filter)
				if err != nil || len(got) != waiting {
					b.Fatalf("ListRuns = %d runs, %v; want %d", len(got), err, waiting)
				}
			}
		})
	}
}

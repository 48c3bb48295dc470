package kubestore_test

import (
	"context"
	"testing"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/phase"
	"github.com/itemops/itemops/storage/kubestore"
)

// BenchmarkStatusRead reads a run of 10,000 operations, 100 of them unfinished, as a
// status does (controllerruntime.RunStatus.SetFromStore): the counts and the unfinished
// operations in one CountOperations (Bounded), against every operation (All), which is
// what it read before, and still reads on a store that cannot count.
// Each runs through a Store of default options, whose chunk cache holds the run's
// chunks after the first read, and through one without a cache (Uncached).
func BenchmarkStatusRead(b *testing.B) {
	ctx := context.Background()
	s, cfg, ns := newStoreIn(b, nil)
	o := operations.Owner{Kind: phase.Backup, Name: "status", UID: "uid-status"}
	ops := testOps(o, 10_000, operations.OperationCompleted)
	for i := 0; i < len(ops); i += 100 {
		ops[i].Status.Phase = operations.OperationInProgress
	}
	if err := s.CreateRunWithOperations(ctx, waitingRun(b, o), ops); err != nil {
		b.Fatalf("CreateRunWithOperations: %v", err)
	}
	unfinished := operations.OperationFilter{Phases: []operations.OperationPhase{operations.OperationNew, operations.OperationInProgress}}
	reads := map[string]func(s operations.Store) error{
		"Bounded": func(s operations.Store) error {
			_, _, err := s.(operations.OperationCounter).CountOperations(ctx, o, unfinished)
			return err
		},
		"All": func(s operations.Store) error {
			_, err := s.ListOperations(ctx, o, operations.OperationFilter{})
			return err
		},
	}
	for _, cache := range []struct {
		name  string
		bytes int
	}{{"Cached", 0}, {"Uncached", -1}} {
		for _, name := range []string{"Bounded", "All"} {
			b.Run(cache.name+"/"+name, func(b *testing.B) {
				r, c := openCounting(b, cfg, ns, &kubestore.Options{ChunkCacheBytes: cache.bytes})
				if err := reads[name](r); err != nil { // fills the cache
					b.Fatal(err)
				}
				before := c.gets.Load()
				b.ReportAllocs()
				b.ResetTimer()
				for range b.N {
					if err := reads[name](r); err != nil {
						b.Fatal(err)
					}
				}
				b.StopTimer()
				b.ReportMetric(float64(c.gets.Load()-before)/float64(b.N), "chunkGETs/op")
			})
		}
	}
}

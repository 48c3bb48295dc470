package kubestore_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/phase"
)

// BenchmarkListRunsWaiting lists the 10 waiting runs of a namespace that also holds
// 200 completed runs of 20 operations each, as a Monitor's pass does: ListRuns reads
// every run's object, so that no label edited by hand hides a run, and its cost grows
// with the finished runs. It reports the requests and bytes received per ListRuns; its
// figures are in docs/BENCHMARKS.md, kubestore, "ListRuns reads every run's object".
func BenchmarkListRunsWaiting(b *testing.B) {
	ctx := context.Background()
	s, _, ns := newStoreIn(b, nil)
	for i := range 210 {
		o := operations.Owner{Kind: phase.Backup, Name: fmt.Sprintf("run-%03d", i), UID: fmt.Sprintf("uid-%03d", i)}
		r := waitingRun(b, o)
		if i >= 10 {
			if err := r.SetPhase(phase.Completed, "done", t0); err != nil {
				b.Fatalf("SetPhase: %v", err)
			}
		}
		if err := s.CreateRunWithOperations(ctx, r, testOps(o, 20, operations.OperationCompleted)); err != nil {
			b.Fatalf("CreateRunWithOperations: %v", err)
		}
	}
	c := &counter{}
	r := openIn(b, ns, nil, func(rt http.RoundTripper) http.RoundTripper { c.next = rt; return c })
	waiting := operations.RunFilter{Phases: []phase.Phase{phase.WaitingForPluginOperations}}
	before := c.counts()
	b.ResetTimer()
	for range b.N {
		runs, err := r.ListRuns(ctx, waiting)
		if err != nil || len(runs) != 10 {
			b.Fatalf("ListRuns = %d runs, %v; want 10", len(runs), err)
		}
	}
	b.StopTimer()
	after := c.counts()
	for _, k := range []string{"requests", "received-B"} {
		b.ReportMetric(float64(after[k]-before[k])/float64(b.N), k+"/op")
	}
}

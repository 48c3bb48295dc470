// Package runspage is the workload of the benchmarks of the web view's runs page,
// shared by package webview's (on boltstore) and module storage/kubestore's (on
// kubestore), so that every store is measured on the same runs and the same requests:
// n runs, a third each New, WaitingForPluginOperations and Completed, backups and
// restores alike, with no operations; ListRuns of every run alone, the store's share of
// a page and the baseline; then the first page as HTML and as JSON, a page filtered by
// phase and name, and the last page, each served by a webview.Handler through httptest.
package runspage

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/phase"
	"github.com/itemops/itemops/webview"
)

// t0 is when every run of the workload was created and last updated.
var t0 = time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)

// Run returns run i of the workload: "run-%06d" of i, a backup when i is even and a
// restore when odd, New, WaitingForPluginOperations or Completed as i mod 3 is 0, 1
// or 2, with 100 items of which i mod 100 are done.
func Run(i int) operations.Run {
	kind := phase.Backup
	if i%2 == 1 {
		kind = phase.Restore
	}
	phases := []phase.Phase{phase.New, phase.WaitingForPluginOperations, phase.Completed}
	return operations.Run{
		Owner: operations.Owner{Kind: kind, Name: fmt.Sprintf("run-%06d", i)}, Phase: phases[i%3],
		Created: t0, Updated: t0, ItemsTotal: 100, ItemsDone: i % 100,
	}
}

// Load creates runs 0 to n-1 of the workload in s with CreateRun, from workers
// goroutines, and returns the first error (the others stop at their next run). It is
// safe when s is safe for concurrent use.
func Load(ctx context.Context, s operations.Store, n, workers int) error {
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(workers)
	for i := range n {
		if ctx.Err() != nil {
			break
		}
		g.Go(func() error {
			if err := s.CreateRun(ctx, Run(i)); err != nil {
				return fmt.Errorf("create run %d: %w", i, err)
			}
			return nil
		})
	}
	return g.Wait()
}

// Bench runs the sub-benchmarks of s, which holds the n runs of the workload, loaded
// in the time loaded: "runs=<n>/ListRuns", which reports load-s, loaded in seconds (a
// benchmark's log is not shown without -v), then "runs=<n>/<page>" for page,
// page-json, filtered and last-page. Each page reports resp-bytes, the size of its
// response. When count is not
// nil it returns counters of the store's own that only grow (its requests sent and
// bytes read, say), and each sub-benchmark reports how much each grew per op, as
// "<name>/op". b fails when a ListRuns does not give n runs or a page is not 200 OK.
func Bench(b *testing.B, s operations.Store, n int, loaded time.Duration, count func() map[string]int64) {
	h, err := webview.New(s)
	if err != nil {
		b.Fatalf("webview.New: %v", err)
	}
	counted := func(b *testing.B, body func(b *testing.B)) {
		var before map[string]int64
		if count != nil {
			before = count()
		}
		b.ReportAllocs()
		b.ResetTimer()
		body(b)
		b.StopTimer()
		if count != nil {
			for k, v := range count() {
				b.ReportMetric(float64(v-before[k])/float64(b.N), k+"/op")
			}
		}
	}
	b.Run(fmt.Sprintf("runs=%d/ListRuns", n), func(b *testing.B) {
		counted(b, func(b *testing.B) {
			for range b.N {
				runs, err := s.ListRuns(context.Background(), operations.RunFilter{})
				if err != nil || len(runs) != n {
					b.Fatalf("ListRuns: %d runs, %v", len(runs), err)
				}
			}
		})
		b.ReportMetric(loaded.Seconds(), "load-s")
	})
	for _, page := range []struct{ name, target string }{
		{"page", "/"},
		{"page-json", "/?format=json"},
		{"filtered", "/?phase=Completed&q=run-0&page=3"},
		{"last-page", fmt.Sprintf("/?page=%d", n/50)},
	} {
		b.Run(fmt.Sprintf("runs=%d/%s", n, page.name), func(b *testing.B) {
			var size int
			counted(b, func(b *testing.B) {
				for range b.N {
					w := httptest.NewRecorder()
					h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, page.target, nil))
					if w.Code != http.StatusOK {
						b.Fatalf("%s: %d", page.target, w.Code)
					}
					size = w.Body.Len()
				}
			})
			b.ReportMetric(float64(size), "resp-bytes")
		})
	}
}

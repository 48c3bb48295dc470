package webview_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/operations/decorate"
	"github.com/itemops/itemops/phase"
	"github.com/itemops/itemops/storage/boltstore"
	"github.com/itemops/itemops/webview"
)

// boltRuns returns a boltstore of n runs (a third each New, WaitingForPluginOperations
// and Completed; backups and restores alike), closed at the end of b. Called from a
// benchmark with sub-benchmarks, which runs once, it writes the runs once for them all.
func boltRuns(b *testing.B, n int) *boltstore.Store {
	b.Helper()
	s, err := boltstore.Open(filepath.Join(b.TempDir(), "runs.db"), &boltstore.Options{NoSync: true})
	require.NoError(b, err)
	b.Cleanup(func() { s.Close() })
	var g errgroup.Group
	g.SetLimit(16)
	phases := []phase.Phase{phase.New, phase.WaitingForPluginOperations, phase.Completed}
	for i := range n {
		g.Go(func() error {
			kind := phase.Backup
			if i%2 == 1 {
				kind = phase.Restore
			}
			return s.CreateRun(context.Background(), operations.Run{
				Owner: operations.Owner{Kind: kind, Name: fmt.Sprintf("run-%06d", i)}, Phase: phases[i%3],
				Created: t0, Updated: t0, ItemsTotal: 100, ItemsDone: i % 100,
			})
		})
	}
	require.NoError(b, g.Wait())
	return s
}

// BenchmarkRunsPage serves the runs page of a boltstore of 10,000 and 100,000 runs:
// the first page as HTML and as JSON, and a page filtered by phase and name; beside
// ListRuns of every run alone, the store's share of a page (the baseline). resp-bytes
// is the size of the response.
//
//	go test ./webview -run '^$' -bench BenchmarkRunsPage -benchtime 20x
func BenchmarkRunsPage(b *testing.B) {
	for _, n := range []int{10_000, 100_000} {
		s := boltRuns(b, n)
		h, err := webview.New(s)
		require.NoError(b, err)
		b.Run(fmt.Sprintf("runs=%d/ListRuns", n), func(b *testing.B) {
			b.ReportAllocs()
			for range b.N {
				runs, err := s.ListRuns(context.Background(), operations.RunFilter{})
				if err != nil || len(runs) != n {
					b.Fatalf("ListRuns: %d runs, %v", len(runs), err)
				}
			}
		})
		for _, page := range []struct{ name, target string }{
			{"page", "/"},
			{"page-json", "/?format=json"},
			{"filtered", "/?phase=Completed&q=run-0&page=3"},
			{"last-page", fmt.Sprintf("/?page=%d", n/50)},
		} {
			b.Run(fmt.Sprintf("runs=%d/%s", n, page.name), func(b *testing.B) {
				b.ReportAllocs()
				var size int
				for range b.N {
					w := httptest.NewRecorder()
					h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, page.target, nil))
					if w.Code != http.StatusOK {
						b.Fatalf("%s: %d", page.target, w.Code)
					}
					size = w.Body.Len()
				}
				b.ReportMetric(float64(size), "resp-bytes")
			})
		}
	}
}

// TestLiveRefreshStoreCalls counts what a page of a moving run costs the store while it
// is open: each ask of its script is a GetRun and a ListOperations when nothing
// changed (answered 304), and twice that when something did (the JSON form, then the
// page it redraws from). docs/BENCHMARKS.md, "The web view", turns it into calls per
// minute.
func TestLiveRefreshStoreCalls(t *testing.T) {
	s, clk := fixture(t)
	var mu sync.Mutex
	calls := map[string]int{}
	counted := decorate.Store(s, func(ctx context.Context, c decorate.Call, call func(context.Context) error) error {
		mu.Lock()
		calls[c.Method]++
		mu.Unlock()
		return call(ctx)
	})
	h := newHandler(t, counted, webview.WithClock(clk))
	const page = "run?kind=Backup&name=nightly"
	tag := get(t, h, page+"&format=json").Header.Get("ETag")
	clear(calls)

	// A minute of asks at the default interval, 5 s, while nothing changes.
	for range 12 {
		res := get(t, h, page+"&format=json", "If-None-Match", tag)
		require.Equal(t, http.StatusNotModified, res.StatusCode)
	}
	require.Equal(t, map[string]int{"GetRun": 12, "ListOperations": 12}, calls)
	t.Logf("a page of a run that does not move: %d store calls a minute", calls["GetRun"]+calls["ListOperations"])

	// A minute in which the run moves before every ask.
	clear(calls)
	o := operations.Owner{Kind: phase.Backup, Name: "nightly"}
	for i := range 12 {
		op, err := s.GetOperation(context.Background(), o, "snap-1")
		require.NoError(t, err)
		op.Status.NCompleted = int64(41 + i)
		require.NoError(t, s.PutOperations(context.Background(), o, []operations.Operation{op}))
		res := get(t, h, page+"&format=json", "If-None-Match", tag)
		require.Equal(t, http.StatusOK, res.StatusCode)
		tag = res.Header.Get("ETag")
		_, _ = io.Copy(io.Discard, get(t, h, page).Body) // the redraw
	}
	require.Equal(t, map[string]int{"GetRun": 24, "ListOperations": 24}, calls)
	t.Logf("a page of a run that moves before every ask: %d store calls a minute", calls["GetRun"]+calls["ListOperations"])
}

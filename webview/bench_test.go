package webview_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/itemops/itemops/internal/testutil/runspage"
	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/operations/decorate"
	"github.com/itemops/itemops/phase"
	"github.com/itemops/itemops/storage/boltstore"
	"github.com/itemops/itemops/webview"
)

// BenchmarkRunsPage serves the runs page of a boltstore of 10,000 and 100,000 runs,
// the workload of internal/testutil/runspage: the first page as HTML and as JSON, and
// a page filtered by phase and name, and the last page; beside ListRuns of every run
// alone, the store's share of a page (the baseline). resp-bytes is the size of the
// response; load-s, the seconds the load of the runs took. storage/kubestore's
// BenchmarkRunsPage measures kubestore on the same.
//
//	go test ./webview -run '^$' -bench BenchmarkRunsPage -benchtime 20x
func BenchmarkRunsPage(b *testing.B) {
	for _, n := range []int{10_000, 100_000} {
		s, err := boltstore.Open(filepath.Join(b.TempDir(), fmt.Sprintf("runs-%d.db", n)), &boltstore.Options{NoSync: true})
		require.NoError(b, err)
		b.Cleanup(func() { s.Close() })
		start := time.Now()
		require.NoError(b, runspage.Load(context.Background(), s, n, 16))
		runspage.Bench(b, s, n, time.Since(start), nil)
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

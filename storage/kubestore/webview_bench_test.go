package kubestore_test

import (
	"context"
	"testing"
	"time"

	"github.com/itemops/itemops/internal/testutil/runspage"
	"github.com/itemops/itemops/storage/kubestore"
)

// BenchmarkRunsPage is webview's BenchmarkRunsPage on kubestore: the runs page of a
// store of 10,000 and 100,000 runs (the workload of internal/testutil/runspage), as HTML
// and as JSON, filtered and the last page, beside ListRuns of every run alone, the
// baseline, in the same run. Each size has a namespace of its own on the test's API
// server. The runs are loaded by 32 goroutines with CreateRun through one store; the
// pages are read through another, opened after the load, so that nothing the loading
// store holds serves them. Both run as storeUser, granted the shipped Role, through a
// client without a rate limit (a negative QPS), so that the figures are the store's
// and the API server's; the reading one counts its requests and the bytes of their
// bodies each way (requests/op, received-B/op, sent-B/op). ListRuns reports load-s,
// the seconds the load took. Under -short the 100,000 runs are skipped.
//
//	cd storage/kubestore && KUBEBUILDER_ASSETS=/work/envtest go test -run '^$' -bench BenchmarkRunsPage -benchtime 3x -timeout 60m .
func BenchmarkRunsPage(b *testing.B) {
	ctx := context.Background()
	for _, n := range []int{10_000, 100_000} {
		if n > 10_000 && testing.Short() {
			b.Logf("runs=%d skipped under -short", n)
			continue
		}
		cfg := config(b)
		ns := newNamespace(b, cfg)
		grant(b, cfg, ns, shippedRole(b))
		unlimited := userConfig(b)
		unlimited.QPS = -1
		loader, err := kubestore.Open(ctx, unlimited, ns, nil)
		if err != nil {
			b.Fatalf("Open: %v", err)
		}
		start := time.Now()
		err = runspage.Load(ctx, loader, n, 32)
		took := time.Since(start)
		if cerr := loader.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			b.Fatalf("load %d runs: %v", n, err)
		}

		c := &counter{}
		reading := counted(userConfig(b), c)
		reading.QPS = -1
		s, err := kubestore.Open(ctx, reading, ns, nil)
		if err != nil {
			b.Fatalf("Open: %v", err)
		}
		runspage.Bench(b, s, n, took, c.counts)
		if err := s.Close(); err != nil {
			b.Errorf("Close: %v", err)
		}
	}
}

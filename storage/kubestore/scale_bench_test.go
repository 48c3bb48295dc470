package kubestore_test

import (
	"context"
	"testing"

	"github.com/itemops/itemops/internal/testutil/scalebench"
	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/storage/kubestore"
	"github.com/itemops/itemops/storage/memstore"
)

// BenchmarkMonitorScale is the Monitor pass at scale of package operations/monitor (the
// workload and metrics of internal/testutil/scalebench, whose Monitor keeps its claims
// from one pass to the next and makes its first pass before the timer) on kubestore
// beside memstore, the baseline, in the same process: 100 waiting backups of 100
// InProgress operations unless ITEMOPS_SCALE_RUNS says otherwise. The store runs in a
// namespace of its own on the test's API server, as storeUser granted the shipped Role,
// as the tests' stores do, through a client without a rate limit (a negative QPS, which
// client-go takes for none), so that the figures are the store's and the API server's,
// not the client's limit. It reports too the API requests of a pass and the bytes of
// their bodies each way, as the client sent and read them. storage/etcdstore has the
// same benchmark for etcdstore.
//
//	cd storage/kubestore && KUBEBUILDER_ASSETS=/work/envtest go test -run '^$' -bench MonitorScale -benchtime 5x .
func BenchmarkMonitorScale(b *testing.B) {
	c := &counter{}
	scalebench.Run(b, scalebench.Runs(b, 100),
		scalebench.Store{Name: "memstore", Open: func(*testing.B) operations.Store { return memstore.New() }},
		scalebench.Store{Name: "kubestore", Count: c.counts, Open: func(b *testing.B) operations.Store {
			cfg := config(b)
			ns := newNamespace(b, cfg)
			grant(b, cfg, ns, shippedRole(b))
			user := counted(userConfig(b), c)
			user.QPS = -1
			s, err := kubestore.Open(context.Background(), user, ns, nil)
			if err != nil {
				b.Fatalf("Open: %v", err)
			}
			b.Cleanup(func() {
				if err := s.Close(); err != nil {
					b.Errorf("Close: %v", err)
				}
			})
			return s
		}})
}

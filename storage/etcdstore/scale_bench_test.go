package etcdstore_test

import (
	"testing"

	"github.com/itemops/itemops/internal/testutil/scalebench"
	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/storage/etcdstore"
	"github.com/itemops/itemops/storage/etcdstore/internal/etcdtest"
	"github.com/itemops/itemops/storage/memstore"
)

// BenchmarkMonitorScale is the Monitor pass at scale of package operations/monitor (the
// workload and metrics of internal/testutil/scalebench) on etcdstore beside memstore in
// the same process: 1,000 waiting backups of 100 InProgress operations (100,000 operations)
// unless ITEMOPS_SCALE_RUNS says otherwise. etcd runs as a process of its own, with
// fsync on, so that the heap figures are the test process's alone.
//
//	cd storage/etcdstore && go test -run '^$' -bench MonitorScale -benchtime 1x -timeout 60m .
func BenchmarkMonitorScale(b *testing.B) {
	scalebench.Run(b, scalebench.Runs(b, 1_000),
		scalebench.Store{Name: "memstore", Open: func(*testing.B) operations.Store { return memstore.New() }},
		scalebench.Store{Name: "etcdstore", Open: func(b *testing.B) operations.Store {
			srv, err := etcdtest.StartProcess(etcdstore.ServerBin(), b.TempDir(), false)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(srv.Stop)
			return etcdstore.OpenStore(b, etcdstore.NewClient(b, srv), etcdstore.NewPrefix(), nil)
		}},
	)
}

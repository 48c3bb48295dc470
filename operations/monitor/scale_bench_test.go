package monitor_test

import (
	"path/filepath"
	"testing"

	"github.com/itemops/itemops/internal/testutil/scalebench"
	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/storage/boltstore"
	"github.com/itemops/itemops/storage/memstore"
)

// BenchmarkMonitorScale makes one Monitor pass per op over 10,000 waiting backups of 100
// InProgress operations each (a million operations; ITEMOPS_SCALE_RUNS sets the number
// of backups), on memstore and on boltstore (a file in a temporary directory, synced as
// in production), with the workload and the metrics of package
// internal/testutil/scalebench; boltstore reports of-memstore. storage/etcdstore has the same benchmark for etcdstore.
//
//	go test ./operations/monitor -run '^$' -bench MonitorScale -benchtime 1x -timeout 60m
func BenchmarkMonitorScale(b *testing.B) {
	scalebench.Run(b, scalebench.Runs(b, 10_000),
		scalebench.Store{Name: "memstore", Open: func(*testing.B) operations.Store { return memstore.New() }},
		scalebench.Store{Name: "boltstore", Open: func(b *testing.B) operations.Store {
			s, err := boltstore.Open(filepath.Join(b.TempDir(), "store.db"), nil)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { s.Close() })
			return s
		}},
	)
}

package boltstore_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/itemops/itemops/internal/testutil/cputime"
	"github.com/itemops/itemops/internal/testutil/scalebench"
	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/operations/monitor"
	"github.com/itemops/itemops/phase"
	"github.com/itemops/itemops/storage/boltstore"
)

// BenchmarkMonitorPass is the Monitor benchmark of storage/etcdstore (and
// operations/monitor) on a boltstore with the default options, every commit synced, so
// that the cost of the store's writes can be measured within this module: 100 waiting
// runs of 100 InProgress operations each, a plugin that takes 2 ms per Progress call, a
// Monitor with 64 workers; one op polls every run once, concurrently, so 10,000 Progress
// calls and 100 batches of 100 status updates. cpu-ns/op is the process's CPU time.
func BenchmarkMonitorPass(b *testing.B) {
	const (
		runs, perRun = 100, 100
		latency      = 2 * time.Millisecond
		workers      = 64
	)
	ctx := context.Background()
	s, err := boltstore.Open(filepath.Join(b.TempDir(), "store.db"), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	owners := make([]operations.Owner, runs)
	now := time.Now()
	for i := range owners {
		o := operations.Owner{Kind: phase.Backup, Name: fmt.Sprintf("backup-%03d", i), UID: fmt.Sprint("uid-", i)}
		r := operations.Run{Owner: o, Phase: phase.New}
		if err := r.SetPhase(phase.WaitingForPluginOperations, "bench", now); err != nil {
			b.Fatal(err)
		}
		ops := make([]operations.Operation, perRun)
		for j := range ops {
			id := fmt.Sprintf("du-%06d", j)
			ops[j] = operations.Operation{
				Owner: o, Action: "velero.io/csi-pvc-backupper", ID: id,
				Resource:           operations.ResourceIdentifier{Resource: "persistentvolumeclaims", Namespace: "app", Name: "data-" + id},
				PostOperationItems: []operations.ResourceIdentifier{{Group: "velero.io", Resource: "datauploads", Namespace: "velero", Name: id}},
				Status: operations.Status{Phase: operations.OperationInProgress, NTotal: 1 << 30, OperationUnits: "Bytes",
					Description: "uploading", Created: now, Started: now, Updated: now},
			}
		}
		if err := s.CreateRunWithOperations(ctx, r, ops); err != nil {
			b.Fatal(err)
		}
		owners[i] = o
	}
	tr := &scalebench.Moving{Latency: latency}
	m := monitor.New(s, operations.ResolverFunc(func(string) (operations.Tracker, error) { return tr, nil }),
		monitor.WithWorkers(workers))
	cputime.PerOp(b)
	for i := 0; i < b.N; i++ {
		errs := make(chan error, runs)
		for _, o := range owners {
			go func() {
				res, err := m.Poll(ctx, o)
				if err == nil && (res.Skipped || res.Running != perRun) {
					err = fmt.Errorf("poll %s: %+v", o, res)
				}
				errs <- err
			}()
		}
		for range owners {
			if err := <-errs; err != nil {
				b.Fatal(err)
			}
		}
	}
}

package kv_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/itemops/itemops/internal/testutil/contend"
	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/storage/kv"
)

// BenchmarkWritesOfOneRun has 8 goroutines put batches of 10 operations to one run, over
// a backend whose every call takes 1 ms, as a call to etcd does. In "one Store" they
// share a Store, so their writes take turns; in "a Store each" each has a Store of its
// own over the same backend, as processes of their own would, so their writes race.
// Both may retry 10,000 times, so that no write fails. Besides the time per write it
// reports the backend calls per write, the commits that lost a race per write, and the
// longest single write in milliseconds.
func BenchmarkWritesOfOneRun(b *testing.B) {
	const writers, batch = 8, 10
	for _, shared := range []bool{true, false} {
		name := "one Store"
		if !shared {
			name = "a Store each"
		}
		b.Run(name, func(b *testing.B) {
			be := newWatched(time.Millisecond)
			stores := make([]*kv.Store, writers)
			for i := range stores {
				if i == 0 || !shared {
					stores[i] = open(b, be, kv.WithRetries(10_000))
				} else {
					stores[i] = stores[0]
				}
			}
			createRun(b, stores[0])
			be.calls.Store(0)
			b.ResetTimer()
			contend.Writes(b, writers, func(w, i int) error {
				return stores[w].PutOperations(bg, owner, ops(fmt.Sprint("op", i, "-"), batch))
			})
			b.StopTimer()
			n := float64(b.N)
			b.ReportMetric(float64(be.calls.Load())/n, "calls/op")
			b.ReportMetric(float64(be.lost.Load())/n, "lost/op")
		})
	}
}

// BenchmarkWritesWhileUpdating has 8 goroutines of one Store write one run over a
// backend in memory that answers at once, each call an UpdateRun or, every other call,
// a PutOperations of one operation, so that writes come while an update function runs
// and wait for its turn. It reports the backend calls and the commits that lost a race
// per write, and the longest single write in milliseconds.
func BenchmarkWritesWhileUpdating(b *testing.B) {
	const writers = 8
	be := newWatched(0)
	s := open(b, be)
	createRun(b, s)
	be.calls.Store(0)
	b.ReportAllocs()
	b.ResetTimer()
	contend.Writes(b, writers, func(w, i int) error {
		if i%2 == 0 {
			return s.PutOperations(bg, owner, ops(fmt.Sprint("op", i, "-"), 1))
		}
		_, err := s.UpdateRun(bg, owner, func(r *operations.Run) error { r.ItemsDone++; return nil })
		return err
	})
	b.StopTimer()
	n := float64(b.N)
	b.ReportMetric(float64(be.calls.Load())/n, "calls/op")
	b.ReportMetric(float64(be.lost.Load())/n, "lost/op")
}

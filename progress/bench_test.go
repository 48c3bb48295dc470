package progress_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/itemops/itemops/progress"
)

// BenchmarkCount measures the per-item path. One op is one item counted.
//
//	impl=atomic-add: a bare atomic.Int64 Add, the baseline
//	impl=counter: Counter.Done with no Reporter
//	impl=counter+reporter: Counter.Done while a Reporter reads the counter every
//	millisecond and hands snapshots to a sink that sleeps 5ms per call
//
// The parallel variants count from GOMAXPROCS goroutines at once.
func BenchmarkCount(b *testing.B) {
	slowSink := func(ctx context.Context, s progress.Snapshot) error {
		select {
		case <-time.After(5 * time.Millisecond):
		case <-ctx.Done():
		}
		return nil
	}
	b.Run("impl=atomic-add", func(b *testing.B) {
		var n atomic.Int64
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			n.Add(1)
		}
	})
	b.Run("impl=counter", func(b *testing.B) {
		var c progress.Counter
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			c.Done()
		}
	})
	b.Run("impl=counter+reporter", func(b *testing.B) {
		var c progress.Counter
		r := progress.NewReporter(&c, slowSink, progress.WithInterval(time.Millisecond))
		b.Cleanup(func() { _ = r.Close() })
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			c.Done()
		}
	})
	b.Run("impl=atomic-add/parallel", func(b *testing.B) {
		var n atomic.Int64
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				n.Add(1)
			}
		})
	})
	b.Run("impl=counter+reporter/parallel", func(b *testing.B) {
		var c progress.Counter
		r := progress.NewReporter(&c, slowSink, progress.WithInterval(time.Millisecond))
		b.Cleanup(func() { _ = r.Close() })
		b.ReportAllocs()
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				c.Done()
			}
		})
	})
}

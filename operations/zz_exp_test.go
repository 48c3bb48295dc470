package operations_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/itemops/itemops/operations"
)

func BenchmarkZZBareWork(b *testing.B) {
	for _, work := range []time.Duration{0, 2 * time.Microsecond, 5 * time.Microsecond, 10 * time.Microsecond} {
		b.Run(fmt.Sprint(work), func(b *testing.B) {
			tr := &slowTracker{latency: 2 * time.Millisecond}
			ctx := context.Background()
			start := time.Now()
			for i := 0; i < b.N; i++ {
				jobs := make(chan struct{}, 10000)
				for range 10000 {
					jobs <- struct{}{}
				}
				close(jobs)
				done := make(chan struct{})
				for range 64 {
					go func() {
						for range jobs {
							_, _ = tr.Progress(ctx, operations.Operation{})
							for t := time.Now(); time.Since(t) < work; {
							}
						}
						done <- struct{}{}
					}()
				}
				for range 64 {
					<-done
				}
			}
			b.ReportMetric(10000*float64(b.N)/time.Since(start).Seconds()/32000, "of-ideal")
		})
	}
}

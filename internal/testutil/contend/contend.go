// Package contend runs the writes of a benchmark from several goroutines at once, so that
// benchmarks of contention in different modules measure it the same way.
package contend

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Writes makes b.N calls of write from writers goroutines at once. Goroutine w calls
// write(w, i) for each i, from 1 to b.N, that it takes next, so a fast goroutine makes
// more of the calls than a slow one. A goroutine stops at its first error. Writes waits
// for all of them, fails b with their errors joined, and reports the longest single call
// in milliseconds as "worst-ms". It leaves b's timer alone.
func Writes(b *testing.B, writers int, write func(w, i int) error) {
	b.Helper()
	var (
		next, worst atomic.Int64
		wg          sync.WaitGroup
		errs        = make([]error, writers)
	)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1)); i <= b.N; i = int(next.Add(1)) {
				start := time.Now()
				if errs[w] = write(w, i); errs[w] != nil {
					return
				}
				d := int64(time.Since(start))
				for m := worst.Load(); d > m && !worst.CompareAndSwap(m, d); m = worst.Load() {
				}
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(worst.Load())/float64(time.Millisecond), "worst-ms")
}

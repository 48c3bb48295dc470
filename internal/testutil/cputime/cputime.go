// Package cputime measures the CPU time the process uses, for benchmarks that run on
// machines shared with other work: wall time swings with the load, CPU time mostly does
// not, so ratios are also computed from it.
package cputime

import (
	"testing"
	"time"
)

// Used returns the user and system CPU time the process has used so far, in all its
// threads (the garbage collector's and, for a server run in the test process, the
// server's too), or -1 where it is not measured.
func Used() time.Duration { return used() }

// PerOp resets b's timer and reports the CPU time per operation of the rest of the
// benchmark as "cpu-ns/op" beside the wall time, where it is measured. Call it after
// setup.
func PerOp(b *testing.B) {
	b.Helper()
	b.ReportAllocs()
	b.ResetTimer()
	start := Used()
	b.Cleanup(func() {
		if end := Used(); start >= 0 && end >= 0 {
			b.ReportMetric(float64((end-start).Nanoseconds())/float64(b.N), "cpu-ns/op")
		}
	})
}

//go:build !unix

package etcdstore_test

import "time"

// cpuTime is not measured here; the benchmarks then leave out cpu-ns/op.
func cpuTime() time.Duration { return -1 }

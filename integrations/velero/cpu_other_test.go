//go:build !unix

package velero_test

import "time"

// processCPU returns 0: the benchmarks measure CPU time on Unix systems only.
func processCPU() time.Duration { return 0 }

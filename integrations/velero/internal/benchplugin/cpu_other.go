//go:build !unix

package benchplugin

import "time"

// ProcessCPU returns 0: the benchmarks measure CPU time on Unix systems only.
func ProcessCPU() time.Duration { return 0 }

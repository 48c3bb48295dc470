//go:build unix

package operations_test

import (
	"syscall"
	"time"
)

// cpuTime returns the CPU time the process has used, user and system, in all threads:
// the work a benchmark did, garbage collection included, whatever else runs on the
// machine.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return -1
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

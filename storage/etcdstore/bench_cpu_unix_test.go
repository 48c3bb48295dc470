//go:build unix

package etcdstore_test

import (
	"syscall"
	"time"
)

// cpuTime returns the CPU time the process has used, user and system, in all threads:
// with etcd running inside the test process, the server's work as well as the store's.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return -1
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

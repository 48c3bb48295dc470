//go:build unix

package benchplugin

import (
	"syscall"
	"time"
)

// ProcessCPU returns the CPU time the calling process has used so far, in user and
// system mode, or 0 when the system does not tell.
func ProcessCPU() time.Duration {
	var u syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &u); err != nil {
		return 0
	}
	return time.Duration(u.Utime.Nano() + u.Stime.Nano())
}

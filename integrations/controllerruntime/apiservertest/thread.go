package apiservertest

import "runtime"

// lockedThread is a goroutine locked to an OS thread of its own, on which the server's
// processes are started. Linux sends a child its parent-death signal when the thread
// that started it ends, not only when the process does, and Go ends a thread when a
// goroutine locked to it returns without unlocking it, which any code may do; the
// thread of a lockedThread stays until stop, so no child started on it is killed
// while the test binary runs.
type lockedThread struct {
	work chan func()
}

// startLockedThread starts a lockedThread.
func startLockedThread() *lockedThread {
	t := &lockedThread{work: make(chan func())}
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		for f := range t.work {
			f()
		}
	}()
	return t
}

// do runs f on t's thread and returns when f has.
func (t *lockedThread) do(f func()) {
	done := make(chan struct{})
	t.work <- func() {
		defer close(done)
		f()
	}
	<-done
}

// stop ends t's goroutine, after the processes started on it have ended; do must not be
// called after stop.
func (t *lockedThread) stop() { close(t.work) }

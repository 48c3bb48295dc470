package etcdstore

import (
	"context"
	"sync"
)

// runLocks makes the writes of one process to one run wait for each other, so that
// they do not lose races to each other in etcd and retry; writers in other processes
// are kept apart by the compare of each transaction. Its zero value is ready to use.
type runLocks struct {
	mu    sync.Mutex // guards locks
	locks map[string]*runLock
}

type runLock struct {
	held chan struct{} // holds one token while the lock is held
	refs int           // callers holding or waiting, guarded by runLocks.mu
}

// lock waits for the lock of key, or for ctx to end, and returns its release.
func (l *runLocks) lock(ctx context.Context, key string) (func(), error) {
	l.mu.Lock()
	if l.locks == nil {
		l.locks = make(map[string]*runLock)
	}
	rl := l.locks[key]
	if rl == nil {
		rl = &runLock{held: make(chan struct{}, 1)}
		l.locks[key] = rl
	}
	rl.refs++
	l.mu.Unlock()

	done := func() {
		l.mu.Lock()
		if rl.refs--; rl.refs == 0 {
			delete(l.locks, key)
		}
		l.mu.Unlock()
	}
	select {
	case rl.held <- struct{}{}:
		return func() { <-rl.held; done() }, nil
	case <-ctx.Done():
		done()
		return nil, ctx.Err()
	}
}

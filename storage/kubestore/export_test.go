package kubestore

import "time"

// SetPendingGrace sets how old a pending run's object must be before a sweep deletes
// it, and returns a function that sets it back.
func SetPendingGrace(d time.Duration) (restore func()) {
	old := pendingGrace
	pendingGrace = d
	return func() { pendingGrace = old }
}

// SetListPage sets how many objects one LIST request of a Store asks for, and returns a
// function that sets it back.
func SetListPage(n int64) (restore func()) {
	old := listPage
	listPage = n
	return func() { listPage = old }
}

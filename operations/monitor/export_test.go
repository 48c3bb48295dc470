package monitor

import "time"

// WorkersBusy returns how many operations the Monitor's workers hold: none once every
// poll has returned.
func (m *Monitor) WorkersBusy() int {
	m.pool.mu.Lock()
	defer m.pool.mu.Unlock()
	return m.pool.busy
}

// HungCalls returns how many plugin calls the Monitor gave up whose plugin has not
// returned.
func (m *Monitor) HungCalls() int { return m.pool.hungLen() }

// hungLen is how many calls the pool has given up that have not returned.
func (p *pool[K]) hungLen() int {
	p.hungMu.Lock()
	defer p.hungMu.Unlock()
	return len(p.hung)
}

// PollsQueued returns how many polls have operations no worker has taken.
func (m *Monitor) PollsQueued() int {
	m.pool.mu.Lock()
	defer m.pool.mu.Unlock()
	return len(m.pool.queue)
}

// WithStoreConcurrency bounds how many runs a pass works on at once (see
// withStoreConcurrency).
func WithStoreConcurrency(n int) Option { return withStoreConcurrency(n) }

// Delay returns the wait of p after the attempt-th error in a row.
func (p RetryPolicy) Delay(attempt int) time.Duration { return p.delay(attempt) }

// NoAnswer returns the error of a plugin call that did not answer within timeout.
func NoAnswer(timeout time.Duration) error { return &noAnswerError{timeout} }

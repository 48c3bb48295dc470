package monitor

// TokensHeld returns how many of the Monitor's worker tokens are held: none once every
// poll has returned.
func (m *Monitor) TokensHeld() int { return len(m.tokens) }

// StreakRuns returns how many runs the Monitor counts Progress errors of.
func (m *Monitor) StreakRuns() int {
	m.streaks.mu.Lock()
	defer m.streaks.mu.Unlock()
	return len(m.streaks.runs)
}

// HungCalls returns how many plugin calls the Monitor gave up whose plugin has not
// returned.
func (m *Monitor) HungCalls() int { return int(m.hung.n.Load()) }

// WithStoreConcurrency bounds how many runs a pass works on at once (see
// withStoreConcurrency).
func WithStoreConcurrency(n int) Option { return withStoreConcurrency(n) }

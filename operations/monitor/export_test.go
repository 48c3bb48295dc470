package monitor

// TokensHeld returns how many of the Monitor's worker tokens are held: none once every
// poll has returned.
func (m *Monitor) TokensHeld() int { return len(m.calls) }

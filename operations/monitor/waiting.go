package monitor

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// waitLogEvery is how often a Monitor whose passes skip the same number of runs, held
// by other Monitors, logs them again.
const waitLogEvery = time.Minute

// heldRuns is what a Monitor last logged of the runs its passes skipped because other
// Monitors held their claims (see logHeld).
type heldRuns struct {
	// waiting is set while the last pass skipped runs: a pass that skips none reads it
	// alone, and takes no lock, when the one before skipped none either.
	waiting atomic.Bool
	// mu guards the fields below.
	mu     sync.Mutex
	n      int       // the runs the last pass skipped
	since  time.Time // when the passes began to skip runs
	logged time.Time // when it last logged them
}

// logHeld logs at Info, after a pass that skipped skipped runs held by other Monitors,
// how many runs wait for those claims and since when: when that number changes (to
// zero included, said once), and else at most once every waitLogEvery, so that an
// operator that sees nothing polled after a crash learns why, and one whose replicas
// share the runs is not told every pass. A claim ends when its holder gives it up, or a
// time to live after its holder stopped renewing it (the store's claim TTL), which a
// Monitor cannot tell from here; the message says so.
func (m *Monitor) logHeld(ctx context.Context, skipped int) {
	h := &m.held
	if skipped == 0 && !h.waiting.Load() {
		return
	}
	now := m.cfg.clock.Now()
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case skipped == 0:
		if h.n > 0 {
			m.cfg.logger.InfoContext(ctx, "no run waits any more for another Monitor's claim",
				"waited", now.Sub(h.since).Round(time.Second).String())
		}
		h.n = 0
		h.waiting.Store(false)
		return
	case h.n == 0:
		h.since = now
	case skipped == h.n && now.Sub(h.logged) < waitLogEvery:
		return
	}
	h.n, h.logged = skipped, now
	h.waiting.Store(true)
	m.cfg.logger.InfoContext(ctx, "runs wait for the claims of other Monitors: each is polled once its holder gives its claim up, "+
		"or once the holder's claims expire (the store's claim TTL) if it stopped",
		"runs", skipped, "since", h.since.UTC().Format(time.RFC3339))
}

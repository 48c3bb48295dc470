package monitor

import (
	"hash/fnv"
	"sync"
	"time"

	"github.com/itemops/itemops/operations"
)

// progressWrites is when the Monitor last wrote each waiting run, so that a run whose
// polls change nothing but progress is written at most once every interval (see
// WithProgressWriteInterval). The zero progressWrites, with no interval, has every run
// always due; it is safe for concurrent use.
type progressWrites struct {
	every time.Duration // 0: every change is written at once
	mu    sync.Mutex
	last  map[runKey]time.Time
}

// due reports whether run k, whose poll at now changed nothing but progress, is to be
// written. A run the Monitor has not written yet (new, or met after a restart) is taken
// as written at a point of the last interval that its name sets: runs met in one pass
// are then written over the interval's passes, not all in the next one.
func (p *progressWrites) due(k runKey, now time.Time) bool {
	if p.every <= 0 {
		return true
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	last, ok := p.last[k]
	if !ok {
		h := fnv.New64a()
		h.Write([]byte(k.kind))
		h.Write([]byte{0})
		h.Write([]byte(k.name))
		last = now.Add(-time.Duration(h.Sum64() % uint64(p.every)))
		if p.last == nil {
			p.last = make(map[runKey]time.Time)
		}
		p.last[k] = last
	}
	return now.Sub(last) >= p.every
}

// wrote records that run k was written at now.
func (p *progressWrites) wrote(k runKey, now time.Time) {
	if p.every <= 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.last == nil {
		p.last = make(map[runKey]time.Time)
	}
	p.last[k] = now
}

// forget drops run k, which is no longer waiting.
func (p *progressWrites) forget(k runKey) {
	if p.every <= 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.last, k)
}

// keep drops every run but those of waiting, the waiting runs a complete pass listed:
// the others were deleted, or moved on by another Monitor.
func (p *progressWrites) keep(waiting []operations.Run) {
	if p.every <= 0 {
		return
	}
	listed := make(map[runKey]bool, len(waiting))
	for _, r := range waiting {
		listed[keyOf(r.Owner)] = true
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for k := range p.last {
		if !listed[k] {
			delete(p.last, k)
		}
	}
}

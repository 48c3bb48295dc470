package monitor

import (
	"sync"
	"sync/atomic"

	"github.com/itemops/itemops/operations"
)

// hungCalls lists the plugin calls that were given up (see pending.giveUp) and have not
// returned, by operation, so that no second call is made for an operation while one
// hangs: a plugin that ignores its context then holds one goroutine per operation, not
// one per pass. A call is listed when it is given up and unlisted when the plugin
// returns. The zero hungCalls is empty and ready to use, and it is safe for concurrent
// use; find costs one atomic load while nothing hangs.
type hungCalls struct {
	n     atomic.Int64 // len(calls)
	mu    sync.Mutex
	calls map[hungKey]*pending
}

// hungKey names an operation in hungCalls.
type hungKey struct {
	run runKey
	id  string
}

func hungKeyOf(op *operations.Operation) hungKey { return hungKey{keyOf(op.Owner), op.ID} }

// giveUp gives call p up, unless it has returned, and lists it; it reports whether it
// gave the call up. The state changes under the lock, so that a plugin returning at
// that moment finds the call listed (see returned).
func (h *hungCalls) giveUp(p *pending) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !p.state.CompareAndSwap(calling, givenUp) {
		return false
	}
	if h.calls == nil {
		h.calls = make(map[hungKey]*pending)
	}
	k := hungKeyOf(&p.op)
	if _, listed := h.calls[k]; !listed {
		h.n.Add(1)
	}
	h.calls[k] = p
	return true
}

// returned unlists call p, given up, whose plugin has returned at last.
func (h *hungCalls) returned(p *pending) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if k := hungKeyOf(&p.op); h.calls[k] == p {
		delete(h.calls, k)
		h.n.Add(-1)
	}
}

// find returns the hung call of op, or nil.
func (h *hungCalls) find(op *operations.Operation) *pending {
	if h.n.Load() == 0 {
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.calls[hungKeyOf(op)]
}

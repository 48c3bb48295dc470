package monitor

import (
	"context"
	"sync/atomic"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/phase"
)

// SubmitRun starts a run as [operations.StartRun] does, on the Monitor's store, and hands
// it to the Monitor; the process that runs the Monitor calls it rather than
// operations.StartRun, for two differences:
//
//   - A template without a Created time is stamped with the Monitor's clock
//     ([WithClock]), so that the run's history and its operations' ages are counted on
//     the clock that times the operations out.
//   - When this call ran main and left the run waiting for its operations (or
//     finalizing), it wakes [Monitor.Run] (see [Monitor.Wake]), so that the operations
//     are first polled at once rather than up to an interval later. A call that finds
//     the run already started wakes nothing: a reconcile may call SubmitRun every time.
//
// It fails as operations.StartRun does. It is safe for concurrent use.
func (m *Monitor) SubmitRun(ctx context.Context, template operations.Run, main func(context.Context) (operations.MainRun, error)) (operations.Run, error) {
	if template.Created.IsZero() {
		template.Created = stamp(m.cfg.clock)
	}
	var ran atomic.Bool
	counted := main
	if main != nil {
		counted = func(ctx context.Context) (operations.MainRun, error) {
			ran.Store(true)
			return main(ctx)
		}
	}
	r, err := operations.StartRun(ctx, m.store, template, counted)
	if err == nil && ran.Load() && (phase.IsWaiting(r.Phase) || phase.IsFinalizing(r.Phase)) {
		m.Wake()
	}
	return r, err
}

// CancelRun asks that the run of o be cancelled, as [operations.RequestCancel] does
// on the Monitor's store, stamped with the Monitor's clock, and wakes [Monitor.Run] so
// that a pass cancels the run's operations at once rather than up to an interval later. The process that runs the
// Monitor calls it rather than operations.RequestCancel. It fails as
// operations.RequestCancel does (an error wrapping [operations.ErrRunEnded] for a run
// already ended). It is safe for concurrent use.
func (m *Monitor) CancelRun(ctx context.Context, o operations.Owner, reason string) (operations.Run, error) {
	r, err := operations.RequestCancel(ctx, m.store, o, reason, stamp(m.cfg.clock))
	if err == nil {
		m.Wake()
	}
	return r, err
}

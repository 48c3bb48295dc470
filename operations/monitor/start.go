package monitor

import (
	"context"
	"sync/atomic"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/phase"
)

// StartRun starts a run as [operations.StartRun] does, on the Monitor's store: it is
// the same act under the same name, and the process that runs the Monitor calls this
// form, which adds three things to it:
//
//   - The clock. A template without a Created time is stamped with the Monitor's clock
//     ([WithClock]), so that the run's history and its operations' ages are counted on
//     the clock that times the operations out.
//   - The wake. When this call ran main and left the run waiting for its operations (or
//     finalizing), it calls [Monitor.Wake], so that [Monitor.Run] starts a pass at once
//     and polls the new operations then, rather than up to an interval later. A call
//     that finds the run already started wakes nothing: a reconcile may call StartRun
//     every time.
//   - The restart rule. On a store that is an [operations.RunClaimer], a call that finds
//     the run InProgress, its main run not this call's, applies the restart rule to it
//     as [Monitor.Recover] does when it gets the run's claim: no main run holds the
//     claim, so the process that ran main died, and the run becomes Failed (its recorded
//     operations cancelled). While another caller's main run holds the claim, the call
//     returns the run InProgress, and a later call finds it started.
//
// It fails as operations.StartRun does, as Recover does for the run it fails, and with
// the error of an invalid option before it touches the store. It is safe for
// concurrent use.
func (m *Monitor) StartRun(ctx context.Context, template operations.Run, main func(context.Context) (operations.MainRun, error)) (operations.Run, error) {
	if err := m.cfg.invalid; err != nil {
		return operations.Run{}, err
	}
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
	if err == nil && !ran.Load() && r.Phase == phase.InProgress && m.claimer != nil {
		// Another caller's main run, or one whose process died: the claim tells them
		// apart (see Recover).
		if _, failed, ferr := m.failStarted(ctx, r.Owner); ferr != nil || failed {
			if ferr != nil {
				return operations.Run{}, ferr
			}
			return m.store.GetRun(ctx, r.Owner)
		}
	}
	return r, err
}

// RequestCancel asks that the run of o be cancelled, as [operations.RequestCancel] does
// on the Monitor's store: it is the same act under the same name, and the process that
// runs the Monitor calls this form, which adds two things to it. The request is stamped
// with the Monitor's clock ([WithClock]). When it is stored, the call calls
// [Monitor.Wake], so that [Monitor.Run] starts a pass at once and cancels the run's
// operations then, rather than up to an interval later. It fails as
// operations.RequestCancel does (an error wrapping [operations.ErrRunEnded] for a run
// already ended, and then wakes nothing), and with the error of an invalid option
// before it touches the store. It is safe for concurrent use.
func (m *Monitor) RequestCancel(ctx context.Context, o operations.Owner, reason string) (operations.Run, error) {
	if err := m.cfg.invalid; err != nil {
		return operations.Run{}, err
	}
	r, err := operations.RequestCancel(ctx, m.store, o, reason, stamp(m.cfg.clock))
	if err == nil {
		m.Wake()
	}
	return r, err
}

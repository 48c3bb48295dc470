package monitor

import (
	"context"
	"errors"
	"fmt"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/phase"
)

// RecoverResult is what [Monitor.Recover] did: the runs it failed because they were
// InProgress when the process stopped, with the reason each was given, and the waiting or
// finalizing runs it left for the Monitor to resume.
type RecoverResult struct {
	Failed []operations.Owner
	// Reasons[i] is the FailureReason Recover gave the run of Failed[i] (Velero's text),
	// what a controller writes on the run's object.
	Reasons []string
	Resumed []operations.Owner
}

// Recover applies the restart rules of [phase.OnRestart] to every stored run, as Velero
// does when its server starts: a run InProgress cannot be resumed and becomes Failed, with
// Velero's reason as its FailureReason and in its history; waiting and finalizing runs are
// left for the Monitor to resume; the rest (New, Queued, terminal) are untouched. Before
// it fails a run, it cancels the run's unfinished operations through their plugins and
// writes them Failed ([CanceledPrefix] and the restart reason), so that no data mover
// keeps running for a run that has failed (Velero leaves them running, no longer
// monitored). A plugin that does not cancel, or hangs past the call timeout, does not
// stop it. Records are stamped with the Monitor's clock ([WithClock]).
//
// On a store that is an [operations.RunClaimer], shared by several processes, Recover
// fails an InProgress run only when it gets the run's claim: [operations.StartRun]
// holds it while the run's main run is under way, in this process or another, and
// such a run is left alone. The claim of a starter that died ends by itself (see
// operations.RunClaimer); [Monitor.StartRun] fails the run then, when a reconcile
// starts it again, and so does a later Recover.
//
// Recover is idempotent. It stops at the first store error (a claim the store cannot
// tell the holder of among them), or when ctx ends, returning what it did so far; a
// crash in between leaves a run InProgress, and running Recover again finishes the
// work.
func (m *Monitor) Recover(ctx context.Context) (RecoverResult, error) {
	var res RecoverResult
	if err := m.cfg.invalid; err != nil {
		return res, err
	}
	stuck, err := m.store.ListRuns(ctx, operations.RunFilter{Phases: []phase.Phase{phase.InProgress}})
	if err != nil {
		return res, err
	}
	for _, r := range stuck {
		reason, failed, err := m.failStarted(ctx, r.Owner)
		if err != nil {
			return res, err
		}
		if failed {
			res.Failed = append(res.Failed, r.Owner)
			res.Reasons = append(res.Reasons, reason)
		}
	}
	resumable := operations.RunFilter{Phases: append(append([]phase.Phase{}, waiting.Phases...), finalizing.Phases...)}
	runs, err := m.store.ListRuns(ctx, resumable)
	if err != nil {
		return res, err
	}
	for _, r := range runs {
		res.Resumed = append(res.Resumed, r.Owner)
	}
	return res, nil
}

// failStarted applies the restart rule to the run of o, found InProgress: when it gets
// the run's claim (no main run holds it), it cancels the run's unfinished operations and
// fails the run with Velero's reason, and returns that reason and true. It returns false
// for a run whose claim another holder has, and for a run that has moved on or gone.
func (m *Monitor) failStarted(ctx context.Context, o operations.Owner) (reason string, failed bool, err error) {
	release, ok, err := m.claim(ctx, o, nil)
	if err != nil {
		return "", false, fmt.Errorf("claim the InProgress run %s: %w", o, err)
	}
	if !ok {
		m.cfg.logger.Info("left a run InProgress: its main run holds its claim", "run", o.String())
		return "", false, nil
	}
	defer release()
	r, err := m.store.GetRun(ctx, o)
	switch {
	case errors.Is(err, operations.ErrNotFound):
		return "", false, nil
	case err != nil:
		return "", false, err
	case r.Phase != phase.InProgress:
		return "", false, nil // moved on since it was listed
	}
	_, why, _ := phase.OnRestart(r.Owner.Kind, r.Phase, r.Profile)
	if err := m.cancelOperations(ctx, r.Owner, why); err != nil {
		return "", false, fmt.Errorf("cancel the operations of %s: %w", r.Owner, err)
	}
	now := stamp(m.cfg.clock)
	_, err = m.store.UpdateRun(ctx, r.Owner, func(r *operations.Run) error {
		var (
			next    phase.Phase
			changed bool
		)
		next, reason, changed = phase.OnRestart(r.Owner.Kind, r.Phase, r.Profile)
		if !changed {
			return errNoChange // moved on since it was read
		}
		r.FailureReason = reason
		return r.SetPhase(next, reason, now)
	})
	switch {
	case err == nil:
		return reason, true, nil
	case errors.Is(err, errNoChange), errors.Is(err, operations.ErrNotFound):
		return "", false, nil
	}
	return "", false, err
}

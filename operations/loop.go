package operations

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/itemops/itemops/phase"
)

// Run polls every waiting run, then finalizes every finalizing run, once per interval,
// until ctx is done; then it returns ctx.Err(), with every goroutine it started finished
// (but for calls to plugins that ignore their context: see [WithCallTimeout]). Failures
// of the store or of a finalizer are logged, reported to the observer, and retried on the
// next pass; they never stop Run. The first pass starts at once.
//
// Run does not apply the restart rules: call [Monitor.Recover] (or [Recover]) once before
// the first Run after a process starts.
func (m *Monitor) Run(ctx context.Context) error {
	for {
		stats := m.pass(ctx)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if stats.Err != nil {
			m.cfg.logger.ErrorContext(ctx, "pass failed", "error", stats.Err)
		}
		if m.cfg.observer != nil {
			m.cfg.observer(stats)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-m.cfg.clock.After(m.cfg.interval):
		}
	}
}

// pass polls all waiting runs at once (their operations share the Monitor's workers),
// then finalizes the finalizing ones.
func (m *Monitor) pass(ctx context.Context) PassStats {
	stats := PassStats{Start: m.cfg.clock.Now()}
	var errs []error
	runs, err := m.store.ListRuns(ctx, waiting)
	if err != nil {
		errs = append(errs, fmt.Errorf("list waiting runs: %w", err))
	}
	var (
		mu sync.Mutex // guards stats and errs while polls run
		wg sync.WaitGroup
	)
	for _, r := range runs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := m.Poll(ctx, r.Owner)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, fmt.Errorf("poll %s: %w", r.Owner, err))
				return
			}
			if res.Skipped {
				stats.Skipped++
				return
			}
			stats.Runs++
			stats.Operations += res.Running + res.Completed + res.Failed
			stats.Completed += res.Completed
			stats.Failed += res.Failed
			stats.NewErrors += res.NewErrors
			if res.Phase != r.Phase {
				stats.Advanced++
			}
		}()
	}
	wg.Wait()

	fin, err := m.store.ListRuns(ctx, finalizing)
	if err != nil {
		errs = append(errs, fmt.Errorf("list finalizing runs: %w", err))
	}
	for _, r := range fin {
		advanced, skipped, err := m.finalize(ctx, r.Owner)
		if err != nil {
			errs = append(errs, fmt.Errorf("finalize %s: %w", r.Owner, err))
		}
		if skipped {
			stats.Skipped++
		}
		if advanced {
			stats.Finalized++
			stats.Advanced++
		}
	}
	stats.Duration = m.cfg.clock.Now().Sub(stats.Start)
	stats.Err = errors.Join(errs...)
	return stats
}

// finalize runs the finalizer for the run of o, if it is still finalizing and this
// Monitor can claim it, and moves it to its terminal phase. It reports whether it moved
// the run, and whether it skipped it because another Monitor holds its claim.
func (m *Monitor) finalize(ctx context.Context, o Owner) (advanced, skipped bool, err error) {
	release, ok, err := m.claim(ctx, o)
	if err != nil {
		return false, false, fmt.Errorf("claim run %s: %w", o, err)
	}
	if !ok {
		return false, true, nil
	}
	defer release()
	// Read the run under the claim: a Monitor that held it before may have finalized
	// it since the pass listed it, and the finalizer should not run again for nothing.
	run, err := m.store.GetRun(ctx, o)
	if err != nil || !phase.IsFinalizing(run.Phase) {
		return false, false, err
	}
	advanced, err = m.finalizeClaimed(ctx, o, run)
	return advanced, false, err
}

// finalizeClaimed is finalize once the run is claimed.
func (m *Monitor) finalizeClaimed(ctx context.Context, o Owner, run Run) (bool, error) {
	var finalizeErr error
	if m.cfg.finalizer != nil {
		ops, err := m.store.ListOperations(ctx, o, OperationFilter{})
		if err != nil {
			return false, err
		}
		items := postOperationItems(ops)
		finalizeErr = m.runFinalizer(ctx, run, items)
		if ctx.Err() != nil {
			return false, ctx.Err()
		}
	}
	now := stamp(m.cfg.clock)
	_, err := m.store.UpdateRun(ctx, o, func(r *Run) error {
		if !phase.IsFinalizing(r.Phase) {
			return errNoChange // another Monitor finalized it
		}
		next, reason := phase.Completed, "finalized"
		if r.Phase == phase.FinalizingPartiallyFailed {
			next = phase.PartiallyFailed
		}
		if finalizeErr != nil {
			next, reason = phase.PartiallyFailed, "finalize: "+finalizeErr.Error()
			r.Errors++
		}
		return r.SetPhase(next, reason, now)
	})
	switch {
	case errors.Is(err, errNoChange):
		return false, nil
	case err != nil:
		return false, err
	case finalizeErr != nil:
		return true, fmt.Errorf("finalizer: %w", finalizeErr)
	}
	return true, nil
}

// runFinalizer calls the finalizer, turning a panic into an error.
func (m *Monitor) runFinalizer(ctx context.Context, r Run, items []ResourceIdentifier) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("finalizer panicked: %v", v)
		}
	}()
	return m.cfg.finalizer.Finalize(ctx, r.Clone(), items)
}

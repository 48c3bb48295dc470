package monitor

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/phase"
)

// Run polls every waiting run, then finalizes every finalizing run, once per interval,
// until ctx is done; then it returns ctx.Err(), with every goroutine it started finished
// (but for calls to plugins and finalizers that ignore their context: see
// [WithCallTimeout] and [WithFinalizeTimeout]). Failures of the store or of a finalizer
// are logged, reported to the observer, and retried on the next pass, with one
// exception: when a pass meets a damaged store (an error wrapping
// [operations.ErrCorrupt]), Run logs it, reports the pass to the observer, and returns
// an error that wraps the pass's, without another pass. A damaged store cannot be
// trusted with what a pass would write; see [Monitor.RunOnce] for how to look at the
// pass's error. The first pass starts at once.
//
// Run does not apply the restart rules: call [Monitor.Recover] once before the first Run
// after a process starts. [Monitor.Wake] starts the next pass before the interval is over.
// When an operation waits for its next poll after a retried Progress error (see
// [RetryPolicy]) and is due before the interval is over, the next pass starts when it is
// due, but no sooner than a tenth of the interval after the pass. No pass starts sooner
// than [MinInterval] after the last, but for a Wake.
//
// When an option was given an invalid value (see [WithRetryPolicy] and
// [WithStallTimeout]), Run returns its error, which wraps [operations.ErrInvalid], at
// once, before it touches the store.
//
// When the store is an [operations.ClaimKeeper] (storage/etcdstore and storage/kubestore
// are), Run keeps its claims in a [operations.ClaimSession] that it starts with its
// interval and [Monitor.Wake]: each pass claims its runs under the session, which holds
// them from one pass to the next instead of giving each up, and Run tells the session at
// the end of each pass how many runs the pass listed (or that a list failed), so that
// the store may hand runs over to other replicas; what kept the session from reading or
// watching the other replicas' claims (a right the store lacks), Run logs as a warning,
// "claims not shared with other replicas", and goes on. The session may start a pass
// early, as Wake does, when a run another replica handed over becomes free. Run ends the
// session before it returns, which gives up every claim it holds (waiting for the store
// a bounded time: storage/etcdstore's request timeout). While its passes skip runs
// that other Monitors hold, it logs how many (see the package documentation, "Several
// Monitors").
func (m *Monitor) Run(ctx context.Context) error {
	if err := m.cfg.invalid; err != nil {
		return err
	}
	var session operations.ClaimSession // nil when the store keeps no claims
	if m.keeper != nil {
		session = m.keeper.KeepClaims(ctx, m.cfg.interval, m.Wake)
		defer session.End()
	}
	for {
		stats, err := m.runOnce(ctx, session)
		if ctx.Err() != nil {
			return ctx.Err()
		} else if errors.Is(err, operations.ErrCorrupt) {
			m.cfg.logger.ErrorContext(ctx, "pass met a damaged store; the Monitor stops", "error", err)
			return fmt.Errorf("monitor stopped: the store is damaged: %w", err)
		} else if err != nil {
			m.cfg.logger.ErrorContext(ctx, "pass failed", "error", err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-m.wake:
		case <-m.cfg.clock.After(m.wait(stats.NextDue)):
		}
	}
}

// wait returns how long Run waits after a pass before the next: the interval, or less
// when an operation waiting for its next poll is due sooner (nextDue, the pass's
// PassStats.NextDue), but never less than a tenth of the interval or MinInterval (which
// the interval is at least), so that due times close together make few passes.
func (m *Monitor) wait(nextDue time.Time) time.Duration {
	if nextDue.IsZero() {
		return m.cfg.interval
	}
	floor := max(m.cfg.interval/10, MinInterval)
	return min(m.cfg.interval, max(nextDue.Sub(stamp(m.cfg.clock)), floor))
}

// Wake makes [Monitor.Run] start its next pass now instead of at the end of the
// interval; a pass under way is followed by another at once, since it may have listed
// the runs before the change that called for the wake. Wakes that come before that next
// pass starts make one pass. Wake never blocks, does nothing when no Run is going (the
// next Run's first pass starts at once anyway), and is safe for concurrent use.
// [Monitor.StartRun] calls it for the runs it starts, and [Monitor.RequestCancel] for
// the runs it asks to cancel.
func (m *Monitor) Wake() {
	select {
	case m.wake <- struct{}{}:
	default:
	}
}

// RunOnce makes one pass of [Monitor.Run]: it polls every waiting run, then finalizes
// every finalizing run, including those the polls just moved to a finalizing phase, and
// tells the observer ([WithObserver]) of each run it changed and of what the pass did.
// With a fake clock ([WithClock]), a test moves a run to its end with RunOnce and no real
// waiting.
//
// RunOnce returns the pass's statistics and, as its error, the error of an option given
// an invalid value (before it touches the store), ctx.Err() when ctx ended first,
// or else what went wrong with the store or a finalizer (the same as PassStats.Err); a
// failure of one run does not stop the pass. A run that the store no longer holds when
// the pass reads or writes it (deleted, or replaced by the run of a new owner of its
// name, since the pass listed it) is left alone and counted nowhere: no failure. The error joins the failures of the pass,
// so errors.Is(err, operations.ErrCorrupt) tells whether any of them met a damaged
// store, after which [Monitor.Run] would stop. It is safe to call concurrently with other
// methods, Run included, and several Monitors may make passes over one store at once.
//
// When the store is an [operations.RunClaimer], RunOnce claims each run before it works
// on it. By default it gives each claim up when it is done with the run, so that a pass
// leaves no claim behind. With [WithKeptClaims], on a store that is an
// [operations.ClaimKeeper], it keeps them instead, as Run does: the first RunOnce starts
// a claim session (with the Monitor's interval, and no wake), which holds the claims
// from one call to the next and balances the runs with the other replicas at the end of
// each pass, until [Monitor.Close] ends it; a pass over runs that no other replica
// wants then makes no claim requests. Only one pass at a time uses the session: a
// RunOnce called while another's pass uses it claims each run and gives it up, as
// without the option. The session is not Run's: a Monitor that makes passes both ways
// has two sessions, and the replicas count it twice when they share the runs. When
// ctx ends during a pass, the session keeps the claims it holds for the next pass (or
// for Close to give up).
func (m *Monitor) RunOnce(ctx context.Context) (PassStats, error) {
	if err := m.cfg.invalid; err != nil {
		return PassStats{}, err
	}
	session, done := m.beginOnce(ctx)
	defer done()
	return m.runOnce(ctx, session)
}

// runOnce is RunOnce, with the claims of the pass made under session when it is not nil
// (a pass of Run on a store that keeps claims); it tells session how the pass ended.
func (m *Monitor) runOnce(ctx context.Context, session operations.ClaimSession) (PassStats, error) {
	var end func(PassStats)
	if f := m.cfg.tracer.Pass; f != nil {
		ctx, end = f(ctx, m.cfg.clock.Now())
	}
	stats, listed, complete := m.pass(ctx, session)
	if end != nil {
		traced := stats
		if err := ctx.Err(); err != nil && !errors.Is(traced.Err, err) {
			traced.Err = errors.Join(traced.Err, err)
		}
		end(traced)
	}
	if err := ctx.Err(); err != nil {
		return stats, err
	}
	if f := m.cfg.observer.Pass; f != nil {
		f(stats)
	}
	m.logHeld(ctx, stats.Skipped)
	switch {
	case session == nil:
	case complete:
		if err := session.EndPass(listed); err != nil {
			m.cfg.logger.WarnContext(ctx, "claims not shared with other replicas: the claim session could not read or watch its store", "error", err)
		}
	default:
		session.EndIncompletePass()
	}
	return stats, stats.Err
}

// pass polls the waiting runs, then finalizes the finalizing ones, at most
// cfg.storeWork runs at a time (their operations share the Monitor's workers), claiming
// them under session when it is not nil. It also returns how many runs it listed,
// waiting and finalizing, and whether both lists were read (complete).
func (m *Monitor) pass(ctx context.Context, session operations.ClaimSession) (stats PassStats, listed int, complete bool) {
	stats = PassStats{Start: m.cfg.clock.Now()}
	var (
		errs []error
		mu   sync.Mutex // guards stats and errs while runs are worked on
	)
	complete = true
	fail := func(err error) {
		mu.Lock()
		errs = append(errs, err)
		mu.Unlock()
	}
	polled := func(r operations.Run, res PollResult, info pollInfo, err error) {
		fresh := info.fresh
		if gone(err) {
			return
		} else if err != nil {
			fail(fmt.Errorf("poll %s: %w", r.Owner, err))
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if res.Skipped {
			stats.Skipped++
			return
		}
		stats.Runs++
		stats.Operations += res.Running - res.Deferred + res.Completed + res.Failed
		stats.OperationsNew += fresh
		stats.OperationsInProgress += res.Running - fresh
		stats.OperationsDeferred += res.Deferred
		if res.ProgressHeld {
			stats.ProgressHeld++
		}
		stats.NextDue = earliest(stats.NextDue, res.NextDue)
		stats.Completed += res.Completed
		stats.Failed += res.Failed
		stats.NewErrors += res.NewErrors
		if res.Phase != r.Phase {
			stats.Advanced++
		}
		if f := m.cfg.observer.RunChanged; f != nil && (res.Phase != r.Phase || res.Completed+res.Failed > 0 || info.wrote) {
			f(RunChange{Owner: r.Owner, From: r.Phase, To: res.Phase,
				Running: res.Running, Completed: res.Completed, Failed: res.Failed,
				Progressed: info.wrote && res.Phase == r.Phase && res.Completed+res.Failed == 0})
		}
	}
	var runs []operations.Run
	if m.passer != nil {
		// The runs and their unfinished operations are read a page at a time. The polls
		// of a page start as slots free up, and the next page is read once the last of
		// them has started: the pages' polls follow each other without a pause, and a
		// page is read at most cfg.storeWork polls before its runs are polled.
		var polls errgroup.Group
		polls.SetLimit(m.cfg.storeWork)
		err := m.passer.ReadPass(ctx, waiting, func(page []operations.PassRun) error {
			for _, pr := range page {
				if err := ctx.Err(); err != nil {
					return err
				}
				runs = append(runs, pr.Run)
				polls.Go(func() error {
					ctx, end := m.startRun(ctx, pr.Run, false)
					res, info, err := m.pollRead(ctx, pr, session)
					if end != nil {
						endRun(end, res, info.cancel, err)
					}
					polled(pr.Run, res, info, err)
					return nil
				})
			}
			return nil
		})
		_ = polls.Wait() // each poll's error went to polled
		if err != nil {
			fail(fmt.Errorf("read waiting runs: %w", err))
			complete = false
		}
	} else {
		var err error
		runs, err = m.store.ListRuns(ctx, waiting)
		if err != nil {
			fail(fmt.Errorf("list waiting runs: %w", err))
			complete = false
		}
		each(ctx, m.cfg.storeWork, runs, func(r operations.Run) {
			ctx, end := m.startRun(ctx, r, false)
			res, info, err := m.poll(ctx, r.Owner, session)
			if end != nil {
				endRun(end, res, info.cancel, err)
			}
			polled(r, res, info, err)
		})
	}

	fin, err := m.store.ListRuns(ctx, finalizing)
	if err != nil {
		fail(fmt.Errorf("list finalizing runs: %w", err))
		complete = false
	}
	if complete {
		m.progress.keep(runs)
	}
	stats.RunPhases = countPhases(runs, fin)
	each(ctx, m.cfg.storeWork, fin, func(r operations.Run) {
		ctx, end := m.startRun(ctx, r, true)
		to, skipped, cancel, err := m.finalize(ctx, r.Owner, session)
		if end != nil {
			res := PollResult{Phase: cmp.Or(to, r.Phase), Skipped: skipped}
			endRun(end, res, cancel, err)
		}
		if gone(err) {
			return
		} else if err != nil {
			fail(fmt.Errorf("finalize %s: %w", r.Owner, err))
		}
		mu.Lock()
		defer mu.Unlock()
		if skipped {
			stats.Skipped++
		}
		if to != "" {
			stats.Finalized++
			stats.Advanced++
			if f := m.cfg.observer.RunChanged; f != nil {
				f(RunChange{Owner: r.Owner, From: r.Phase, To: to})
			}
		}
	})
	stats.Duration = m.cfg.clock.Now().Sub(stats.Start)
	stats.Err = errors.Join(errs...)
	for _, c := range stats.RunPhases {
		listed += c.Runs
	}
	return stats, listed, complete
}

// gone reports whether err says that a run the pass listed is no longer in the store:
// deleted since (its object was, and the integration's HandleDeletion deleted the run
// while this pass polled it), or replaced by the run of a new owner of its name. There
// is nothing left to poll or finalize, and nothing failed.
func gone(err error) bool {
	return errors.Is(err, operations.ErrNotFound) || errors.Is(err, operations.ErrUIDMismatch)
}

// each calls work for every item, n at a time, and returns when all calls have
// returned. Once ctx ends it starts no more.
func each[T any](ctx context.Context, n int, items []T, work func(T)) {
	var g errgroup.Group
	g.SetLimit(n)
	for _, it := range items {
		if ctx.Err() != nil {
			break
		}
		g.Go(func() error { work(it); return nil })
	}
	_ = g.Wait()
}

// countPhases counts the waiting runs and the finalizing runs fin that are not among them
// (a poll moved those), by kind and phase, sorted; nil when there are none.
func countPhases(waiting, fin []operations.Run) []PhaseCount {
	polled := make(map[runKey]bool, len(waiting))
	for _, r := range waiting {
		polled[keyOf(r.Owner)] = true
	}
	index := make(map[PhaseCount]int) // by kind and phase, Runs zero
	var counts []PhaseCount
	for _, r := range slices.Concat(waiting, fin) {
		if phase.IsFinalizing(r.Phase) && polled[keyOf(r.Owner)] {
			continue
		}
		k := PhaseCount{Kind: r.Owner.Kind, Phase: r.Phase}
		i, ok := index[k]
		if !ok {
			i, index[k] = len(counts), len(counts)
			counts = append(counts, k)
		}
		counts[i].Runs++
	}
	slices.SortFunc(counts, func(a, b PhaseCount) int {
		return cmp.Or(cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.Phase, b.Phase))
	})
	return counts
}

// Finalize finalizes the run of o, as a pass of [Monitor.Run] does, when it is in
// Finalizing or FinalizingPartiallyFailed: it calls the [Finalizer] (within the finalize
// timeout) and moves the run to Completed or PartiallyFailed. It returns the run's phase
// afterwards. A run in any other phase is left alone. When the store is a
// [operations.RunClaimer] and another Monitor holds the run's claim, Finalize does
// nothing and returns the phase the run had. It fails with the store's errors, the
// finalizer's error (wrapped; the run has then moved to PartiallyFailed), or ctx.Err().
func (m *Monitor) Finalize(ctx context.Context, o operations.Owner) (phase.Phase, error) {
	if err := m.cfg.invalid; err != nil {
		return "", err
	}
	run, err := m.store.GetRun(ctx, o)
	if err != nil {
		return "", err
	}
	if !phase.IsFinalizing(run.Phase) {
		return run.Phase, nil
	}
	to, skipped, _, err := m.finalize(ctx, o, nil)
	switch {
	case skipped:
		return run.Phase, nil
	case to != "":
		return to, err
	case err != nil:
		return "", err
	}
	run, err = m.store.GetRun(ctx, o)
	return run.Phase, err
}

// finalize runs the finalizer for the run of o, if it is still finalizing and this
// Monitor can claim it (under session when it is not nil; see claim), and moves it to
// its terminal phase. It returns that phase when it moved the run (else ""), whether
// it skipped the run because another Monitor holds its claim, and the run's cancel
// request when it failed the run for it instead.
func (m *Monitor) finalize(ctx context.Context, o operations.Owner, session operations.ClaimSession) (to phase.Phase, skipped bool, cancel operations.CancelRequest, err error) {
	release, ok, err := m.claim(ctx, o, session)
	if err != nil {
		return "", false, cancel, fmt.Errorf("claim run %s: %w", o, err)
	}
	if !ok {
		return "", true, cancel, nil
	}
	defer release()
	// Read the run under the claim: a Monitor that held it before may have finalized
	// it since the pass listed it, and the finalizer should not run again for nothing.
	run, err := m.store.GetRun(ctx, o)
	if err != nil || !phase.IsFinalizing(run.Phase) {
		return "", false, cancel, err
	}
	if run.CancelRequested() {
		_, to, err = m.failCancelled(ctx, run)
		return to, false, run.Cancel, err
	}
	to, err = m.finalizeClaimed(ctx, o, run)
	return to, false, cancel, err
}

// finalizeClaimed is finalize once the run is claimed.
func (m *Monitor) finalizeClaimed(ctx context.Context, o operations.Owner, run operations.Run) (phase.Phase, error) {
	var finalizeErr error
	if m.cfg.finalizer != nil {
		ops, err := m.store.ListOperations(ctx, o, operations.OperationFilter{})
		if err != nil {
			return "", err
		}
		items := postOperationItems(ops)
		finalizeErr = m.runFinalizer(ctx, run, items)
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
	}
	now := stamp(m.cfg.clock)
	r, err := m.store.UpdateRun(ctx, o, func(r *operations.Run) error {
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
		return "", nil
	case err != nil:
		return "", err
	case finalizeErr != nil:
		return r.Phase, fmt.Errorf("finalizer: %w", finalizeErr)
	}
	return r.Phase, nil
}

// runFinalizer calls the finalizer in a goroutine of its own, with a context that ends
// after the finalize timeout, and returns its error, an error for a panic, or an error
// saying it was given up when it has not returned by the deadline. A finalizer that
// ignores its context keeps its goroutine until it returns.
func (m *Monitor) runFinalizer(parent context.Context, r operations.Run, items []operations.ResourceIdentifier) error {
	var end func(FinalizeStats)
	if f := m.cfg.tracer.Finalize; f != nil {
		parent, end = f(parent, r.Clone())
	}
	ctx, cancel := context.WithTimeout(parent, m.cfg.finalizeTimeout)
	defer cancel()
	start := time.Now()
	done := make(chan error, 1)
	go func() {
		defer func() {
			if v := recover(); v != nil {
				done <- fmt.Errorf("finalizer panicked: %v", v)
			}
		}()
		done <- m.cfg.finalizer.Finalize(ctx, r.Clone(), items)
	}()
	var (
		err      error
		timedOut bool
	)
	select {
	case err = <-done:
	case <-ctx.Done():
		err = ctx.Err()
		if parent.Err() == nil {
			timedOut = true
			err = fmt.Errorf("no answer within %s", m.cfg.finalizeTimeout)
		}
	}
	if f := m.cfg.observer.Finalized; f != nil || end != nil {
		s := FinalizeStats{Owner: r.Owner, Duration: time.Since(start), Err: err, TimedOut: timedOut}
		if f != nil {
			f(s)
		}
		if end != nil {
			end(s)
		}
	}
	return err
}

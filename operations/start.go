package operations

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/itemops/itemops/internal/textlimit"
	"github.com/itemops/itemops/phase"
)

// A RunStarter is an optional ability of a [Store]: it creates a run together with the
// first batch of its operations in one atomic write, so that a reader, or a process that
// restarts after a crash, sees the run with all those operations or sees neither. It is
// for runs whose operations are known before the run is written (a copy or a migration
// of runs, a benchmark's setup). Stores built on storage/kv (memstore, boltstore,
// etcdstore, kubestore) have it. [StartRun] does not use it: it writes the run before
// main runs, so that main runs once.
//
// CreateRunWithOperations fails as CreateRun does on r ([ErrExists],
// [ErrUIDMismatch], the error of [Run.Validate]) and as PutOperations does on ops (the
// error of [ValidateBatch]), writing nothing.
type RunStarter interface {
	CreateRunWithOperations(ctx context.Context, r Run, ops []Operation) error
}

// A MainRun is what the main run of a backup or restore did: the operations its plugins
// started and what went wrong. [StartRun] records it.
type MainRun struct {
	// Operations are the operations the plugins started, one per returned operation ID.
	// StartRun fills in what they leave unset: the owner (the run's), the phase
	// (OperationNew) and the Created time (the run's start).
	Operations []Operation
	// Errors and Warnings are added to the run's counts.
	Errors, Warnings int
	// Fatal says the main run failed as a whole: the run becomes Failed, with Reason as
	// its FailureReason.
	Fatal bool
	// Reason is recorded in the run's history, cut to [MaxTextBytes] (visibly) when
	// longer; empty means "main run ended: N operations started".
	Reason string
}

// StartRun starts the run of template.Owner: it records the run InProgress, calls main
// (which runs the plugins and returns what they started), records the operations in one
// batch, and moves the run to the phase [phase.AfterMainRun] gives (for a backup with
// operations pending, WaitingForPluginOperations), where a Monitor (package
// operations/monitor) takes it over. It returns the run as stored. A cancel requested
// while main runs counts as phase.Outcome.Cancelled: with nothing pending the run ends
// Failed with the request's reason; with operations pending it waits, and the Monitor
// cancels them before it fails the run.
//
// template gives the owner and what else the new run starts with (Profile,
// OperationTimeout, item counts); its Phase must be empty or New. The owner's UID is
// optional: callers outside Kubernetes may leave it empty (a run then belongs to any
// owner of its kind and name), while the Kubernetes integration always sets it, so that
// an object created again under a deleted one's name never gets the old run.
// template.Created, when set, is the time stamped on the run, its history and its
// operations; else the system clock's current time is.
//
// StartRun needs only the store. A program that runs a Monitor (package
// operations/monitor) calls the Monitor's method of the same name instead, which calls
// this one on the Monitor's store, stamps a template without a Created time with the
// Monitor's clock (so that an operation's age is never counted across two clocks),
// wakes the Monitor's Run, so that the new operations are polled at once, and on a
// store with claims applies the restart rule to a run whose starter died.
//
// # Main runs once
//
// StartRun is idempotent, so a reconcile can call it every time, and main runs once for
// a run even when several callers, in one process or in several replicas that share the
// store, start it at once:
//
//   - The run is written InProgress before main runs, by [Store.CreateRun], which fails
//     with [ErrExists] for every caller but one; a run stored before (New, Queued,
//     ReadyToStart) is moved to InProgress by one [Store.UpdateRun] that refuses a run
//     already moved. Only the caller whose write made the run InProgress calls main.
//   - A call that finds the run InProgress returns it as stored and does not call main:
//     another caller's main is under way. When the store is a [RunClaimer], only a caller
//     that holds the run's claim writes the run InProgress, and it holds the claim until
//     main's result is written; a call that finds the claim held waits until its holder
//     has made the run InProgress (and then returns it) or the claim is free. So a
//     Monitor can tell a main under way from one whose process died: Monitor.Recover (package operations/monitor)
//     fails an InProgress run only when it gets the run's claim, as Velero fails a
//     backup it finds InProgress when its server starts, and Monitor.StartRun does the
//     same for a run it finds InProgress once the claim of its dead starter has ended.
//     On a store without claims (used by one process), Recover fails every InProgress
//     run when the process starts again.
//   - When the run has passed InProgress, StartRun returns it as stored.
//
// After main, StartRun writes the operations ([Store.PutOperations]) and then the
// phase ([Store.UpdateRun]). When main fails or returns an invalid batch, nothing of its
// result has been written, and the run StartRun created is deleted again, so that the
// next call starts it afresh and runs main again; a run that was stored before StartRun
// moved it to InProgress cannot go back to New, and becomes Failed with the error as its
// FailureReason. That clean-up is made even when ctx has ended (within a bounded time);
// when it fails too, the run stays InProgress. When one of the two writes fails, the
// run stays InProgress and is not undone: a write whose answer was lost may have been
// applied, and the operations it recorded may be running. So does a crash while main
// runs or between the writes. The restart rules then take the run: Recover (or, on a
// store with claims, a later StartRun of package operations/monitor once the claim has
// ended) cancels the operations it recorded and fails it. Since main may thus run again for
// one owner after a failure, the operation IDs it returns should be derived from the run
// and the item (as Velero's data movers do), or its plugins should tolerate a second
// Execute.
//
// StartRun does not use [RunStarter]: its one atomic write would come after main, too
// late to keep a second caller from running main as well.
//
// StartRun fails with main's error (the run is then cleaned up as above), with the
// store's errors (an owner UID that differs from the stored run's gives one wrapping
// [ErrUIDMismatch]; a claim the store cannot tell the holder of gives its ClaimRun
// error), with an error wrapping [ErrInvalid] for a bad template or batch, or with
// ctx.Err(). It is safe for concurrent use as far as its store is.
func StartRun(ctx context.Context, s Store, template Run, main func(context.Context) (MainRun, error)) (Run, error) {
	if template.Phase != "" && template.Phase != phase.New {
		return Run{}, fmt.Errorf("start run %s: template in phase %s, want New: %w", template.Owner, template.Phase, ErrInvalid)
	}
	if main == nil {
		return Run{}, fmt.Errorf("start run %s: nil main: %w", template.Owner, ErrInvalid)
	}
	if err := template.Owner.Validate(); err != nil {
		return Run{}, fmt.Errorf("start run: %w", err)
	}
	now := template.Created
	if now.IsZero() {
		now = time.Now()
	}
	now = now.Round(0).UTC()
	r := template.Clone()
	r.Phase, r.Created, r.History = phase.New, now, nil
	if err := r.SetPhase(phase.InProgress, "main run started", now); err != nil {
		// Every machine goes from New to InProgress: the template's kind is not one its
		// profile declares (see phase.Declare).
		return Run{}, fmt.Errorf("start run %s: %w: %w", r.Owner, ErrInvalid, err)
	}
	if err := r.Validate(); err != nil {
		return Run{}, err
	}

	stored, err := s.GetRun(ctx, r.Owner)
	switch {
	case err == nil && (stored.Phase == phase.InProgress || started(stored.Phase)):
		return stored, nil
	case errors.Is(err, ErrNotFound):
		stored = Run{}
	case err != nil:
		return Run{}, err
	}
	release, other, err := claimMainRun(ctx, s, r.Owner)
	switch {
	case err != nil:
		return Run{}, err
	case release == nil:
		return other, nil // another caller started it while this one waited for the claim
	}
	defer release()
	stored, took, created, err := takeMainRun(ctx, s, r, stored, now)
	if err != nil || !took {
		return stored, err
	}
	o := stored.Owner
	res, err := main(ctx)
	var ops []Operation
	if err == nil {
		ops = mainOperations(o, res.Operations, now)
		err = ValidateBatch(o, ops)
	}
	if err != nil {
		// Nothing of main's result was written: the run can be undone.
		return Run{}, abandonMainRun(ctx, s, o, created, now, err)
	}
	// A write below whose answer is lost may have been applied, recording operations
	// that main started: the run then stays InProgress, not undone, for the restart
	// rules, which cancel what it recorded before they fail it.
	if len(ops) > 0 {
		if err := s.PutOperations(ctx, o, ops); err != nil {
			return Run{}, fmt.Errorf("start run %s: write its main run's operations (the run stays %s): %w", o, phase.InProgress, err)
		}
	}
	done, err := s.UpdateRun(ctx, o, func(r *Run) error {
		if r.Phase != phase.InProgress {
			return errNoChange // Recover failed it
		}
		return endMainRun(r, res, len(ops), now)
	})
	switch {
	case errors.Is(err, errNoChange):
		return s.GetRun(ctx, o)
	case err != nil:
		return Run{}, fmt.Errorf("start run %s: end its main run (the run stays %s): %w", o, phase.InProgress, err)
	}
	return done, nil
}

// claimMainRun claims the run of o, when s is a RunClaimer, for the main run about to
// start, and returns the function that gives the claim up (a no-op on a store without
// claims). The caller that runs main must hold the claim from before its write makes
// the run InProgress until main's result is written, so that a Monitor can tell a main
// under way from one whose process died: a caller that wrote the run InProgress without
// the claim could have its run failed by a Monitor that took the free claim. So while
// another caller holds the claim (it is starting the run), claimMainRun waits, reading
// the run, until that caller has made the run InProgress, and then returns a nil
// release and the run as stored; or until the claim is free again (its holder gave up,
// or its process died and the claim ended by itself), which it then takes. It fails
// with the store's errors, or with ctx.Err() while it waits.
func claimMainRun(ctx context.Context, s Store, o Owner) (release func(), other Run, err error) {
	claimer, ok := s.(RunClaimer)
	if !ok {
		return func() {}, Run{}, nil
	}
	wait := time.Millisecond
	for {
		release, ok, err := claimer.ClaimRun(ctx, o)
		switch {
		case err != nil:
			return nil, Run{}, fmt.Errorf("start run %s: claim it for its main run: %w", o, err)
		case ok && release == nil:
			return func() {}, Run{}, nil
		case ok:
			return release, Run{}, nil
		}
		stored, err := s.GetRun(ctx, o)
		switch {
		case err == nil && (stored.Phase == phase.InProgress || started(stored.Phase)):
			return nil, stored, nil
		case err != nil && !errors.Is(err, ErrNotFound):
			return nil, Run{}, err
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, Run{}, fmt.Errorf("start run %s: wait for the claim that another caller holds: %w", o, ctx.Err())
		case <-t.C:
		}
		wait = min(2*wait, 100*time.Millisecond)
	}
}

// takeMainRun writes r, InProgress, for its main run: it creates r when stored is the
// zero Run (no run was found), else moves the stored run to InProgress. took says that
// this call's write made the run InProgress, and only then may the caller run main;
// created says that it created the run. When took is false, the run returned is the
// one another caller started, as stored.
func takeMainRun(ctx context.Context, s Store, r, stored Run, now time.Time) (run Run, took, created bool, err error) {
	if stored.Owner == (Owner{}) {
		switch err := s.CreateRun(ctx, r); {
		case err == nil:
			return r, true, true, nil
		case !errors.Is(err, ErrExists):
			return Run{}, false, false, err
		}
		// Another caller created it first: move it on below only if it is still before
		// its main run (it was created New, say, by a queue).
	}
	run, err = s.UpdateRun(ctx, r.Owner, func(r *Run) error {
		if r.Phase == phase.InProgress || started(r.Phase) {
			return errNoChange // another caller runs, or ran, main
		}
		return r.SetPhase(phase.InProgress, "main run started", now)
	})
	if errors.Is(err, errNoChange) {
		run, err = s.GetRun(ctx, r.Owner)
		return run, false, false, err
	}
	if err != nil {
		return Run{}, false, false, err
	}
	return run, true, false, nil
}

// cleanupTimeout bounds the clean-up of a main run that failed, made even when the
// caller's context has ended.
const cleanupTimeout = 30 * time.Second

// abandonMainRun cleans up after the main run of o failed with cause, before anything
// of its result was written: it deletes the run when this call created it (with whatever
// operations were written), so that the next call starts afresh, and otherwise fails
// it with cause as its FailureReason, at time now, since a run cannot go back to New. It returns
// cause, joined with the clean-up's own error when that failed too.
func abandonMainRun(ctx context.Context, s Store, o Owner, created bool, now time.Time, cause error) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	var err error
	if created {
		// Deleted only while InProgress: a run that Recover failed meanwhile stays, to
		// show why.
		var r Run
		if r, err = s.GetRun(ctx, o); err == nil && r.Phase == phase.InProgress {
			err = s.DeleteRun(ctx, o)
		}
	} else {
		_, err = s.UpdateRun(ctx, o, func(r *Run) error {
			if r.Phase != phase.InProgress {
				return errNoChange // Recover failed it meanwhile: leave it so
			}
			reason := textlimit.Fit("main run failed: "+cause.Error(), MaxTextBytes)
			r.FailureReason = reason
			return r.SetPhase(phase.Failed, reason, now)
		})
	}
	switch {
	case err == nil, errors.Is(err, errNoChange), errors.Is(err, ErrNotFound):
		return cause
	}
	return errors.Join(cause, fmt.Errorf("clean up the run %s after its main run failed: %w", o, err))
}

// started reports whether a run in p has ended its main run.
func started(p phase.Phase) bool {
	switch p {
	case phase.New, phase.Queued, phase.ReadyToStart, phase.InProgress:
		return false
	}
	return true
}

// errNoChange aborts an UpdateRun that has nothing to write.
var errNoChange = errors.New("no change")

// mainOperations returns ops with their owner, phase and Created time filled in.
func mainOperations(o Owner, ops []Operation, now time.Time) []Operation {
	out := make([]Operation, len(ops))
	for i, op := range ops {
		op = op.Clone()
		if op.Owner == (Owner{}) {
			op.Owner = o
		}
		if op.Status.Phase == "" {
			op.Status.Phase = OperationNew
		}
		if op.Status.Created.IsZero() {
			op.Status.Created = now
		}
		out[i] = op
	}
	return out
}

// endMainRun counts res into r and moves it by phase.AfterMainRun, pending operations
// still to monitor.
func endMainRun(r *Run, res MainRun, pending int, now time.Time) error {
	r.Errors += res.Errors
	r.Warnings += res.Warnings
	cancelled := r.CancelRequested()
	next := phase.AfterMainRun(r.Owner.Kind, phase.Outcome{Fatal: res.Fatal, Errors: res.Errors, Pending: pending, Cancelled: cancelled}, r.Profile)
	reason := res.Reason
	if reason == "" {
		reason = fmt.Sprintf("main run ended: %d operations started", pending)
	}
	if next == phase.Failed {
		failure := reason
		if cancelled && !res.Fatal {
			failure = r.Cancel.Reason
			reason = "main run ended after a cancel request: " + r.Cancel.Reason
		}
		r.FailureReason = textlimit.Fit(failure, MaxTextBytes)
	}
	return r.SetPhase(next, reason, now)
}

// RequestCancel asks that the run of o be cancelled, for reason (who asked and why), at
// time at: it stores [Run.RequestCancel]'s change through UpdateRun and returns the run
// as stored. The Monitor then cancels the run's unfinished operations and moves it to
// Failed; a controller whose main run is still going learns it from
// [Run.CancelRequested]. It fails as UpdateRun does, and with an error wrapping
// [ErrRunEnded] for a run already in a terminal phase. A second request keeps the first.
//
// RequestCancel needs only the store, as in a tool that runs apart from the Monitor (the
// cancel command of cmd/itemops). A program that runs a Monitor calls the Monitor's
// method of the same name instead, which calls this one with the Monitor's clock and
// wakes the Monitor's Run, so that the operations are cancelled at once.
func RequestCancel(ctx context.Context, s Store, o Owner, reason string, at time.Time) (Run, error) {
	return s.UpdateRun(ctx, o, func(r *Run) error { return r.RequestCancel(reason, at) })
}

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
// restarts after a crash, sees the run with all those operations or sees neither.
// Stores built on storage/kv (memstore, boltstore, etcdstore) have it; [StartRun] finds
// it by a type assertion, and falls back to [Store.CreateRun], [Store.PutOperations] and
// [Store.UpdateRun] without it.
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
// while main runs (possible where the store is not a [RunStarter], so that the run is
// stored before main) counts as phase.Outcome.Cancelled: with nothing pending the run
// ends Failed with the request's reason; with operations pending it waits, and the
// Monitor cancels them before it fails the run.
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
// operations/monitor) calls the Monitor's SubmitRun instead, which calls this one on the
// Monitor's store, stamps a template without a Created time with the Monitor's clock (so
// that an operation's age is never counted across two clocks) and wakes the Monitor, so
// that the new operations are polled at once.
//
// StartRun is idempotent, so a reconcile can call it every time:
//
//   - When the run has already passed InProgress, StartRun returns it as stored and does
//     not call main.
//   - When the store is a [RunStarter], main runs before anything is written, and the run
//     and its operations are written in one atomic write: a failure or crash before it
//     leaves nothing, and the next call runs main again.
//   - Otherwise the run is created InProgress before main runs, and the operations and
//     the phase are written after it. A failure in between leaves the run InProgress, and
//     the next call runs main again and writes its operations (inserting or replacing by
//     ID). After a process restart, Monitor.Recover (package operations/monitor) fails
//     such a run instead, as Velero fails a backup it finds InProgress.
//
// Since main may run more than once for one run, the operation IDs it returns should be
// derived from the run and the item (as Velero's data movers do), or its plugins should
// tolerate a second Execute.
//
// StartRun fails with main's error (the run is then left as described above), with the
// store's errors (an owner UID that differs from the stored run's gives one wrapping
// [ErrUIDMismatch]), with an error wrapping [ErrInvalid] for a bad template or batch, or
// with ctx.Err(). It is safe for concurrent use as far as its store is; two calls for
// one owner at once may both run main, and only one records its operations.
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
	case err == nil:
		if started(stored.Phase) {
			return stored, nil
		}
		return resumeRun(ctx, s, stored, now, main)
	case !errors.Is(err, ErrNotFound):
		return Run{}, err
	}
	starter, ok := s.(RunStarter)
	if !ok {
		err := s.CreateRun(ctx, r)
		if err != nil && !errors.Is(err, ErrExists) {
			return Run{}, err
		}
		// On ErrExists another call created it first: go on with what is stored.
		return resumeRun(ctx, s, r, now, main)
	}
	res, err := main(ctx)
	if err != nil {
		return Run{}, err
	}
	ops := mainOperations(r.Owner, res.Operations, now)
	if err := endMainRun(&r, res, len(ops), now); err != nil {
		return Run{}, err
	}
	switch err := starter.CreateRunWithOperations(ctx, r, ops); {
	case errors.Is(err, ErrExists):
		return s.GetRun(ctx, r.Owner) // another call started it first
	case err != nil:
		return Run{}, err
	}
	return r, nil
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

// resumeRun does the main run of a run stored before it started or while it was
// InProgress: main, its operations, then the phase.
func resumeRun(ctx context.Context, s Store, stored Run, now time.Time, main func(context.Context) (MainRun, error)) (Run, error) {
	o := stored.Owner
	if stored.Phase != phase.InProgress {
		r, err := s.UpdateRun(ctx, o, func(r *Run) error { return r.SetPhase(phase.InProgress, "main run started", now) })
		if err != nil {
			return Run{}, err
		}
		if started(r.Phase) {
			return r, nil
		}
	}
	res, err := main(ctx)
	if err != nil {
		return Run{}, err
	}
	ops := mainOperations(o, res.Operations, now)
	if err := s.PutOperations(ctx, o, ops); err != nil {
		return Run{}, err
	}
	r, err := s.UpdateRun(ctx, o, func(r *Run) error {
		if r.Phase != phase.InProgress {
			return errNoChange // another call ended it, or Recover failed it
		}
		return endMainRun(r, res, len(ops), now)
	})
	if errors.Is(err, errNoChange) {
		return s.GetRun(ctx, o)
	}
	return r, err
}

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
// CancelRun instead, which calls this one with the Monitor's clock and wakes the
// Monitor, so that the operations are cancelled at once.
func RequestCancel(ctx context.Context, s Store, o Owner, reason string, at time.Time) (Run, error) {
	return s.UpdateRun(ctx, o, func(r *Run) error { return r.RequestCancel(reason, at) })
}

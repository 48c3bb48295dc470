package controllerruntime

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/phase"
)

// Finalizer is the finalizer [Monitor.HandleDeletion] keeps on an object while the object
// may have a run, so that the object is not gone before the run's operations are
// cancelled.
const Finalizer = "itemops.io/cancel-operations"

// StartRun starts the run of template.Owner as [monitor.Monitor.StartRun] does: on the
// Monitor's store, stamped with the Monitor's clock, waking the Monitor's Run so that
// the run's operations are polled at once rather than up to an interval later, and, on
// a store with claims, failing a run whose starter died. It is idempotent, so a
// reconcile calls it every time, and main runs once for a run even when the reconciles
// of several replicas start it at once (see [operations.StartRun], "Main runs once").
//
// The owner must have a UID ([OwnerOf] gives the object's): StartRun fails with an error
// wrapping [operations.ErrInvalid] without one, since the UID is what tells the run of a
// deleted object from the run of a new object of the same name. When the store holds
// such a stale run under the owner's name (its object was deleted without
// [Monitor.HandleDeletion], for instance before the operator kept the finalizer),
// StartRun cancels the stale run's unfinished operations through their plugins (see
// [Monitor.HandleDeletion]), deletes it, and then starts the new run.
//
// It fails as [operations.StartRun] does, with an error wrapping
// [operations.ErrUIDMismatch] when the stale run's operations could not all be cancelled
// yet (another Monitor holds its claim, [ErrClaimed]; a later reconcile tries again), and
// with ctx.Err(). Like HandleDeletion, it waits for a pass of the Monitor's own Run that
// holds the stale run's claim.
func (m *Monitor) StartRun(ctx context.Context, template operations.Run, main func(context.Context) (operations.MainRun, error)) (operations.Run, error) {
	o := template.Owner
	if o.UID == "" {
		return operations.Run{}, fmt.Errorf("start run %s: owner has no UID: %w", o, operations.ErrInvalid)
	}
	r, err := m.Monitor.StartRun(ctx, template, main)
	if !errors.Is(err, operations.ErrUIDMismatch) {
		return r, err
	}
	stale := operations.Owner{Kind: o.Kind, Name: o.Name} // names the run whatever its UID
	if err := m.endRun(ctx, stale, "its object was deleted: a new object of the same name (UID "+o.UID+") replaces it"); err != nil {
		return operations.Run{}, fmt.Errorf("start run %s: cancel the stale run of its name: %w", o, err)
	}
	return m.Monitor.StartRun(ctx, template, main)
}

// HandleDeletion keeps the run of obj, of kind k (the Kind its runs are started with,
// [Kind.Run]), from outliving it. Call it at the start of every reconcile, after reading
// obj:
//
//   - For an object not being deleted, it adds [Finalizer] to obj (an Update through c)
//     if obj lacks it, and returns false.
//   - For an object being deleted that holds the finalizer, it requests that obj's run
//     be cancelled, has the Monitor cancel every unfinished operation through its plugin
//     at once (each Cancel call bounded by the Monitor's call timeout,
//     monitor.WithCallTimeout; a plugin that fails or does not answer fails its
//     operation all the same), deletes the run, removes the finalizer (an Update through
//     c; an object already gone, read before an earlier reconcile removed the
//     finalizer, is no error), and returns true: the reconcile is over. An object being deleted without the
//     finalizer is left alone, and HandleDeletion returns true.
//
// The plugins get obj, still readable while its finalizer holds it. A run that never
// left its main run (InProgress: its main run under way in another replica, or cut
// short by a crash) has no operation the Monitor watches: it is deleted with whatever
// operations it recorded, uncancelled. HandleDeletion fails
// with an error wrapping [operations.ErrInvalid] for an obj without a UID, with c's
// errors, the store's errors, an error wrapping [ErrClaimed] when another Monitor holds
// the run's claim (that Monitor cancels the operations, and a later reconcile finishes),
// and ctx.Err(); the finalizer then stays, and the next reconcile tries again. A claim
// held by a pass of this Monitor's own Run is no error: HandleDeletion waits for the pass
// to end (a few passes at most), or for ctx. It is safe for concurrent use, for distinct
// objects.
func (m *Monitor) HandleDeletion(ctx context.Context, c client.Client, obj client.Object, k Kind) (deleted bool, err error) {
	o := k.Owner(obj)
	if o.UID == "" {
		return false, fmt.Errorf("handle deletion of %s: object has no UID: %w", o, operations.ErrInvalid)
	}
	if obj.GetDeletionTimestamp().IsZero() {
		if controllerutil.AddFinalizer(obj, Finalizer) {
			if err := c.Update(ctx, obj); err != nil {
				return false, fmt.Errorf("add finalizer to %s: %w", o, err)
			}
		}
		return false, nil
	}
	if !controllerutil.ContainsFinalizer(obj, Finalizer) {
		return true, nil
	}
	if err := m.endRun(ctx, o, "its object was deleted"); err != nil {
		return true, fmt.Errorf("handle deletion of %s: %w", o, err)
	}
	controllerutil.RemoveFinalizer(obj, Finalizer)
	// Not found: an earlier reconcile removed the finalizer and the object is gone, and
	// obj was read, from a cache, before it went.
	if err := c.Update(ctx, obj); err != nil && !apierrors.IsNotFound(err) {
		return true, fmt.Errorf("remove finalizer from %s: %w", o, err)
	}
	return true, nil
}

// ErrClaimed is the error (wrapped) of [Monitor.HandleDeletion] and [Monitor.StartRun]
// when the run to cancel is claimed by another Monitor (see [operations.RunClaimer]):
// its claim stayed held while the passes of this Monitor's own Run ended, or this
// Monitor's Run is not under way.
var ErrClaimed = errors.New("run claimed by another Monitor")

// ownPassRounds is how many tries endRun makes, each after a pass of the Monitor's own
// Run has ended, while the claim of the run to cancel is held: the pass that held it
// at the first try ends before the second, and a pass that the cancel request woke and
// that claimed the run again before the second try ends before the third.
const ownPassRounds = 3

// endRun cancels the run of o, if there is one and it has not ended, waits for its
// operations to be cancelled, and deletes it. o may have no UID (any run of its name).
// When a pass of the Monitor's own Run holds the run's claim, endRun waits for the pass
// to end and tries again (see ownPassRounds); it fails with an error wrapping
// ErrClaimed only for a claim that another Monitor holds.
func (m *Monitor) endRun(ctx context.Context, o operations.Owner, reason string) error {
	run, err := m.store.GetRun(ctx, o)
	switch {
	case errors.Is(err, operations.ErrNotFound):
		return nil
	case err != nil:
		return err
	}
	o = run.Owner // with the stored UID, so that a run created since is never deleted
	if !phase.IsTerminal(run.Phase) {
		_, err := m.RequestCancel(ctx, o, reason)
		if err != nil && !errors.Is(err, operations.ErrRunEnded) {
			return err
		}
		for round := 1; ; round++ {
			// Taken before the step, so that a pass that ends during it counts.
			passEnd, running := m.nextPassEnd()
			switch {
			case phase.IsWaiting(run.Phase):
				if _, err := m.Poll(ctx, o); err != nil {
					return err
				}
			case phase.IsFinalizing(run.Phase):
				if _, err := m.Finalize(ctx, o); err != nil {
					return err
				}
			}
			if run, err = m.store.GetRun(ctx, o); err != nil {
				return err
			}
			// A run still before or in its main run has no operation monitored yet.
			if !phase.IsWaiting(run.Phase) && !phase.IsFinalizing(run.Phase) {
				break
			}
			// Still waiting or finalizing: the claim is held, by a pass of this
			// Monitor's Run (it polls the run now, and gives the claim back, or cancels
			// the operations itself, when its poll ends) or by another Monitor. Wait
			// for this Monitor's passes to end, and try again; a claim that outlasts
			// ownPassRounds of them, or that is held while Run is not under way, is
			// another Monitor's.
			if !running || round >= ownPassRounds {
				return fmt.Errorf("cancel run %s: still %s: %w", o, run.Phase, ErrClaimed)
			}
			select {
			case <-passEnd:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}
	err = m.store.DeleteRun(ctx, o)
	if errors.Is(err, operations.ErrNotFound) {
		return nil
	}
	return err
}

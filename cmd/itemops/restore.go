package main

import (
	"context"
	"fmt"
	"os"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/itemops/itemops/adapters"
	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/phase"
	"github.com/itemops/itemops/progress"
	"github.com/itemops/itemops/restoreorder"
)

// existing reports whether the demo's pretend cluster already has the item, so that a
// restore skips it: the storage class, which every cluster of the demo has.
func existing(it restoreorder.Item) bool {
	return it.Resource == grStorageClass.String() && it.Name == "standard"
}

// restore runs the main run of restore o from backup: it creates the run (unless a crash
// left it in New) and validates it (a backup that is not restorable, or whose tarball
// cannot be read, fails validation). Pass one collects the tarball's items in Velero's
// priority order with package restoreorder; pass two restores them in that order,
// counted with a progress.Counter (an item that already exists is skipped and lowers the
// total), calling every restore item action that applies, and records the operations the
// plugins start, in one batch per resource. Then the run moves to the phase
// phase.AfterMainRun gives, and the Monitor takes it from there.
func (h *host) restore(ctx context.Context, o operations.Owner, backup operations.Run) error {
	if err := h.newRun(ctx, o); err != nil {
		return err
	}
	h.ui.watch(ctx, o)
	fail := func(reason string) error {
		return h.setPhase(ctx, o, phase.FailedValidation, reason, func(r *operations.Run) { r.FailureReason = reason })
	}
	if !phase.Restorable(backup.Phase) {
		return fail(fmt.Sprintf("backup %s is %s, not restorable", backup.Owner.Name, backup.Phase))
	}
	f, err := os.Open(h.bucket.tarball(backup.Owner.Name))
	if err != nil {
		return fail(fmt.Sprintf("backup %s: %v", backup.Owner.Name, err))
	}
	src, err := restoreorder.FromTarGz(f)
	f.Close()
	if err != nil {
		return fail(fmt.Sprintf("backup %s: %v", backup.Owner.Name, err))
	}
	if err := h.setPhase(ctx, o, phase.InProgress, "restore of "+backup.Owner.Name+" started", nil); err != nil {
		return err
	}

	// Pass one.
	var counter progress.Counter
	reporter := progress.NewReporter(&counter, h.report(o), progress.WithInterval(h.reportInterval()))
	defer reporter.Close()
	c, err := restoreorder.Collect(ctx, src, restoreorder.DefaultPriorities(), restoreorder.Filter{})
	if err != nil {
		return fmt.Errorf("restore %s: collect: %w", o.Name, err)
	}
	counter.Collected(c.Total())
	if _, err := h.store.UpdateRun(ctx, o, func(r *operations.Run) error { r.ItemsTotal = c.Total(); return nil }); err != nil {
		return err
	}
	h.ui.printf("%s: pass one collected %s from %s in priority order (%s first)", o.Name, plural(c.Total(), "item"), backup.Owner.Name, firstResources(c))

	// Pass two.
	counter.SetPass(progress.PassProcessing)
	obj := &restoreObject{Name: o.Name}
	pace := newPacer(h.cfg.itemRate())
	var (
		ops      []operations.Operation
		total    int
		skipped  int
		failures []string
		last     string
	)
	flush := func() error {
		if len(ops) == 0 {
			return nil
		}
		if err := h.store.PutOperations(ctx, o, ops); err != nil {
			return err
		}
		total += len(ops)
		ops = nil
		return nil
	}
	i := 0
	for it := range c.Items() {
		if err := pace.wait(ctx, i); err != nil {
			return err
		}
		i++
		if it.Resource != last {
			if err := flush(); err != nil {
				return err
			}
			last = it.Resource
		}
		if existing(it) {
			counter.Skipped()
			skipped++
			continue
		}
		data, err := restoreorder.ReadItem(ctx, src, it.Path)
		if err != nil {
			return fmt.Errorf("restore %s: %w", o.Name, err)
		}
		var item unstructured.Unstructured
		if err := item.UnmarshalJSON(data); err != nil {
			failures = append(failures, fmt.Sprintf("%s %s: %v", it.Resource, it.Name, err))
			counter.Skipped()
			continue
		}
		gr := schema.ParseGroupResource(it.Resource)
		actions, err := h.reg.RestoreItemActionsFor(ctx, gr, &item)
		if err != nil {
			return err
		}
		skip := false
		for _, a := range actions {
			out, err := a.Execute(ctx, adapters.RestoreItemActionInput[*restoreObject]{Item: &item, ItemFromBackup: item.DeepCopy(), Restore: obj})
			if err != nil {
				failures = append(failures, fmt.Sprintf("%s on %s %s: %v", a.Name(), it.Resource, it.Name, err))
				continue
			}
			if out.OperationID != "" {
				ops = append(ops, operations.Operation{
					Owner: o, Action: a.Name(), ID: out.OperationID,
					Resource: operations.ResourceIdentifier{Group: gr.Group, Resource: gr.Resource, Namespace: it.TargetNamespace, Name: it.Name},
					Status:   operations.Status{Phase: operations.OperationNew, Created: h.clock.Now()},
				})
			}
			if out.SkipRestore {
				skip = true
				break
			}
		}
		if skip {
			counter.Skipped()
			skipped++
			continue
		}
		counter.Done()
	}
	if err := flush(); err != nil {
		return fmt.Errorf("restore %s: %w", o.Name, err)
	}
	counter.SetPass(progress.PassDone)
	if err := reporter.Close(); err != nil {
		return fmt.Errorf("restore %s: %w", o.Name, err)
	}
	for _, f := range failures {
		h.ui.printf("%s: %s", o.Name, f)
	}
	snap := counter.Snapshot()
	next := phase.AfterMainRun(phase.Restore, phase.Outcome{Errors: len(failures), Pending: total})
	reason := fmt.Sprintf("main run ended: %d of %d items restored, %d skipped, %d operations started",
		snap.ItemsRestored(), c.Total(), skipped, total)
	return h.setPhase(ctx, o, next, reason, func(r *operations.Run) { r.Errors += len(failures) })
}

// firstResources names the first few resources of a collection.
func firstResources(c *restoreorder.Collection) string {
	res := c.Resources()
	s := ""
	for i, rc := range res {
		if i == 3 {
			return s + ", …"
		}
		if i > 0 {
			s += ", "
		}
		s += rc.Resource
	}
	return s
}

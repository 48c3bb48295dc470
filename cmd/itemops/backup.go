package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/itemops/itemops/adapters"
	"github.com/itemops/itemops/clock"
	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/operations/monitor"
	"github.com/itemops/itemops/phase"
	"github.com/itemops/itemops/progress"
)

// A host is the demo's controller: it runs the main run of backups and restores through
// the plugins of its registry, records runs and operations in its store, and writes the
// backups to its bucket. The Monitor does the rest.
type host struct {
	store  operations.Store
	reg    *adapters.Registry[*backupObject, *restoreObject]
	bucket bucket
	clock  clock.Clock
	mon    *monitor.Monitor // requests cancels, and wakes itself for them
	cfg    demoConfig
	ui     *display
}

// newRun records a new run of o in phase New, or returns the stored run when o already
// has one (a run left in New by a crash).
func (h *host) newRun(ctx context.Context, o operations.Owner) error {
	now := h.clock.Now()
	r := operations.Run{Owner: o, Phase: phase.New, Created: now, Updated: now, OperationTimeout: h.cfg.operationTimeout()}
	err := h.store.CreateRun(ctx, r)
	if errors.Is(err, operations.ErrExists) {
		return nil
	}
	return err
}

// setPhase moves the run of o to p, recording reason.
func (h *host) setPhase(ctx context.Context, o operations.Owner, p phase.Phase, reason string, change func(r *operations.Run)) error {
	now := h.clock.Now()
	_, err := h.store.UpdateRun(ctx, o, func(r *operations.Run) error {
		if change != nil {
			change(r)
		}
		return r.SetPhase(p, reason, now)
	})
	return err
}

// report returns a progress sink that records a counter's figures in the run of o.
func (h *host) report(o operations.Owner) progress.Sink {
	return func(ctx context.Context, s progress.Snapshot) error {
		_, err := h.store.UpdateRun(ctx, o, func(r *operations.Run) error {
			r.ItemsTotal, r.ItemsDone = s.TotalItems(), s.ItemsRestored()
			return nil
		})
		return err
	}
}

// reportInterval is how often a main run's item counts are written to its run.
func (h *host) reportInterval() time.Duration {
	return scaled(200*time.Millisecond, h.cfg.speed)
}

// backup runs the main run of backup o: it creates the run (unless a crash left it in
// New), backs up the synthetic application's items into a tarball in the bucket, calling
// every backup item action that applies to each, records the operations the plugins
// start, in one batch per namespace, and moves the run to the phase phase.AfterMainRun
// gives. The Monitor takes it from there.
func (h *host) backup(ctx context.Context, o operations.Owner) error {
	if err := h.newRun(ctx, o); err != nil {
		return err
	}
	h.ui.watch(ctx, o)
	items := syntheticApp(h.cfg.items, h.cfg.claims)
	if err := h.setPhase(ctx, o, phase.InProgress, "backup started", func(r *operations.Run) { r.ItemsTotal = len(items) }); err != nil {
		return err
	}
	var counter progress.Counter
	counter.Collected(len(items))
	counter.SetPass(progress.PassProcessing)
	reporter := progress.NewReporter(&counter, h.report(o), progress.WithInterval(h.reportInterval()))
	defer reporter.Close()

	obj := &backupObject{Name: o.Name}
	pace := newPacer(h.cfg.itemRate())
	var (
		started  = h.clock.Now()
		ops      []operations.Operation // started since the last batch
		total    int
		failures []string
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
	err := writeAtomic(h.bucket.tarball(o.Name), func(w io.Writer) error {
		tw := newTarWriter(w, started)
		if err := tw.add("metadata/version", []byte("1.1.0\n")); err != nil {
			return err
		}
		for i, it := range items {
			if err := pace.wait(ctx, i); err != nil {
				return err
			}
			if i > 0 && it.obj.GetNamespace() != items[i-1].obj.GetNamespace() {
				if err := flush(); err != nil {
					return err
				}
			}
			actions, err := h.reg.BackupItemActionsFor(ctx, it.gr, it.obj)
			if err != nil {
				return err
			}
			item := it.obj
			for _, a := range actions {
				updated, _, id, post, err := a.Execute(ctx, item, obj)
				if err != nil {
					failures = append(failures, fmt.Sprintf("%s on %s: %v", a.Name(), it.key(), err))
					continue
				}
				if u, ok := updated.(*unstructured.Unstructured); ok && u != nil {
					item = u
				}
				if id != "" {
					ops = append(ops, operations.Operation{
						Owner: o, Action: a.Name(), ID: id, PostOperationItems: post,
						Resource: operations.ResourceIdentifier{Group: it.gr.Group, Resource: it.gr.Resource, Namespace: it.obj.GetNamespace(), Name: it.obj.GetName()},
						Status:   operations.Status{Phase: operations.OperationNew, Created: h.clock.Now()},
					})
				}
			}
			data, err := json.Marshal(item.Object)
			if err != nil {
				return err
			}
			for _, p := range it.tarPaths() {
				if err := tw.add(p, data); err != nil {
					return err
				}
			}
			counter.Done()
		}
		if err := flush(); err != nil {
			return err
		}
		return tw.close()
	})
	counter.SetPass(progress.PassDone)
	if rerr := reporter.Close(); err == nil {
		err = rerr
	}
	if err != nil {
		return fmt.Errorf("backup %s: %w", o.Name, err)
	}
	for _, f := range failures {
		h.ui.printf("%s: %s", o.Name, f)
	}
	next := phase.AfterMainRun(phase.Backup, phase.Outcome{Errors: len(failures), Pending: total})
	reason := fmt.Sprintf("main run ended: %d items backed up, %d operations started", len(items), total)
	return h.setPhase(ctx, o, next, reason, func(r *operations.Run) { r.Errors += len(failures) })
}

// finalize is the Monitor's finalizer: for a backup, it backs up again the items the
// plugins named as post-operation items (the volume claims, which the uploads annotate),
// rewriting them in the backup's tarball. It is idempotent, as a finalizer must be.
func (h *host) finalize(ctx context.Context, r operations.Run, items []operations.ResourceIdentifier) error {
	if r.Owner.Kind != phase.Backup || len(items) == 0 {
		return ctx.Err()
	}
	var paths []string
	for _, it := range items {
		res := it.Resource
		if it.Group != "" {
			res += "." + it.Group
		}
		scope := path.Join("cluster", it.Name+".json")
		if it.Namespace != "" {
			scope = path.Join("namespaces", it.Namespace, it.Name+".json")
		}
		paths = append(paths, path.Join("resources", res, scope), path.Join("resources", res, "v1-preferredversion", scope))
	}
	return rewriteTarball(h.bucket.tarball(r.Owner.Name), func(name string, data []byte) ([]byte, error) {
		if !slices.Contains(paths, name) {
			return data, nil
		}
		var u unstructured.Unstructured
		if err := u.UnmarshalJSON(data); err != nil {
			return nil, fmt.Errorf("finalize %s: %w", name, err)
		}
		ann := u.GetAnnotations()
		if ann == nil {
			ann = map[string]string{}
		}
		ann["demo.itemops.io/data-uploaded"] = "true"
		u.SetAnnotations(ann)
		return json.Marshal(u.Object)
	})
}

// A pacer spaces a main run's items at a steady rate, so that the demo can be watched.
type pacer struct {
	start time.Time
	every time.Duration
}

func newPacer(perSecond float64) *pacer {
	return &pacer{start: time.Now(), every: time.Duration(float64(time.Second) / perSecond)}
}

// wait returns once item i is due, or with ctx.Err() when ctx ends first.
func (p *pacer) wait(ctx context.Context, i int) error {
	d := time.Until(p.start.Add(time.Duration(i) * p.every))
	if d < time.Millisecond {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// scaled divides d by speed, keeping it between a millisecond and d itself when speed
// is at least one.
func scaled(d time.Duration, speed float64) time.Duration {
	return max(time.Duration(float64(d)/speed), time.Millisecond)
}

// plural returns "1 item" or "n items".
func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, strings.TrimSuffix(word, "s"))
}

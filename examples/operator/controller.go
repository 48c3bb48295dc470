package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/itemops/itemops/adapters"
	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/phase"
)

// Plugins is the operator's plugin registry. It takes AppBackups; the operator has no
// restores, so its restore type is empty.
type Plugins = adapters.Registry[*AppBackup, struct{}]

// NewPlugins returns a registry whose trackers fetch an operation's AppBackup with c.
func NewPlugins(c client.Reader) *Plugins {
	return adapters.NewRegistry[*AppBackup, struct{}](func(ctx context.Context, o operations.Owner) (*AppBackup, error) {
		key, err := objectKey(o)
		if err != nil {
			return nil, err
		}
		var b AppBackup
		return &b, c.Get(ctx, key, &b)
	}, nil)
}

// ownerOf names the itemops run of b: "<namespace>.<name>", unambiguous since namespaces
// hold no dots.
func ownerOf(b *AppBackup) operations.Owner {
	return operations.Owner{Kind: phase.Backup, Name: b.Namespace + "." + b.Name, UID: string(b.UID)}
}

// objectKey is the AppBackup of the run of o.
func objectKey(o operations.Owner) (types.NamespacedName, error) {
	ns, name, ok := strings.Cut(o.Name, ".")
	if !ok {
		return types.NamespacedName{}, fmt.Errorf("run %s is not an AppBackup's", o)
	}
	return types.NamespacedName{Namespace: ns, Name: name}, nil
}

// BackupReconciler reconciles AppBackups. The first reconcile of an AppBackup runs its
// main run: it records an itemops run, calls the plugins that apply to each volume
// claim, records the operations they start in one batch, and moves the run to the phase
// phase.AfterMainRun gives. The Monitor, running beside the controller (see
// MonitorRunnable), polls those operations and moves the run on. Every reconcile copies
// the run's phase and counts into the AppBackup's status, and asks to be requeued while
// the run is unfinished.
type BackupReconciler struct {
	Client  client.Client
	Store   operations.Store
	Plugins *Plugins
	// RequeueAfter is how soon an unfinished AppBackup is reconciled again.
	RequeueAfter time.Duration
}

var persistentVolumeClaims = schema.GroupResource{Resource: "persistentvolumeclaims"}

// Reconcile brings the status of the AppBackup req names up to date with its run,
// starting the run first if it has none.
func (r *BackupReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var b AppBackup
	if err := r.Client.Get(ctx, req.NamespacedName, &b); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	o := ownerOf(&b)
	run, err := r.Store.GetRun(ctx, o)
	if errors.Is(err, operations.ErrNotFound) {
		if err := r.mainRun(ctx, &b, o); err != nil {
			return ctrl.Result{}, err
		}
		run, err = r.Store.GetRun(ctx, o)
	}
	if err != nil {
		return ctrl.Result{}, err
	}
	ops, err := r.Store.ListOperations(ctx, o, operations.OperationFilter{})
	if err != nil {
		return ctrl.Result{}, err
	}
	status := AppBackupStatus{Phase: string(run.Phase), Operations: len(ops), FailureReason: run.FailureReason}
	for _, op := range ops {
		switch op.Status.Phase {
		case operations.OperationCompleted:
			status.OperationsCompleted++
		case operations.OperationFailed:
			status.OperationsFailed++
		}
	}
	if status != b.Status {
		b.Status = status
		if err := r.Client.Status().Update(ctx, &b); err != nil {
			return ctrl.Result{}, err
		}
	}
	if phase.IsTerminal(run.Phase) {
		return ctrl.Result{}, nil
	}
	return ctrl.Result{RequeueAfter: r.RequeueAfter}, nil
}

// mainRun records the run of b, calls the plugins on its volume claims, and records the
// operations they started. A crash part way leaves the run InProgress; Recover, which
// MonitorRunnable calls at start-up, then fails it, as Velero fails such backups.
func (r *BackupReconciler) mainRun(ctx context.Context, b *AppBackup, o operations.Owner) error {
	now := time.Now()
	run := operations.Run{Owner: o, Phase: phase.New, Created: now}
	if err := run.SetPhase(phase.InProgress, "reconciling", now); err != nil {
		return err
	}
	if err := r.Store.CreateRun(ctx, run); errors.Is(err, operations.ErrExists) {
		return nil // another reconcile got there first
	} else if err != nil {
		return err
	}
	var (
		ops    []operations.Operation
		failed int
	)
	for _, claim := range b.Spec.VolumeClaims {
		item := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "PersistentVolumeClaim"}}
		item.SetNamespace(b.Namespace)
		item.SetName(claim)
		actions, err := r.Plugins.BackupItemActionsFor(ctx, persistentVolumeClaims, item)
		if err != nil {
			return err
		}
		for _, a := range actions {
			_, _, id, post, err := a.Execute(ctx, item, b)
			if err != nil {
				failed++
				continue
			}
			if id != "" {
				ops = append(ops, operations.Operation{Owner: o, Action: a.Name(), ID: id, PostOperationItems: post,
					Resource: operations.ResourceIdentifier{Resource: "persistentvolumeclaims", Namespace: b.Namespace, Name: claim},
					Status:   operations.Status{Phase: operations.OperationNew, Created: time.Now()}})
			}
		}
	}
	if err := r.Store.PutOperations(ctx, o, ops); err != nil {
		return err
	}
	next := phase.AfterMainRun(phase.Backup, phase.Outcome{Errors: failed, Pending: len(ops)})
	_, err := r.Store.UpdateRun(ctx, o, func(run *operations.Run) error {
		run.Errors += failed
		return run.SetPhase(next, fmt.Sprintf("main run ended: %d operations started", len(ops)), time.Now())
	})
	return err
}

// MonitorRunnable returns a manager.Runnable that applies the restart rules once, then
// runs the Monitor until the manager stops. Like every runnable that does not say
// otherwise, it runs only on the elected leader, so one replica polls the plugins.
func MonitorRunnable(m *operations.Monitor) manager.Runnable {
	return manager.RunnableFunc(func(ctx context.Context) error {
		if _, err := m.Recover(ctx); err != nil {
			return err
		}
		if err := m.Run(ctx); !errors.Is(err, context.Canceled) {
			return err
		}
		return nil
	})
}

// SetupWithManager adds the Monitor and the controller to mgr.
func (r *BackupReconciler) SetupWithManager(mgr ctrl.Manager, m *operations.Monitor) error {
	if err := mgr.Add(MonitorRunnable(m)); err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).For(&AppBackup{}).Complete(r)
}

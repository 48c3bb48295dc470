package main

import (
	"context"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/itemops/itemops/adapters"
	"github.com/itemops/itemops/integrations/controllerruntime"
	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/operations/monitor"
	"github.com/itemops/itemops/phase"
)

// Plugins is the operator's plugin registry. It takes AppBackups; the operator has no
// restores, so its restore type is empty.
type Plugins = adapters.Registry[*AppBackup, struct{}]

// NewPlugins returns a registry whose trackers fetch an operation's AppBackup with c.
func NewPlugins(c client.Reader) *Plugins {
	return adapters.NewRegistry[*AppBackup, struct{}](controllerruntime.Lookup(c, func() *AppBackup { return new(AppBackup) }), nil)
}

// BackupReconciler reconciles AppBackups: it starts the run of a new AppBackup, copies
// the run into the status (emitting an Event for each phase change) whenever the Monitor
// changes it, and cancels the run's uploads when the AppBackup is deleted.
type BackupReconciler struct {
	Client  client.Client
	Store   operations.Store
	Plugins *Plugins
	Events  events.EventRecorder
	// Kind is the kind of the AppBackups' runs (see NewKind).
	Kind controllerruntime.Kind
	// MonitorOptions configure the Monitor that SetupWithManager builds (its interval,
	// for one); none by default.
	MonitorOptions []monitor.Option
	// Monitor polls the uploads; SetupWithManager sets it.
	Monitor *controllerruntime.Monitor
}

var persistentVolumeClaims = schema.GroupResource{Resource: "persistentvolumeclaims"}

// NewKind declares the kind of the AppBackups' runs: a kind of the operator's own, named
// after the resource, that goes through the phases of a backup. The runs, the reasons
// their statuses and Events give, the metrics and itemops inspect say AppBackup.
func NewKind() (controllerruntime.Kind, error) {
	return controllerruntime.DeclareKind("AppBackup", phase.Backup)
}

// Reconcile starts the run of the AppBackup req names, if it has none, and brings its
// status up to date with the run; for an AppBackup being deleted it cancels the run's
// uploads and lets the AppBackup go (see reconcile). A 409 Conflict on a write of the
// AppBackup ends it without an error: the AppBackup was read before a newer version of
// it (the manager's client reads from a cache), whose watch event brings another
// reconcile, which writes again. Returned, the conflict would be logged as the
// controller's error and retried with backoff.
func (r *BackupReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	res, err := r.reconcile(ctx, req)
	if apierrors.IsConflict(err) {
		return ctrl.Result{}, nil
	}
	return res, err
}

// reconcile does the work of Reconcile, and returns a conflict as any other error.
func (r *BackupReconciler) reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var b AppBackup
	if err := r.Client.Get(ctx, req.NamespacedName, &b); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if deleted, err := r.Monitor.HandleDeletion(ctx, r.Client, &b, r.Kind); deleted || err != nil {
		return ctrl.Result{}, err
	}
	main := func(ctx context.Context) (operations.MainRun, error) { return r.mainRun(ctx, &b) }
	if _, err := r.Monitor.StartRun(ctx, r.Kind.Run(&b), main); err != nil {
		return ctrl.Result{}, err
	}
	var read controllerruntime.RunStatus // the status as read, for the Events
	b.Status.RunStatus.DeepCopyInto(&read)
	run, changed, err := b.Status.SetFromStore(ctx, r.Store, r.Kind.Owner(&b), b.Generation)
	if err != nil {
		return ctrl.Result{}, err
	}
	blocked := r.Monitor.RunBlocked(r.Kind.Owner(&b))
	controllerruntime.RecordBlocked(r.Events, &b, read, blocked)
	if b.Status.SetBlocked(blocked, b.Generation, time.Now()) {
		changed = true
	}
	if !changed {
		return ctrl.Result{}, nil
	}
	controllerruntime.RecordPhaseChanges(r.Events, &b, read.Phase, run)
	return ctrl.Result{}, r.Client.Status().Update(ctx, &b)
}

// mainRun calls the plugins that apply to each volume claim of b and returns the
// operations they started.
func (r *BackupReconciler) mainRun(ctx context.Context, b *AppBackup) (operations.MainRun, error) {
	var res operations.MainRun
	for _, claim := range b.Spec.VolumeClaims {
		item := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "PersistentVolumeClaim"}}
		item.SetNamespace(b.Namespace)
		item.SetName(claim)
		actions, err := r.Plugins.BackupItemActionsFor(ctx, persistentVolumeClaims, item)
		if err != nil {
			return res, err
		}
		for _, a := range actions {
			_, _, id, post, err := a.Execute(ctx, item, b)
			switch {
			case err != nil:
				res.Errors++
			case id != "":
				res.Operations = append(res.Operations, operations.Operation{Action: a.Name(), ID: id, PostOperationItems: post,
					Resource: operations.ResourceIdentifier{Resource: "persistentvolumeclaims", Namespace: b.Namespace, Name: claim}})
			}
		}
	}
	return res, nil
}

// SetupWithManager adds the Monitor and the controller to mgr. The Monitor runs on the
// leader, applies the restart rules before the reconciler (gated) runs, and reconciles
// an AppBackup whenever it changes its run.
func (r *BackupReconciler) SetupWithManager(mgr ctrl.Manager) error {
	m, err := controllerruntime.New(mgr, r.Store, r.Plugins, controllerruntime.WithMonitorOptions(r.MonitorOptions...))
	if err != nil {
		return err
	}
	r.Monitor = m
	return ctrl.NewControllerManagedBy(mgr).For(&AppBackup{}).
		WatchesRawSource(m.Source(r.Kind)).
		Complete(controllerruntime.Gate(m, r))
}

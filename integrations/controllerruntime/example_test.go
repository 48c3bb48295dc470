package controllerruntime_test

import (
	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/itemops/itemops/integrations/controllerruntime"
	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/phase"
)

// The setup of the package comment: a kind declared once, the Monitor in the manager,
// and its source given the kind. It needs a manager on a cluster, so it is compiled, not
// run.
func ExampleNew() {
	var (
		mgr        ctrl.Manager         // the operator's manager
		store      operations.Store     // a boltstore, for instance
		plugins    operations.Resolver  // an adapters.Registry
		reconciler reconcile.Reconciler // the operator's, which starts runs of snapshots
	)
	snapshots, err := controllerruntime.DeclareKind("DatabaseSnapshot", phase.Backup)
	if err != nil {
		panic(err)
	}
	m, err := controllerruntime.New(mgr, store, plugins)
	if err != nil {
		panic(err)
	}
	err = ctrl.NewControllerManagedBy(mgr).For(&corev1.ConfigMap{}).
		WatchesRawSource(m.Source(snapshots)).
		Complete(controllerruntime.Gate(m, reconciler))
	if err != nil {
		panic(err)
	}
}

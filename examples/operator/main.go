// Command operator shows itemops embedded in a controller-runtime operator: a
// BackupReconciler for an AppBackup resource, whose plugin starts one upload per volume
// claim, and the operations Monitor that polls the uploads (see SetupWithManager for the
// manager's wiring, through package integrations/controllerruntime).
//
// To run without a cluster, main plays the manager against controller-runtime's fake
// client: it runs the Monitor and reconciles the AppBackup whenever the Monitor reports
// that its run changed, as the Monitor's source does in a manager.
package main

import (
	"context"
	"fmt"
	"io"
	"log"
	"os"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/itemops/itemops/clock"
	"github.com/itemops/itemops/operations/monitor"
	"github.com/itemops/itemops/phase"
	"github.com/itemops/itemops/storage/memstore"
)

func main() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := example(ctx, os.Stdout); err != nil {
		log.Fatal(err)
	}
}

// newReconciler returns a reconciler on a fake client holding objs, a memstore (a
// boltstore in a real operator: runs survive restarts), and an uploader timed by clock.
func newReconciler(clock clock.Clock, objs ...client.Object) (*BackupReconciler, error) {
	scheme := runtime.NewScheme()
	if err := AddToScheme(scheme); err != nil {
		return nil, err
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).WithStatusSubresource(&AppBackup{}).Build()
	plugins := NewPlugins(c)
	err := plugins.RegisterBackupItemAction(newUploader(300*time.Millisecond, clock))
	return &BackupReconciler{Client: c, Store: memstore.New(), Plugins: plugins, Events: events.NewFakeRecorder(100)}, err
}

func newBackup(uid types.UID) *AppBackup {
	b := &AppBackup{Spec: AppBackupSpec{VolumeClaims: []string{"data-0", "data-1", "data-2"}}}
	b.Namespace, b.Name, b.UID = "shop", "nightly", uid
	return b
}

// example reconciles one AppBackup to its end and writes each status it goes through to
// w.
func example(ctx context.Context, w io.Writer) error {
	r, err := newReconciler(clock.System{}, newBackup("7c1e2f4a-0000-4000-8000-000000000001"))
	if err != nil {
		return err
	}
	// The Monitor wakes the loop below when it changes the run; a change that finds the
	// loop busy is dropped, since the loop reads the whole state anyway.
	changes := make(chan struct{}, 1)
	wake := func(monitor.RunChange) {
		select {
		case changes <- struct{}{}:
		default:
		}
	}
	m := monitor.New(r.Store, r.Plugins, monitor.WithInterval(50*time.Millisecond), monitor.WithObserver(monitor.Observer{RunChanged: wake}))
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	monitorDone := make(chan error, 1)
	go func() { monitorDone <- m.Run(ctx) }()

	req := ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "shop", Name: "nightly"}}
	for {
		if _, err := r.Reconcile(ctx, req); err != nil {
			return err
		}
		var b AppBackup
		if err := r.Client.Get(ctx, req.NamespacedName, &b); err != nil {
			return err
		}
		fmt.Fprintf(w, "status: phase %s, %d of %d operations completed\n", b.Status.Phase, b.Status.OperationsCompleted, b.Status.Operations)
		if phase.IsTerminal(phase.Phase(b.Status.Phase)) {
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-changes:
		}
	}
	stop()
	<-monitorDone
	return nil
}

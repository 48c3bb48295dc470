// Command operator shows itemops embedded in a controller-runtime operator: a
// BackupReconciler for an AppBackup resource, whose plugin starts one upload per volume
// claim, and the operations Monitor running beside it as a manager runnable.
//
// To run without a cluster, main drives the reconciler itself against controller-runtime's
// fake client, reconciling again whenever the reconciler asks to be requeued, as a
// manager would; SetupWithManager is what a real operator calls instead.
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
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/storage/memstore"
)

func main() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := example(ctx, os.Stdout); err != nil {
		log.Fatal(err)
	}
}

// example reconciles one AppBackup to its end and writes each status it goes through to
// w.
func example(ctx context.Context, w io.Writer) error {
	scheme := runtime.NewScheme()
	if err := AddToScheme(scheme); err != nil {
		return err
	}
	backup := &AppBackup{Spec: AppBackupSpec{VolumeClaims: []string{"data-0", "data-1", "data-2"}}}
	backup.Namespace, backup.Name, backup.UID = "shop", "nightly", "7c1e2f4a-0000-4000-8000-000000000001"
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(backup).WithStatusSubresource(backup).Build()

	store := memstore.New() // boltstore.Open(path, nil) in a real operator: runs survive restarts
	plugins := NewPlugins(c)
	if err := plugins.RegisterBackupItemAction(newUploader(300 * time.Millisecond)); err != nil {
		return err
	}
	monitor := operations.NewMonitor(store, plugins, operations.WithInterval(50*time.Millisecond))
	r := &BackupReconciler{Client: c, Store: store, Plugins: plugins, RequeueAfter: 50 * time.Millisecond}

	ctx, stop := context.WithCancel(ctx)
	defer stop()
	monitorDone := make(chan error, 1)
	go func() { monitorDone <- MonitorRunnable(monitor).Start(ctx) }()

	req := ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "shop", Name: "nightly"}}
	var last AppBackupStatus
	for {
		res, err := r.Reconcile(ctx, req)
		if err != nil {
			return err
		}
		var b AppBackup
		if err := c.Get(ctx, req.NamespacedName, &b); err != nil {
			return err
		}
		if b.Status != last {
			last = b.Status
			fmt.Fprintf(w, "status: phase %s, %d of %d operations completed\n", b.Status.Phase, b.Status.OperationsCompleted, b.Status.Operations)
		}
		if res.RequeueAfter == 0 {
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(res.RequeueAfter):
		}
	}
	stop()
	return <-monitorDone
}

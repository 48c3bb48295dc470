package main

import (
	"context"
	_ "embed"
	"fmt"
	"io"
	"net/http"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/yaml"

	"github.com/itemops/itemops/adapters"
	"github.com/itemops/itemops/clock"
	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/operations/monitor"
	"github.com/itemops/itemops/phase"
	"github.com/itemops/itemops/webview"
)

// crdManifest is AppBackup's CustomResourceDefinition.
//
//go:embed config/crd/appbackups.yaml
var crdManifest []byte

// pollEvery is how often the example reads the cluster while it waits: for the CRD to
// be served, for a status to change, for an object to be gone. It is also the Monitor's
// interval there, so that the uploads are seen done soon after they are.
const pollEvery = 100 * time.Millisecond

// newScheme returns a scheme with Kubernetes' built-in types and AppBackup.
func newScheme() (*runtime.Scheme, error) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, err
	}
	return scheme, AddToScheme(scheme)
}

// installCRD creates AppBackup's CustomResourceDefinition with c, unless the cluster has
// it, and waits until the API server serves AppBackups. It fails with c's errors and,
// when the definition is not established before ctx ends, with ctx's.
func installCRD(ctx context.Context, c client.Client) error {
	crd := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(crdManifest, &crd.Object); err != nil {
		return fmt.Errorf("read AppBackup's CRD: %w", err)
	}
	if err := c.Create(ctx, crd); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create AppBackup's CRD: %w", err)
	}
	return wait.PollUntilContextCancel(ctx, pollEvery, true, func(ctx context.Context) (bool, error) {
		if err := c.Get(ctx, client.ObjectKeyFromObject(crd), crd); err != nil {
			return false, err
		}
		conditions, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
		for _, c := range conditions {
			if c, ok := c.(map[string]any); ok && c["type"] == "Established" && c["status"] == "True" {
				return true, nil
			}
		}
		return false, nil
	})
}

// newClusterOperator returns the operator in a new manager on the cluster of cfg, not
// started: the Monitor and the controller, as SetupWithManager adds them, over store,
// with action as the plugin and Events through the manager's recorder. opts
// are the manager's options, to which it adds the scheme and, unless set, turns off the
// metrics server; the metrics server, when on, also serves the web view (mountView). The CRD must be installed (see installCRD).
func newClusterOperator(cfg *rest.Config, opts manager.Options, store operations.Store, action adapters.BackupItemAction[*AppBackup]) (*BackupReconciler, manager.Manager, error) {
	scheme, err := newScheme()
	if err != nil {
		return nil, nil, err
	}
	opts.Scheme = scheme
	if opts.Metrics.BindAddress == "" {
		opts.Metrics = metricsserver.Options{BindAddress: "0"}
	}
	mgr, err := manager.New(cfg, opts)
	if err != nil {
		return nil, nil, err
	}
	plugins := NewPlugins(mgr.GetClient())
	if err := plugins.RegisterBackupItemAction(action); err != nil {
		return nil, nil, err
	}
	kind, err := NewKind()
	if err != nil {
		return nil, nil, err
	}
	r := &BackupReconciler{
		Client: mgr.GetClient(), Store: store, Plugins: plugins,
		Events: mgr.GetEventRecorder("appbackup"), Kind: kind,
		MonitorOptions: []monitor.Option{monitor.WithInterval(pollEvery)},
	}
	if err := mountView(mgr, store); err != nil {
		return nil, nil, err
	}
	return r, mgr, r.SetupWithManager(mgr)
}

// mountView serves the web view of store, read-only, at /ops/ of the metrics server of
// mgr. It fails when mgr has started.
func mountView(mgr manager.Manager, store operations.Store) error {
	view, err := webview.New(store)
	if err != nil {
		return err
	}
	return mgr.AddMetricsServerExtraHandler("/ops/", http.StripPrefix("/ops/", view))
}

// onCluster runs the operator on the cluster of cfg, in a manager of options opts (see
// newClusterOperator), with its runs in the store of f (see openStore): it installs
// AppBackup's CRD, starts the operator, creates an AppBackup in namespace shop (which it
// creates if missing), writes each status it goes through to w until its run ends,
// then deletes it, waits until the finalizer lets it go, and stops the operator. It
// fails with the cluster's errors and ctx's.
func onCluster(ctx context.Context, w io.Writer, cfg *rest.Config, opts manager.Options, f storeFlags) error {
	scheme, err := newScheme()
	if err != nil {
		return err
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return err
	}
	if err := installCRD(ctx, c); err != nil {
		return err
	}
	ns := &corev1.Namespace{}
	ns.Name = "shop"
	if err := c.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	store, err := openStore(ctx, cfg, c, f)
	if err != nil {
		return err
	}
	_, mgr, err := newClusterOperator(cfg, opts, store, newUploader(300*time.Millisecond, clock.System{}))
	if err != nil {
		return err
	}
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	managerDone := make(chan error, 1)
	go func() { managerDone <- mgr.Start(ctx) }()
	if err := clusterBackup(ctx, w, c); err != nil {
		stop()
		<-managerDone
		return err
	}
	stop()
	return <-managerDone
}

// clusterBackup creates an AppBackup with c, writes each status it goes through to w until
// its run ends, deletes it and waits until it is gone.
func clusterBackup(ctx context.Context, w io.Writer, c client.Client) error {
	b := &AppBackup{Spec: AppBackupSpec{VolumeClaims: []string{"data-0", "data-1", "data-2"}}}
	b.Namespace, b.GenerateName = "shop", "nightly-"
	if err := c.Create(ctx, b); err != nil {
		return err
	}
	fmt.Fprintf(w, "created AppBackup %s/%s\n", b.Namespace, b.Name)
	key := client.ObjectKeyFromObject(b)
	last := ""
	err := wait.PollUntilContextCancel(ctx, pollEvery, true, func(ctx context.Context) (bool, error) {
		if err := c.Get(ctx, key, b); err != nil {
			return false, err
		}
		line := fmt.Sprintf("status: phase %s, %d of %d operations completed", b.Status.Phase, b.Status.OperationsCompleted, b.Status.Operations)
		if b.Status.Phase != "" && line != last {
			fmt.Fprintln(w, line)
			last = line
		}
		return phase.IsTerminal(phase.Phase(b.Status.Phase)), nil
	})
	if err != nil {
		return err
	}
	if err := c.Delete(ctx, b); err != nil {
		return err
	}
	err = wait.PollUntilContextCancel(ctx, pollEvery, true, func(ctx context.Context) (bool, error) {
		err := c.Get(ctx, key, b)
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, err
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "deleted AppBackup %s/%s: its finalizer let it go once its run was deleted\n", key.Namespace, key.Name)
	return nil
}

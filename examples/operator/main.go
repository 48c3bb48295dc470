// Command operator shows itemops embedded in a controller-runtime operator: a
// BackupReconciler for an AppBackup resource, whose plugin starts one upload per volume
// claim, and the operations Monitor that polls the uploads (see SetupWithManager for the
// manager's wiring, through package integrations/controllerruntime).
//
// With -cluster, main runs the operator on the cluster that controller-runtime's standard
// lookup finds (the -kubeconfig flag, $KUBECONFIG, the in-cluster configuration,
// ~/.kube/config): it installs AppBackup's CRD (config/crd/appbackups.yaml), creates an
// AppBackup in namespace shop, shows its status until its run ends, deletes it, and
// stops. From the examples module:
//
//	go run ./operator -cluster -kubeconfig ~/.kube/config
//
// There the operator keeps its runs in memory, unless -store=kube keeps them in the API
// server itself, as objects of storage/kubestore in the namespace -store-namespace
// (itemops by default, created if missing); -install-store-crds installs the store's
// CRDs first. With -store-namespace=shop, the AppBackup's own namespace, each run's
// object is owned by its AppBackup (see appBackupOwner), so that the garbage collector
// deletes it with the AppBackup; in another namespace a run has no owner:
//
//	go run ./operator -cluster -store=kube -install-store-crds -store-namespace=shop -kubeconfig ~/.kube/config
//
// The manager serves the web view of the store (package webview, read-only) at /ops/ of
// its metrics server, whose address -metrics-bind-address sets (off by default):
//
//	go run ./operator -cluster -metrics-bind-address 127.0.0.1:8080   # then http://127.0.0.1:8080/ops/
//
// Without -cluster, main runs without one: it starts a manager whose client is
// controller-runtime's fake client, with the Monitor in it but no controller (a
// controller watches the API server), and reconciles the AppBackup whenever the Monitor
// reports that its run changed, as the Monitor's source does in a controller.
//
// With -trace (without -cluster), the Monitor is traced with OpenTelemetry, through one
// more Monitor option, integrations/otel's Options, and its spans are printed to stderr
// as OpenTelemetry's stdout exporter writes them (docs/tracing.md):
//
//	go run ./operator -trace 2>spans.json
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"time"

	"github.com/go-logr/logr"
	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/itemops/itemops/clock"
	"github.com/itemops/itemops/integrations/controllerruntime"
	itemotel "github.com/itemops/itemops/integrations/otel"
	"github.com/itemops/itemops/operations/monitor"
	"github.com/itemops/itemops/phase"
	"github.com/itemops/itemops/storage/memstore"
)

func main() {
	cluster := flag.Bool("cluster", false, "run on the cluster of -kubeconfig, $KUBECONFIG, the in-cluster configuration or ~/.kube/config, instead of a fake client")
	var store storeFlags
	flag.StringVar(&store.kind, "store", "memory", "with -cluster, where the operator keeps its runs: memory, or kube for objects of the API server in -store-namespace")
	flag.StringVar(&store.namespace, "store-namespace", "itemops", "with -store=kube, the namespace of the store's objects, created if missing")
	flag.BoolVar(&store.install, "install-store-crds", false, "with -store=kube, install the store's CRDs first, which needs an administrator's rights")
	metricsAddr := flag.String("metrics-bind-address", "0", "with -cluster, where the manager serves its metrics, and the web view of the runs at /ops/ (\"0\": not at all)")
	trace := flag.Bool("trace", false, "without -cluster, trace the Monitor with OpenTelemetry and print its spans to stderr")
	flag.Parse() // controller-runtime registers -kubeconfig
	if !*cluster && store.kind != "memory" {
		log.Fatalf("-store=%s needs -cluster", store.kind)
	}
	if *cluster && *trace {
		log.Fatal("-trace works without -cluster only")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var opts []monitor.Option
	if *trace {
		exporter, err := stdouttrace.New(stdouttrace.WithWriter(os.Stderr))
		if err != nil {
			log.Fatal(err)
		}
		provider := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exporter))
		defer func() {
			if err := provider.Shutdown(context.Background()); err != nil { // sends the spans left
				log.Print(err)
			}
		}()
		opts = itemotel.Options(itemotel.WithTracerProvider(provider)) // the one option
	}
	run := func(ctx context.Context, w io.Writer) error { return example(ctx, w, opts...) }
	if *cluster {
		run = func(ctx context.Context, w io.Writer) error {
			cfg, err := ctrl.GetConfig()
			if err != nil {
				return err
			}
			return onCluster(ctx, w, cfg, manager.Options{Logger: logr.Discard(), Metrics: metricsserver.Options{BindAddress: *metricsAddr}}, store)
		}
	}
	if err := run(ctx, os.Stdout); err != nil {
		log.Fatal(err)
	}
}

// newReconciler returns a reconciler on a fake client holding objs, a memstore (a
// boltstore in a real operator: runs survive restarts), an uploader timed by clock, and
// a Monitor on clock (opts added) in a manager with no cluster, which the caller may
// start. It returns the uploader too.
func newReconciler(clock clock.Clock, opts []monitor.Option, objs ...client.Object) (*BackupReconciler, manager.Manager, *uploader, error) {
	scheme := runtime.NewScheme()
	if err := AddToScheme(scheme); err != nil {
		return nil, nil, nil, err
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).WithStatusSubresource(&AppBackup{}).Build()
	mgr, err := manager.New(&rest.Config{Host: "http://127.0.0.1:1"}, manager.Options{
		Scheme: scheme, Metrics: metricsserver.Options{BindAddress: "0"}, Logger: logr.Discard(),
		NewClient: func(*rest.Config, client.Options) (client.Client, error) { return c, nil },
	})
	if err != nil {
		return nil, nil, nil, err
	}
	plugins := NewPlugins(c)
	up := newUploader(300*time.Millisecond, clock)
	if err := plugins.RegisterBackupItemAction(up); err != nil {
		return nil, nil, nil, err
	}
	kind, err := NewKind()
	if err != nil {
		return nil, nil, nil, err
	}
	r := &BackupReconciler{Client: c, Store: memstore.New(), Plugins: plugins, Events: events.NewFakeRecorder(100), Kind: kind}
	r.Monitor, err = controllerruntime.New(mgr, r.Store, r.Plugins, controllerruntime.WithMonitorOptions(append([]monitor.Option{monitor.WithClock(clock)}, opts...)...))
	return r, mgr, up, err
}

func newBackup(uid types.UID) *AppBackup {
	b := &AppBackup{Spec: AppBackupSpec{VolumeClaims: []string{"data-0", "data-1", "data-2"}}}
	b.Namespace, b.Name, b.UID = "shop", "nightly", uid
	return b
}

// example reconciles one AppBackup to its end and writes each status it goes through to
// w; opts are added to the Monitor's options.
func example(ctx context.Context, w io.Writer, opts ...monitor.Option) error {
	// The Monitor wakes the loop below when it changes the run; a change that finds the
	// loop busy is dropped, since the loop reads the whole state anyway.
	changes := make(chan struct{}, 1)
	wake := func(monitor.RunChange) {
		select {
		case changes <- struct{}{}:
		default:
		}
	}
	r, mgr, _, err := newReconciler(clock.System{}, append([]monitor.Option{monitor.WithObserver(monitor.Observer{RunChanged: wake})}, opts...),
		newBackup("7c1e2f4a-0000-4000-8000-000000000001"))
	if err != nil {
		return err
	}
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	managerDone := make(chan error, 1)
	go func() { managerDone <- mgr.Start(ctx) }()
	select { // as Gate does: reconcile once the Monitor has applied the restart rules
	case <-r.Monitor.Recovered():
	case err := <-managerDone:
		return err
	}

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
	return <-managerDone
}

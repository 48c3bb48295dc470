package main

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/itemops/itemops/integrations/controllerruntime"
	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/storage/kubestore"
	"github.com/itemops/itemops/storage/memstore"
)

// storeFlags say where the operator keeps its runs on a cluster: main's flags -store,
// -store-namespace and -install-store-crds.
type storeFlags struct {
	kind      string // "memory", or "kube" for objects of the API server (storage/kubestore)
	namespace string // with kind "kube", the namespace of the store's objects
	install   bool   // with kind "kube", install the store's CRDs first
}

// openStore returns the store that f names: a memstore, or a kubestore on the cluster
// of cfg in namespace f.namespace, which it creates with c when it is missing, after it
// installs the store's CRDs if f.install. It fails on a kind it does not know, and with
// the cluster's errors and ctx's.
func openStore(ctx context.Context, cfg *rest.Config, c client.Client, f storeFlags) (operations.Store, error) {
	switch f.kind {
	case "memory":
		return memstore.New(), nil
	case "kube":
	default:
		return nil, fmt.Errorf("-store=%s: want memory or kube", f.kind)
	}
	if f.install {
		if err := kubestore.InstallCRDs(ctx, cfg); err != nil {
			return nil, err
		}
	}
	ns := &corev1.Namespace{}
	ns.Name = f.namespace
	if err := c.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, err
	}
	// The store's client has no client-side limit (QPS -1), as controller-runtime's
	// GetConfig gives since it leaves the sharing of the API server to its priority and
	// fairness (v0.25 does; v0.19 limits to 20 requests a second): a Monitor's pass
	// writes each run that changed, and under such a limit a pass over 1,000 runs would
	// take 50 s. An operator that must keep a limit gives its Monitor
	// monitor.WithProgressWriteInterval instead (see kubestore's "Rate limits").
	cfg = rest.CopyConfig(cfg)
	cfg.QPS = -1
	return kubestore.Open(ctx, cfg, f.namespace, &kubestore.Options{
		OwnerReference: func(run operations.Owner) *metav1.OwnerReference { return appBackupOwner(run, f.namespace) },
	})
}

// appBackupOwner returns the ownerReference to its AppBackup that the run of o gets in a
// kubestore of namespace ns, so that the garbage collector deletes the run with the
// AppBackup, should the finalizer not: the reference of an AppBackup of namespace ns,
// and nil for one of another namespace, since the collector looks for an owner in its
// dependent's namespace alone and would delete the run at once.
func appBackupOwner(o operations.Owner, ns string) *metav1.OwnerReference {
	key := controllerruntime.ObjectKey(o)
	if o.Kind != "AppBackup" || key.Namespace != ns || o.UID == "" { // the kind of NewKind
		return nil
	}
	return &metav1.OwnerReference{APIVersion: GroupVersion.String(), Kind: "AppBackup", Name: key.Name, UID: types.UID(o.UID)}
}

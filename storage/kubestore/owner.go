package kubestore

import (
	"context"
	"fmt"
	"strings"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/storage/kv"
)

// An owners checks the ownerReferences that [Options.OwnerReference] gives the runs'
// objects. It is safe for concurrent use.
type owners struct {
	of   func(operations.Owner) *metav1.OwnerReference // Options.OwnerReference; nil for none
	disc rest.Interface                                // the API server's discovery
	meta metadata.Interface
	ns   string

	// kindsMu guards kinds, the resources of each group and version as discovery last
	// listed them; a kind missing from a list reads the list again, so that a kind
	// installed later is found.
	kindsMu sync.Mutex
	kinds   map[schema.GroupVersion][]metav1.APIResource
}

// refs returns the ownerReferences of the object of the run of p when the commit that
// makes run, which writes the run's record, creates it: none, or the one that o.of
// gives, once the owner it names is found where the garbage collector will look for it.
// The collector looks for a namespaced owner in its dependent's namespace, takes an
// owner it does not find there, or whose UID differs, as deleted, and deletes the
// dependent. So refs fails with an error wrapping operations.ErrInvalid, naming the
// owner, when the reference is incomplete, names a kind the API server does not serve,
// or names an object that is not in the store's namespace (or cluster-scoped) with that
// UID; with the API server's error, wrapped, when it refuses or does not answer; or
// with ctx.Err().
func (o *owners) refs(ctx context.Context, p kv.Partition, run kv.RunChange) ([]metav1.OwnerReference, error) {
	if o.of == nil || p == (kv.Partition{}) {
		return nil, nil
	}
	ref := o.of(operations.Owner{Kind: p.Kind, Name: p.Name, UID: run.UID})
	if ref == nil {
		return nil, nil
	}
	invalid := func(format string, args ...any) error {
		return fmt.Errorf("kubestore: owner %s %q (apiVersion %q, uid %q) of the run of %s %q: %s: %w",
			ref.Kind, ref.Name, ref.APIVersion, ref.UID, p.Kind, p.Name, fmt.Sprintf(format, args...), operations.ErrInvalid)
	}
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	switch {
	case err != nil:
		return nil, invalid("%v", err)
	case ref.APIVersion == "" || ref.Kind == "" || ref.Name == "" || ref.UID == "":
		return nil, invalid("an ownerReference needs an apiVersion, a kind, a name and a uid")
	}
	res, found, err := o.resource(ctx, gv, ref.Kind)
	switch {
	case err != nil:
		return nil, fmt.Errorf("kubestore: find the resource of the owner %s %q of the run of %s %q: %w", ref.Kind, ref.Name, p.Kind, p.Name, err)
	case !found:
		return nil, invalid("the API server serves no such kind")
	}
	resource := o.meta.Resource(gv.WithResource(res.Name))
	var client metadata.ResourceInterface = resource
	where := "the cluster"
	if res.Namespaced {
		client, where = resource.Namespace(o.ns), "namespace "+o.ns
	}
	got, err := client.Get(ctx, ref.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil, invalid("no such object in %s", where)
	case err != nil:
		return nil, fmt.Errorf("kubestore: get the owner %s %q of the run of %s %q: %w", ref.Kind, ref.Name, p.Kind, p.Name, err)
	case got.GetUID() != ref.UID:
		return nil, invalid("the object of that name in %s has uid %q", where, got.GetUID())
	}
	return []metav1.OwnerReference{*ref}, nil
}

// resource returns the resource of kind in gv, from the list that discovery gives of
// gv's resources. It reports false when the API server serves no such kind: gv is not
// served, or its list, read again, has no resource of that kind.
func (o *owners) resource(ctx context.Context, gv schema.GroupVersion, kind string) (metav1.APIResource, bool, error) {
	o.kindsMu.Lock()
	cached := o.kinds[gv]
	o.kindsMu.Unlock()
	if res, found := findKind(cached, kind); found {
		return res, true, nil
	}
	path := "/apis/" + gv.String()
	if gv.Group == "" {
		path = "/api/" + gv.Version
	}
	var l metav1.APIResourceList
	err := o.disc.Get().AbsPath(path).Do(ctx).Into(&l)
	switch {
	case apierrors.IsNotFound(err):
		return metav1.APIResource{}, false, nil
	case err != nil:
		return metav1.APIResource{}, false, err
	}
	o.kindsMu.Lock()
	o.kinds[gv] = l.APIResources
	o.kindsMu.Unlock()
	res, found := findKind(l.APIResources, kind)
	return res, found, nil
}

// findKind returns the resource of kind among l, leaving out subresources.
func findKind(l []metav1.APIResource, kind string) (metav1.APIResource, bool) {
	for _, r := range l {
		if r.Kind == kind && !strings.Contains(r.Name, "/") {
			return r, true
		}
	}
	return metav1.APIResource{}, false
}

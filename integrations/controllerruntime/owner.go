package controllerruntime

import (
	"context"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/phase"
)

// OwnerOf returns the owner of obj's run: kind, the name "namespace/name" ("name" for a
// cluster-scoped object, which has no namespace) and obj's UID. Kubernetes names hold no
// "/", so [ObjectKey] gives the object back.
func OwnerOf(kind phase.Kind, obj client.Object) operations.Owner {
	name := obj.GetName()
	if ns := obj.GetNamespace(); ns != "" {
		name = ns + "/" + name
	}
	return operations.Owner{Kind: kind, Name: name, UID: string(obj.GetUID())}
}

// ObjectKey returns the namespace and name of the object whose run is o's: the inverse of
// [OwnerOf]. A name without "/" is a cluster-scoped object's.
func ObjectKey(o operations.Owner) types.NamespacedName {
	if ns, name, ok := strings.Cut(o.Name, "/"); ok {
		return types.NamespacedName{Namespace: ns, Name: name}
	}
	return types.NamespacedName{Name: o.Name}
}

// Lookup returns a function that fetches the object of a run with c, for
// adapters.NewRegistry, which hands it to the plugins. newObject returns an empty object
// to read into. When the run's object is gone (not found, or found with another UID than
// the run's owner: deleted and created again), the function returns a stand-in instead:
// an empty object with the namespace, name and UID of the run's owner, so that the
// plugins can still cancel the operations of a deleted object's run (see
// [Monitor.StartRun]). It fails with c's other errors.
func Lookup[T client.Object](c client.Reader, newObject func() T) func(context.Context, operations.Owner) (T, error) {
	return func(ctx context.Context, o operations.Owner) (T, error) {
		obj := newObject()
		err := c.Get(ctx, ObjectKey(o), obj)
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			var zero T
			return zero, err
		case o.UID == "" || string(obj.GetUID()) == o.UID:
			return obj, nil
		}
		stand := newObject()
		key := ObjectKey(o)
		stand.SetNamespace(key.Namespace)
		stand.SetName(key.Name)
		stand.SetUID(types.UID(o.UID))
		return stand, nil
	}
}

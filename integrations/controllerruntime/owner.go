package controllerruntime

import (
	"context"
	"fmt"
	"strings"

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
// to read into. The function fails with c's error, or with one wrapping
// [operations.ErrUIDMismatch] when the object found has another UID than the run's
// owner (it was deleted and created again).
func Lookup[T client.Object](c client.Reader, newObject func() T) func(context.Context, operations.Owner) (T, error) {
	return func(ctx context.Context, o operations.Owner) (T, error) {
		obj := newObject()
		if err := c.Get(ctx, ObjectKey(o), obj); err != nil {
			var zero T
			return zero, err
		}
		if o.UID != "" && string(obj.GetUID()) != o.UID {
			var zero T
			return zero, fmt.Errorf("object %s has UID %s, run %s has %s: %w", ObjectKey(o), obj.GetUID(), o, o.UID, operations.ErrUIDMismatch)
		}
		return obj, nil
	}
}

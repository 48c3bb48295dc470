package controllerruntime

import (
	"context"
	"fmt"
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

// A Kind is what an operator's runs are: the kind that names them and the profile of the
// phase machine they follow. An operator declares it once, in its reconciler's
// configuration, and builds every owner and run template from it, so that no run of the
// kind is ever started without its profile:
//
//	snapshots, err := controllerruntime.DeclareKind("DatabaseSnapshot", phase.Backup)
//	...
//	run, err := m.StartRun(ctx, snapshots.Run(&obj), mainRun)
//
// Its zero value names no kind. For Velero's kinds, Kind{Name: phase.Backup} (or
// phase.Restore, with the profile of their options) does; their runs show as before.
type Kind struct {
	// Name is the kind of the runs' owners: phase.Backup, phase.Restore, or a kind of
	// the operator's own, which runs, their events and reasons, the metrics (label
	// "kind") and itemops inspect show.
	Name phase.Kind
	// Profile is the runs' profile: for a kind of one's own, the one phase.Declare
	// returns, which names the machine the kind follows.
	Profile phase.Profile
}

// DeclareKind returns the Kind name that follows the phase machine of base (phase.Backup
// or phase.Restore) with the variants opts select, as [phase.Declare] does: a run of
// the kind goes through the phases of base under its own name. It fails with an error
// wrapping phase.ErrUnknownKind when name is not 1 to 63 ASCII letters and digits
// starting with a letter, when base is neither Backup nor Restore, or when name is
// Backup or Restore and base the other; and with an error wrapping
// phase.ErrUnknownPhase when the phases of a [phase.WithPhases] among opts are not a
// machine's (see there).
func DeclareKind(name, base phase.Kind, opts ...phase.Option) (Kind, error) {
	p, err := phase.Declare(name, base, opts...)
	if err != nil {
		return Kind{}, fmt.Errorf("controllerruntime: declare kind: %w", err)
	}
	return Kind{Name: name, Profile: p}, nil
}

// Owner returns the owner of obj's run, of kind k.Name (see [OwnerOf]).
func (k Kind) Owner(obj client.Object) operations.Owner { return OwnerOf(k.Name, obj) }

// Run returns the template of obj's run for [Monitor.StartRun]: the owner of
// [Kind.Owner] and the profile k.Profile. Set the template's other fields (its
// operation timeout, its item counts) before starting it.
func (k Kind) Run(obj client.Object) operations.Run {
	return operations.Run{Owner: k.Owner(obj), Profile: k.Profile}
}

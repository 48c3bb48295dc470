package kubestore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/itemops/itemops/storage/kv"
)

// A store's identity is a random name that its runs' marker, the ItemopsRun named
// "itemops", holds in status.store.identity, and that every run's object names in the
// same field, which its sum covers. The format marker of a store made with identities
// is labelled itemops.io/store with it, and was created after the runs' marker, so
// that a format marker naming an identity whose runs' marker is gone tells of runs
// deleted (their CRD deleted and installed again), not of a store that never had them.
// The identity survives a backup and restore of the namespace's objects; UIDs do not.

// newIdentity returns a new random identity: 32 hex digits.
func newIdentity() string {
	var b [16]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// runsMarker returns the identity that the runs' marker holds, after it creates the
// marker, with a new identity, when there is none. A read-only store creates none: it
// fails with an error wrapping ErrReadOnly when there is none.
func (b *backend) runsMarker(ctx context.Context) (string, error) {
	client := b.dyn.Resource(runsResource).Namespace(b.ns)
	if b.readOnly {
		got, err := b.getObject(ctx, client, runsResource, formatName)
		switch {
		case err != nil:
			return "", err
		case got == nil:
			return "", readOnlyError(fmt.Sprintf("write the runs' marker (ItemopsRun %q) that a store made before stores had identities lacks (open it once without ReadOnly)", formatName), b.ns)
		}
		return b.storeIdentity(got)
	}
	obj := newObject(runsResource, b.ns, formatName, kv.Partition{})
	obj.SetLabels(map[string]string{labelRole: roleStore})
	if err := unstructured.SetNestedMap(obj.Object, map[string]any{"seq": int64(1), "identity": newIdentity()}, "status", "store"); err != nil {
		return "", err
	}
	got, err := client.Create(ctx, obj, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		got, err = client.Get(ctx, formatName, metav1.GetOptions{})
	}
	if err != nil {
		return "", fmt.Errorf("kubestore: create %s %s/%s: %w", runsResource.Resource, b.ns, formatName, err)
	}
	return b.storeIdentity(got)
}

// storeIdentity returns the identity that obj, the runs' marker, holds. It fails with
// an error wrapping operations.ErrCorrupt when obj is not in the shape runsMarker gives
// it.
func (b *backend) storeIdentity(obj *unstructured.Unstructured) (string, error) {
	id, _, err := unstructured.NestedString(obj.Object, "status", "store", "identity")
	kind, _, _ := unstructured.NestedString(obj.Object, "spec", "owner", "kind")
	if err != nil || id == "" || kind != "" || obj.GetLabels()[labelRole] != roleStore {
		return "", corrupt(runsResource.Resource, b.ns, formatName, "is not the runs' marker of a store")
	}
	return id, nil
}

// openIdentity sets b's identity and the UID of its format marker, which the engine
// has opened. A format marker that names an identity needs the runs' marker of that
// identity; one that names none, which the Role cannot change (it grants no update of
// ItemopsChunks), is that of a store made before stores had identities, which takes
// the identity of the runs' marker, made now if there is none. It fails with an error
// wrapping operations.ErrCorrupt when a marker is gone or they disagree.
func (b *backend) openIdentity(ctx context.Context) error {
	marker, err := b.getObject(ctx, b.dyn.Resource(chunksResource).Namespace(b.ns), chunksResource, formatName)
	switch {
	case err != nil:
		return err
	case marker == nil:
		return corrupt(chunksResource.Resource, b.ns, formatName, "the store's format marker is gone")
	}
	id, labelled := marker.GetLabels()[labelStore]
	if !labelled {
		if id, err = b.runsMarker(ctx); err != nil {
			return err
		}
	} else {
		runs, err := b.getObject(ctx, b.dyn.Resource(runsResource).Namespace(b.ns), runsResource, formatName)
		switch {
		case err != nil:
			return err
		case runs == nil:
			return corrupt(runsResource.Resource, b.ns, formatName, "the runs' marker of store %q, which the format marker names, is gone: the store's runs were deleted (their CRD deleted and installed again?)", id)
		}
		got, err := b.storeIdentity(runs)
		if err != nil {
			return err
		}
		if got != id {
			return corrupt(runsResource.Resource, b.ns, formatName, "names store %q, and the format marker %q", got, id)
		}
	}
	fm, err := decodeObject(chunksResource, kv.Partition{}, marker, "")
	if err != nil {
		return err
	}
	b.identity, b.markerUID, b.formatKeys = id, marker.GetUID(), fm.keys
	return nil
}

// checkMarker fails with an error wrapping operations.ErrCorrupt when the format
// marker is gone or is not the one Open found (deleted and made again): one GET.
func (b *backend) checkMarker(ctx context.Context) error {
	if b.identity == "" {
		return nil // within Open
	}
	_, err := b.readMarker(ctx)
	return err
}

// readMarker returns the format marker, read by one GET. It fails with an error
// wrapping operations.ErrCorrupt when the marker is gone or is not the one Open found
// (deleted and made again).
func (b *backend) readMarker(ctx context.Context) (*unstructured.Unstructured, error) {
	m, err := b.getObject(ctx, b.dyn.Resource(chunksResource).Namespace(b.ns), chunksResource, formatName)
	switch {
	case err != nil:
		return nil, err
	case m == nil:
		return nil, corrupt(chunksResource.Resource, b.ns, formatName, "the store's format marker is gone")
	case m.GetUID() != b.markerUID:
		return nil, corrupt(chunksResource.Resource, b.ns, formatName, "the store's format marker was replaced since the Store opened")
	}
	return m, nil
}

// checkRunsMarker reads the runs' marker and checks it as checkRunsMarkerObject does.
func (b *backend) checkRunsMarker(ctx context.Context) error {
	if b.identity == "" {
		return nil
	}
	m, err := b.getObject(ctx, b.dyn.Resource(runsResource).Namespace(b.ns), runsResource, formatName)
	if err != nil {
		return err
	}
	return b.checkRunsMarkerObject(m)
}

// checkRunsMarkerObject fails with an error wrapping operations.ErrCorrupt when m, the
// runs' marker as read (nil: absent), is gone or holds another identity than b's.
func (b *backend) checkRunsMarkerObject(m *unstructured.Unstructured) error {
	if b.identity == "" {
		return nil
	}
	if m == nil {
		return corrupt(runsResource.Resource, b.ns, formatName, "the runs' marker of the store is gone: the store's runs were deleted (their CRD deleted and installed again?)")
	}
	id, err := b.storeIdentity(m)
	if err == nil && id != b.identity {
		err = corrupt(runsResource.Resource, b.ns, formatName, "names store %q, not %q, which this Store opened", id, b.identity)
	}
	return err
}

package kubestore

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/metadata"
)

// A Store opened with Options.ReadOnly refuses its writes in two places. The backend's
// entry points of writes (CommitPartition, CommitRead and the sweep) and the claims
// refuse before any request of theirs, so that a write fails the same way whatever the
// user's rights. Below them, every request of the backend on the store's objects goes through
// a client that refuses each verb that writes, so that a write path missed above
// fails too rather than write.

// readOnlyError returns the error of a write, called what, of a read-only Store of
// namespace ns: it wraps ErrReadOnly.
func readOnlyError(what, ns string) error {
	return fmt.Errorf("kubestore: %s in namespace %s: %w", what, ns, ErrReadOnly)
}

// readOnlyDynamic is a dynamic client whose writes fail with ErrReadOnly, unsent.
type readOnlyDynamic struct{ dynamic.Interface }

func (d readOnlyDynamic) Resource(res schema.GroupVersionResource) dynamic.NamespaceableResourceInterface {
	r := d.Interface.Resource(res)
	return readOnlyNamespaceable{readOnlyResource{r, res, ""}, r}
}

type readOnlyNamespaceable struct {
	readOnlyResource
	of dynamic.NamespaceableResourceInterface
}

func (n readOnlyNamespaceable) Namespace(ns string) dynamic.ResourceInterface {
	return readOnlyResource{n.of.Namespace(ns), n.res, ns}
}

// readOnlyResource is the client of one resource, in namespace ns, whose writes fail.
type readOnlyResource struct {
	dynamic.ResourceInterface
	res schema.GroupVersionResource
	ns  string
}

func (r readOnlyResource) refuse(verb, name string) error {
	return readOnlyError(fmt.Sprintf("%s %s %s", verb, r.res.Resource, name), r.ns)
}

func (r readOnlyResource) Create(_ context.Context, obj *unstructured.Unstructured, _ metav1.CreateOptions, _ ...string) (*unstructured.Unstructured, error) {
	return nil, r.refuse("create", obj.GetName())
}

func (r readOnlyResource) Update(_ context.Context, obj *unstructured.Unstructured, _ metav1.UpdateOptions, _ ...string) (*unstructured.Unstructured, error) {
	return nil, r.refuse("update", obj.GetName())
}

func (r readOnlyResource) UpdateStatus(_ context.Context, obj *unstructured.Unstructured, _ metav1.UpdateOptions) (*unstructured.Unstructured, error) {
	return nil, r.refuse("update the status of", obj.GetName())
}

func (r readOnlyResource) Delete(_ context.Context, name string, _ metav1.DeleteOptions, _ ...string) error {
	return r.refuse("delete", name)
}

func (r readOnlyResource) DeleteCollection(context.Context, metav1.DeleteOptions, metav1.ListOptions) error {
	return r.refuse("delete", "objects")
}

func (r readOnlyResource) Patch(_ context.Context, name string, _ types.PatchType, _ []byte, _ metav1.PatchOptions, _ ...string) (*unstructured.Unstructured, error) {
	return nil, r.refuse("patch", name)
}

func (r readOnlyResource) Apply(_ context.Context, name string, _ *unstructured.Unstructured, _ metav1.ApplyOptions, _ ...string) (*unstructured.Unstructured, error) {
	return nil, r.refuse("apply", name)
}

func (r readOnlyResource) ApplyStatus(_ context.Context, name string, _ *unstructured.Unstructured, _ metav1.ApplyOptions) (*unstructured.Unstructured, error) {
	return nil, r.refuse("apply the status of", name)
}

// readOnlyMetadata is a metadata client whose writes fail with ErrReadOnly, unsent.
type readOnlyMetadata struct{ metadata.Interface }

func (m readOnlyMetadata) Resource(res schema.GroupVersionResource) metadata.Getter {
	r := m.Interface.Resource(res)
	return readOnlyMetaGetter{readOnlyMetaResource{r, res, ""}, r}
}

type readOnlyMetaGetter struct {
	readOnlyMetaResource
	of metadata.Getter
}

func (g readOnlyMetaGetter) Namespace(ns string) metadata.ResourceInterface {
	return readOnlyMetaResource{g.of.Namespace(ns), g.res, ns}
}

// readOnlyMetaResource is the metadata client of one resource, in namespace ns, whose
// writes fail.
type readOnlyMetaResource struct {
	metadata.ResourceInterface
	res schema.GroupVersionResource
	ns  string
}

func (r readOnlyMetaResource) refuse(verb, name string) error {
	return readOnlyError(fmt.Sprintf("%s %s %s", verb, r.res.Resource, name), r.ns)
}

func (r readOnlyMetaResource) Delete(_ context.Context, name string, _ metav1.DeleteOptions, _ ...string) error {
	return r.refuse("delete", name)
}

func (r readOnlyMetaResource) DeleteCollection(context.Context, metav1.DeleteOptions, metav1.ListOptions) error {
	return r.refuse("delete", "objects")
}

func (r readOnlyMetaResource) Patch(_ context.Context, name string, _ types.PatchType, _ []byte, _ metav1.PatchOptions, _ ...string) (*metav1.PartialObjectMetadata, error) {
	return nil, r.refuse("patch", name)
}

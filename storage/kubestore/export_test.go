package kubestore

import (
	"context"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/itemops/itemops/storage/kv"
)

// SetPendingGrace sets how old a pending run's object must be before a sweep deletes
// it, and returns a function that sets it back.
func SetPendingGrace(d time.Duration) (restore func()) {
	old := pendingGrace
	pendingGrace = d
	return func() { pendingGrace = old }
}

// SetListPage sets how many objects one LIST request of a Store asks for, and returns a
// function that sets it back.
func SetListPage(n int64) (restore func()) {
	old := listPage
	listPage = n
	return func() { listPage = old }
}

// WriteBelowRefusals writes through the clients of s's backend, beneath the refusals of
// a read-only Store's writes, as a write path they missed would, and returns the error
// of each write: it creates a chunk named name, and, for both resources, deletes and
// patches the object called name through the dynamic client and the metadata client.
func (s *Store) WriteBelowRefusals(ctx context.Context, name string) []error {
	b := s.b
	chunk := newObject(chunksResource, b.ns, name, kv.Partition{})
	_, err := b.dyn.Resource(chunksResource).Namespace(b.ns).Create(ctx, chunk, metav1.CreateOptions{})
	errs := []error{err}
	for _, res := range []schema.GroupVersionResource{runsResource, chunksResource} {
		errs = append(errs,
			b.dyn.Resource(res).Namespace(b.ns).Delete(ctx, name, metav1.DeleteOptions{}),
			b.meta.Resource(res).Namespace(b.ns).Delete(ctx, name, metav1.DeleteOptions{}))
		_, err := b.dyn.Resource(res).Namespace(b.ns).Patch(ctx, name, types.MergePatchType, []byte(`{}`), metav1.PatchOptions{})
		errs = append(errs, err)
		_, err = b.meta.Resource(res).Namespace(b.ns).Patch(ctx, name, types.MergePatchType, []byte(`{}`), metav1.PatchOptions{})
		errs = append(errs, err)
	}
	return errs
}

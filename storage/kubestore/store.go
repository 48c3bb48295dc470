package kubestore

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/storage/kv"
)

// A Store is an [operations.Store] kept in the objects of one namespace of a Kubernetes
// API server (see the package documentation). It is safe for concurrent use, and
// several Stores, in this process or others, may use the same namespace at once. Get
// one from [Open]; it holds no resource that needs releasing.
//
// The methods of operations.Store are the engine's (package storage/kv), which
// documents them. Beside its errors, each fails with the API server's error, wrapped,
// when the server refuses or does not answer a request (a write may then have been
// made, whole, or not at all).
type Store struct {
	*kv.Store          // the engine
	b         *backend // the engine's backend, which Sweep sweeps
}

var _ operations.Store = (*Store)(nil)

// Open returns the store in namespace of the API server that cfg reaches. It copies cfg,
// and sets its QPS and Burst from o where cfg leaves them 0; a nil o means the
// defaults of [Options]. The resources of [InstallCRDs] must be installed.
//
// The first Open of a namespace writes the store's format marker, the ItemopsChunk
// named "itemops". Open fails with an error wrapping kv.ErrFormat when the namespace
// holds runs' objects but no marker, or a marker of another format; with the API
// server's error, wrapped, when it refuses or does not answer; or with ctx.Err(). Then
// nothing is written. Once open, the store sweeps the namespace, as [Store.Sweep] does;
// a sweep that fails does not fail Open, and leaves what it did not delete to the next,
// unless the API server forbids it (the Role of [RBAC] grants what it needs): then Open
// fails with that error, wrapped, after it may have written the marker.
func Open(ctx context.Context, cfg *rest.Config, namespace string, o *Options) (*Store, error) {
	if cfg == nil {
		return nil, errors.New("kubestore: open: nil rest.Config")
	}
	if errs := validation.IsDNS1123Label(namespace); len(errs) > 0 {
		return nil, fmt.Errorf("kubestore: open: namespace %q: %v", namespace, errs)
	}
	opts, err := o.withDefaults()
	if err != nil {
		return nil, fmt.Errorf("kubestore: open: %w", err)
	}
	cfg = rest.CopyConfig(cfg)
	if cfg.QPS == 0 {
		cfg.QPS = opts.QPS
	}
	if cfg.Burst == 0 {
		cfg.Burst = opts.Burst
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubestore: open: %w", err)
	}
	meta, err := metadata.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubestore: open: %w", err)
	}
	b := &backend{
		dyn: dyn, meta: meta, ns: namespace,
		maxObjectBytes: opts.MaxObjectBytes, inlineBytes: opts.InlineBytes, chunkBytes: opts.ChunkBytes,
		cache: newChunkCache(opts.ChunkCacheBytes),
	}
	s, err := kv.OpenPartitioned(ctx, b)
	if err != nil {
		return nil, fmt.Errorf("kubestore: open namespace %s: %w", namespace, err)
	}
	// The sweep is best effort: what it leaves, the next one deletes. A sweep that the
	// API server forbids would leave everything, always, so that fails Open.
	if _, err := b.sweep(ctx); apierrors.IsForbidden(err) {
		return nil, fmt.Errorf("kubestore: open namespace %s: sweep: %w", namespace, err)
	}
	return &Store{Store: s, b: b}, nil
}

package kubestore_test

import (
	"context"
	"net/http"
	"testing"

	"k8s.io/client-go/rest"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/storage/faulttest"
	"github.com/itemops/itemops/storage/kubestore"
)

// TestFaults runs the fault harness of package storage/faulttest on the API server:
// three replicas, each running as storeUser (granted the shipped Role) through a
// transport of its own that faults' RoundTripper wraps, share a namespace. The runs
// spill: InlineBytes of 1 KiB and ChunkBytes of 16 KiB put most runs' operations in
// chunks. See faulttest's documentation for the workload, the checks, and
// ITEMOPS_FAULT_SEED and ITEMOPS_FAULT_OPS, which replay a failure and set its length.
// It runs beside the conformance suites (t.Parallel), in a namespace of its own; it
// judges nothing by time.
func TestFaults(t *testing.T) {
	t.Parallel()
	cfg := config(t)
	ns := newNamespace(t, cfg)
	grant(t, cfg, ns, shippedRole(t))
	opts := &kubestore.Options{InlineBytes: 1 << 10, ChunkBytes: 16 << 10}
	open := func(c *rest.Config) (operations.Store, error) {
		s, err := kubestore.Open(context.Background(), c, ns, opts)
		if err != nil {
			return nil, err
		}
		t.Cleanup(func() { s.Close() })
		return s, nil
	}
	faulttest.Run(t, faulttest.Config{
		Open: func(i int, faults *faulttest.Faults) (operations.Store, error) {
			c := userConfig(t)
			c.Wrap(func(rt http.RoundTripper) http.RoundTripper { return faults.RoundTripper(rt) })
			return open(c)
		},
		Fresh: func() (operations.Store, error) { return open(userConfig(t)) },
	})
}

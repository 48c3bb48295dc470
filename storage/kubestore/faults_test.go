package kubestore_test

import (
	"context"
	"net/http"
	"testing"

	"k8s.io/client-go/rest"

	"github.com/itemops/itemops/integrations/controllerruntime/apiservertest"
	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/storage/faulttest"
	"github.com/itemops/itemops/storage/kubestore"
)

// disturbed is an API server of its own for the tests that disturb a whole server:
// TestFaults pauses its kube-apiserver and restarts its etcd, and TestCRDReinstalled
// deletes the runs' CRD and installs it again. TestCRDReinstalled runs in sequence, so
// it ends before TestFaults, a parallel test, begins.
var disturbed = apiservertest.New(apiservertest.Options{})

// TestFaults runs the fault harness of package storage/faulttest on the API server
// disturbed: three replicas, each running as storeUser (granted the shipped Role)
// through a transport of its own that faults' RoundTripper wraps, share a namespace,
// while the harness pauses kube-apiserver (SIGSTOP) and kills and restarts its etcd.
// The runs spill: InlineBytes of 1 KiB and ChunkBytes of 16 KiB put most runs'
// operations in chunks. See faulttest's documentation for the workload, the checks,
// and ITEMOPS_FAULT_SEED and ITEMOPS_FAULT_OPS, which replay a failure and set its
// length. It runs beside the conformance suites (t.Parallel), which use another server;
// it judges nothing by time.
func TestFaults(t *testing.T) {
	t.Parallel()
	admin := disturbed.Config(t)
	if err := kubestore.InstallCRDs(context.Background(), admin); err != nil {
		t.Fatalf("InstallCRDs: %v", err)
	}
	ns := newNamespace(t, admin)
	user := disturbed.UserConfig(t, storeUser)
	grantTo(t, admin, user, ns, shippedRole(t))
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
			c := rest.CopyConfig(user)
			c.Wrap(func(rt http.RoundTripper) http.RoundTripper { return faults.RoundTripper(rt) })
			return open(c)
		},
		Fresh:  func() (operations.Store, error) { return open(rest.CopyConfig(user)) },
		Server: serverOf{disturbed},
	})
}

// serverOf is faulttest's Server over an apiservertest.Server: a pause stops
// kube-apiserver, a restart kills and restarts its etcd.
type serverOf struct{ s *apiservertest.Server }

func (s serverOf) Pause() error   { return s.s.PauseAPIServer() }
func (s serverOf) Resume() error  { return s.s.ResumeAPIServer() }
func (s serverOf) Restart() error { return s.s.RestartEtcd() }

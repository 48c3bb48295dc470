package kubestore_test

import (
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/itemops/itemops/integrations/controllerruntime/apiservertest"
	"github.com/itemops/itemops/storage/kubestore"
)

// kube is the API server of this test binary. The tests install the store's CRDs with
// kubestore.InstallCRDs, once (installed), and each store gets a namespace of its own
// (newNamespace), so that it starts empty.
var kube = apiservertest.New(apiservertest.Options{})

func TestMain(m *testing.M) { os.Exit(kube.StopAfter(m).Run()) }

var (
	installOnce sync.Once
	installErr  error
	namespaces  atomic.Int64
)

// config returns the configuration of an administrator of the test's API server, on
// which the store's CRDs are installed.
func config(t testing.TB) *rest.Config {
	t.Helper()
	cfg := kube.Config(t)
	installOnce.Do(func() { installErr = kubestore.InstallCRDs(context.Background(), cfg) })
	if installErr != nil {
		t.Fatalf("InstallCRDs: %v", installErr)
	}
	return cfg
}

// newNamespace creates a namespace that no other test uses and returns its name.
func newNamespace(t testing.TB, cfg *rest.Config) string {
	t.Helper()
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatalf("kubernetes.NewForConfig: %v", err)
	}
	name := fmt.Sprintf("store-%d", namespaces.Add(1))
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if _, err := cs.CoreV1().Namespaces().Create(context.Background(), ns, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create namespace %s: %v", name, err)
	}
	return name
}

// newStore opens a store in a namespace of its own with options o.
func newStore(t testing.TB, o *kubestore.Options) *kubestore.Store {
	t.Helper()
	s, _, _ := newStoreIn(t, o)
	return s
}

// newStoreIn opens a store in a namespace of its own with options o, and returns it
// with the configuration of an administrator and the namespace.
func newStoreIn(t testing.TB, o *kubestore.Options) (*kubestore.Store, *rest.Config, string) {
	t.Helper()
	cfg := config(t)
	ns := newNamespace(t, cfg)
	s, err := kubestore.Open(context.Background(), cfg, ns, o)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s, cfg, ns
}

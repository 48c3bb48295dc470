package kubestore_test

import (
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"github.com/itemops/itemops/integrations/controllerruntime/apiservertest"
	"github.com/itemops/itemops/storage/kubestore"
)

// kube is the API server of this test binary. The tests install the store's CRDs with
// kubestore.InstallCRDs, once (installed), and each store gets a namespace of its own
// (newNamespace), so that it starts empty. The stores run as storeUser, bound in their
// namespace to exactly the Role of kubestore.RBAC (grant); only the installation, the
// namespaces, the bindings and the tests' own edits of objects use an administrator.
var kube = apiservertest.New(apiservertest.Options{})

func TestMain(m *testing.M) { os.Exit(kube.StopAfter(bare.StopAfter(disturbed.StopAfter(m))).Run()) }

var (
	installOnce sync.Once
	installErr  error
	namespaces  atomic.Int64
)

// storeUser is the user as whom the tests' stores run.
const storeUser = "itemops-store"

var (
	userMu  sync.Mutex
	userCfg *rest.Config // storeUser's configuration, made once by userConfig
)

// userConfig returns the configuration of storeUser, a user who may do only what the
// Roles bound to it allow (see grant).
func userConfig(t testing.TB) *rest.Config {
	t.Helper()
	userMu.Lock()
	defer userMu.Unlock()
	if userCfg == nil {
		userCfg = kube.UserConfig(t, storeUser)
	}
	return rest.CopyConfig(userCfg)
}

// shippedRole returns the Role of kubestore.RBAC, rbac/role.yaml.
func shippedRole(t testing.TB) *rbacv1.Role {
	t.Helper()
	data, err := kubestore.RBAC.ReadFile("rbac/role.yaml")
	if err != nil {
		t.Fatalf("read the Role: %v", err)
	}
	var role rbacv1.Role
	if err := yaml.Unmarshal(data, &role); err != nil {
		t.Fatalf("decode the Role: %v", err)
	}
	return &role
}

// grant creates role in namespace ns, binds it to storeUser, and waits until the API
// server authorizes storeUser by it, which it does a moment after the binding.
func grant(t testing.TB, admin *rest.Config, ns string, role *rbacv1.Role) {
	t.Helper()
	grantTo(t, admin, userConfig(t), ns, role)
}

// grantTo is grant on the server of admin, whose storeUser has the configuration user.
func grantTo(t testing.TB, admin, user *rest.Config, ns string, role *rbacv1.Role) {
	t.Helper()
	ctx := context.Background()
	cs, err := kubernetes.NewForConfig(admin)
	if err != nil {
		t.Fatalf("kubernetes.NewForConfig: %v", err)
	}
	role = role.DeepCopy()
	role.Namespace = ns
	if _, err := cs.RbacV1().Roles(ns).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create Role %s/%s: %v", ns, role.Name, err)
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: role.Name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: storeUser}},
	}
	if _, err := cs.RbacV1().RoleBindings(ns).Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create RoleBinding %s/%s: %v", ns, binding.Name, err)
	}
	userClient, err := kubernetes.NewForConfig(user)
	if err != nil {
		t.Fatalf("kubernetes.NewForConfig: %v", err)
	}
	rule := role.Rules[0]
	review := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
		ResourceAttributes: &authorizationv1.ResourceAttributes{
			Namespace: ns, Group: rule.APIGroups[0], Resource: rule.Resources[0], Verb: rule.Verbs[0],
		},
	}}
	err = wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		got, err := userClient.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, review, metav1.CreateOptions{})
		return err == nil && got.Status.Allowed, err
	})
	if err != nil {
		t.Fatalf("wait until %s may %s %s in %s: %v", storeUser, rule.Verbs[0], rule.Resources[0], ns, err)
	}
}

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

// newStoreIn opens a store as storeUser, granted the shipped Role, in a namespace of
// its own with options o, and returns it with the configuration of an administrator
// and the namespace.
func newStoreIn(t testing.TB, o *kubestore.Options) (*kubestore.Store, *rest.Config, string) {
	t.Helper()
	cfg := config(t)
	ns := newNamespace(t, cfg)
	grant(t, cfg, ns, shippedRole(t))
	s, err := kubestore.Open(context.Background(), userConfig(t), ns, o)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s, cfg, ns
}

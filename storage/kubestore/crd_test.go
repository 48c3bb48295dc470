package kubestore_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/itemops/itemops/integrations/controllerruntime/apiservertest"
	"github.com/itemops/itemops/storage/kubestore"
)

// bare is an API server of its own for TestInstallCRDs, which installs the CRDs on it,
// edits them into foreign ones, and leaves them so; kube's are never changed.
var bare = apiservertest.New(apiservertest.Options{})

var crdGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// writes records the requests other than reads that a client makes.
type writes struct {
	next http.RoundTripper
	mu   sync.Mutex
	seen []string // method and URL of each write, in order
}

func (w *writes) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method != http.MethodGet {
		w.mu.Lock()
		w.seen = append(w.seen, req.Method+" "+req.URL.String())
		w.mu.Unlock()
	}
	return w.next.RoundTrip(req)
}

// take returns the writes seen since the last take.
func (w *writes) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.seen
	w.seen = nil
	return out
}

// TestInstallCRDs installs the CRDs as a user bound to exactly the ClusterRole
// itemops-kubestore-install of kubestore.RBAC, then installs them again, which writes
// nothing (the only writes are dry runs), and then meets definitions of the same names
// edited into foreign ones: each time InstallCRDs fails with ErrForeignCRD naming the
// definition and what differs, and leaves it as it was.
func TestInstallCRDs(t *testing.T) {
	ctx := context.Background()
	admin := bare.Config(t)
	cs := kubernetes.NewForConfigOrDie(admin)
	data, err := kubestore.RBAC.ReadFile("rbac/install-clusterrole.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var role rbacv1.ClusterRole
	if err := yaml.Unmarshal(data, &role); err != nil {
		t.Fatalf("decode the ClusterRole: %v", err)
	}
	if _, err := cs.RbacV1().ClusterRoles().Create(ctx, &role, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create the ClusterRole: %v", err)
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: role.Name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: "installer"}},
	}
	if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create the ClusterRoleBinding: %v", err)
	}
	installer := bare.UserConfig(t, "installer")
	w := &writes{}
	installer.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { w.next = rt; return w }
	// The binding takes a moment to authorize; until then InstallCRDs fails, Forbidden.
	var installErr error
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		installErr = kubestore.InstallCRDs(ctx, installer)
		return !apierrors.IsForbidden(installErr), nil
	})
	if err = errors.Join(err, installErr); err != nil {
		t.Fatalf("InstallCRDs on a server without the CRDs: %v", err)
	}
	w.take()

	crds := dynamic.NewForConfigOrDie(admin).Resource(crdGVR)
	get := func(name string) *unstructured.Unstructured {
		t.Helper()
		crd, err := crds.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("get CRD %s: %v", name, err)
		}
		return crd
	}
	const runs, chunks = "itemopsruns.store.itemops.io", "itemopschunks.store.itemops.io"
	installed := map[string]*unstructured.Unstructured{runs: get(runs), chunks: get(chunks)}

	if err := kubestore.InstallCRDs(ctx, installer); err != nil {
		t.Fatalf("InstallCRDs a second time: %v", err)
	}
	for _, req := range w.take() {
		if !strings.HasPrefix(req, http.MethodPut+" ") || !strings.Contains(req, "dryRun=All") {
			t.Errorf("InstallCRDs a second time wrote %s; want only dry runs", req)
		}
	}
	for name, before := range installed {
		unchanged(t, "InstallCRDs a second time", before, get(name))
	}

	for _, tc := range []struct {
		name  string
		crd   string
		edit  func(spec map[string]any) // makes the module's spec into the foreign one
		field string                    // what the error names as different
		final bool                      // the edit cannot be undone
	}{
		{name: "a property's schema", crd: runs, field: "spec.versions", edit: func(spec map[string]any) {
			props := field(version(spec, 0), "schema", "openAPIV3Schema", "properties", "spec", "properties")
			field(props, "format")["maxLength"] = int64(65)
		}},
		{name: "a printer column dropped", crd: runs, field: "spec.versions", edit: func(spec map[string]any) {
			version(spec, 0)["additionalPrinterColumns"] = []any{}
		}},
		{name: "a served version the module does not have", crd: chunks, field: "spec.versions", edit: func(spec map[string]any) {
			extra := runtime.DeepCopyJSONValue(version(spec, 0)).(map[string]any)
			extra["name"], extra["storage"] = "v1alpha2", false
			spec["versions"] = append(spec["versions"].([]any), extra)
		}},
		{name: "a short name", crd: chunks, field: "spec.names", edit: func(spec map[string]any) {
			field(spec, "names")["shortNames"] = []any{"ioc"}
		}},
		{name: "another stored version", crd: runs, field: "the module's definition cannot replace it", final: true, edit: func(spec map[string]any) {
			extra := runtime.DeepCopyJSONValue(version(spec, 0)).(map[string]any)
			extra["name"] = "v1alpha2"
			version(spec, 0)["storage"] = false
			spec["versions"] = append(spec["versions"].([]any), extra)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cur := get(tc.crd)
			module := cur.Object["spec"]
			foreign := cur.DeepCopy()
			tc.edit(foreign.Object["spec"].(map[string]any))
			if _, err := crds.Update(ctx, foreign, metav1.UpdateOptions{}); err != nil {
				t.Fatalf("edit CRD %s: %v", tc.crd, err)
			}
			before := get(tc.crd)
			err := kubestore.InstallCRDs(ctx, installer)
			if !errors.Is(err, kubestore.ErrForeignCRD) || !strings.Contains(err.Error(), tc.crd) || !strings.Contains(err.Error(), tc.field) {
				t.Fatalf("InstallCRDs over a foreign %s: %v; want ErrForeignCRD naming it and %q", tc.crd, err, tc.field)
			}
			t.Log(err)
			unchanged(t, "InstallCRDs over a foreign definition", before, get(tc.crd))
			for _, req := range w.take() {
				if strings.Contains(req, tc.crd) && !strings.Contains(req, "dryRun=All") {
					t.Errorf("InstallCRDs over a foreign %s wrote %s", tc.crd, req)
				}
			}
			if tc.final {
				return
			}
			back := get(tc.crd)
			back.Object["spec"] = module
			if _, err := crds.Update(ctx, back, metav1.UpdateOptions{}); err != nil {
				t.Fatalf("restore CRD %s: %v", tc.crd, err)
			}
		})
	}
}

// unchanged fails the test when the spec or the generation of a CRD, before and after
// what did, differ. The rest of the object may change meanwhile: the API server updates
// a definition's status itself.
func unchanged(t *testing.T, what string, before, after *unstructured.Unstructured) {
	t.Helper()
	if diff := cmp.Diff(before.Object["spec"], after.Object["spec"]); diff != "" || before.GetGeneration() != after.GetGeneration() {
		t.Errorf("%s changed CRD %s: generation %d, then %d; spec (-before +after):\n%s", what, before.GetName(), before.GetGeneration(), after.GetGeneration(), diff)
	}
}

// version returns the i-th of the versions of the CRD spec spec.
func version(spec map[string]any, i int) map[string]any {
	return spec["versions"].([]any)[i].(map[string]any)
}

// field returns the map at path in m.
func field(m map[string]any, path ...string) map[string]any {
	for _, k := range path {
		m = m[k].(map[string]any)
	}
	return m
}

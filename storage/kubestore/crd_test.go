package kubestore_test

import (
	"context"
	"errors"
	"maps"
	"net/http"
	"slices"
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
	"k8s.io/client-go/util/retry"
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
// edited into foreign ones: every value of either spec changed alone, in each way the
// server accepts, and a few edits of whole parts (a version more, another stored
// version). Each time InstallCRDs fails with ErrForeignCRD, naming the definition and,
// for the named cases, what differs, and leaves the definition as it was.
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
	// setSpec sets the spec of the CRD called name, again when the API server, which
	// updates a definition's status itself, changed it meanwhile.
	setSpec := func(name string, spec any) (*unstructured.Unstructured, error) {
		var out *unstructured.Unstructured
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			crd := get(name)
			crd.Object["spec"] = spec
			var err error
			out, err = crds.Update(ctx, crd, metav1.UpdateOptions{})
			return err
		})
		return out, err
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

	// Every value of either spec, as the server keeps it, changed alone: each change that
	// the server accepts makes a foreign definition, which InstallCRDs refuses.
	for _, name := range []string{runs, chunks} {
		module := get(name).Object["spec"]
		var paths [][]any
		leaves(module, nil, &paths)
		accepted := 0
		for _, p := range paths {
			spec := runtime.DeepCopyJSONValue(module)
			change(t, spec, p)
			before, err := setSpec(name, spec)
			if apierrors.IsInvalid(err) {
				continue // no definition can have this spec
			}
			if err != nil {
				t.Fatalf("edit %v of CRD %s: %v", p, name, err)
			}
			accepted++
			if err := kubestore.InstallCRDs(ctx, installer); !errors.Is(err, kubestore.ErrForeignCRD) {
				t.Errorf("InstallCRDs over CRD %s with %v changed: %v, want ErrForeignCRD", name, p, err)
			}
			unchanged(t, "InstallCRDs over a foreign definition", before, get(name))
			if _, err := setSpec(name, module); err != nil {
				t.Fatalf("restore CRD %s: %v", name, err)
			}
		}
		t.Logf("CRD %s: %d values, %d of them changed into a definition the server accepts", name, len(paths), accepted)
		if accepted == 0 {
			t.Errorf("CRD %s: the server refused every changed value", name)
		}
	}
	for _, req := range w.take() {
		if !strings.Contains(req, "dryRun=All") {
			t.Errorf("InstallCRDs over foreign definitions wrote %s", req)
		}
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
			module := get(tc.crd).Object["spec"]
			foreign := runtime.DeepCopyJSONValue(module)
			tc.edit(foreign.(map[string]any))
			before, err := setSpec(tc.crd, foreign)
			if err != nil {
				t.Fatalf("edit CRD %s: %v", tc.crd, err)
			}
			err = kubestore.InstallCRDs(ctx, installer)
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
			if _, err := setSpec(tc.crd, module); err != nil {
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

// leaves appends to paths the path (map keys and slice indices) of every value in v that
// is neither a map nor a slice, below the path p of v.
func leaves(v any, p []any, paths *[][]any) {
	switch v := v.(type) {
	case map[string]any:
		for _, k := range slices.Sorted(maps.Keys(v)) {
			leaves(v[k], append(slices.Clip(p), k), paths)
		}
	case []any:
		for i, e := range v {
			leaves(e, append(slices.Clip(p), i), paths)
		}
	default:
		*paths = append(*paths, p)
	}
}

// change changes the value at path p in v: a string gains a letter, a number grows by
// one, a boolean flips. It fails the test on a value of another type.
func change(t *testing.T, v any, p []any) {
	t.Helper()
	parent, last := v, p[len(p)-1]
	for _, k := range p[:len(p)-1] {
		parent = at(parent, k)
	}
	var next any
	switch old := at(parent, last).(type) {
	case string:
		next = old + "x"
	case int64:
		next = old + 1
	case float64:
		next = old + 1
	case bool:
		next = !old
	default:
		t.Fatalf("a value of %T at %v", old, p)
	}
	if k, ok := last.(string); ok {
		parent.(map[string]any)[k] = next
	} else {
		parent.([]any)[last.(int)] = next
	}
}

// at returns the value of v, a map or a slice, at key k, a string or an index.
func at(v, k any) any {
	if k, ok := k.(string); ok {
		return v.(map[string]any)[k]
	}
	return v.([]any)[k.(int)]
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

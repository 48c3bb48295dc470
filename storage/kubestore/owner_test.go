package kubestore_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/phase"
	"github.com/itemops/itemops/storage/kubestore"
)

// ownerRefs is an Options.OwnerReference whose references the tests set by run name,
// and which keeps the last owner it was called with of each name.
type ownerRefs struct {
	mu   sync.Mutex
	refs map[string]*metav1.OwnerReference
	seen map[string]operations.Owner
}

func (o *ownerRefs) set(run string, ref *metav1.OwnerReference) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.refs[run] = ref
}

func (o *ownerRefs) of(run operations.Owner) *metav1.OwnerReference {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.seen[run.Name] = run
	return o.refs[run.Name]
}

// calledWith returns the last owner of the name of run that of was called with.
func (o *ownerRefs) calledWith(run operations.Owner) operations.Owner {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.seen[run.Name]
}

// ownerRole lets storeUser read ConfigMaps, the owners of the tests' runs: the right
// that Options.OwnerReference needs beside the shipped Role.
var ownerRole = &rbacv1.Role{
	ObjectMeta: metav1.ObjectMeta{Name: "itemops-owners"},
	Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get"}}},
}

// newConfigMap creates a ConfigMap called name in ns and returns a reference to it.
func newConfigMap(t *testing.T, cfg *rest.Config, ns, name string) *metav1.OwnerReference {
	t.Helper()
	cm, err := kubernetes.NewForConfigOrDie(cfg).CoreV1().ConfigMaps(ns).Create(context.Background(),
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create ConfigMap %s/%s: %v", ns, name, err)
	}
	yes := true
	return &metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: cm.Name, UID: cm.UID, Controller: &yes}
}

// TestOwnerReference gives runs an owner with Options.OwnerReference, a ConfigMap of
// the store's namespace standing for an operator's custom resource, and reads the
// objects through the API: the option is called with the run's owner, UID included; a run's object carries exactly the reference, from its
// creation and through later commits, and its chunks are owned by the run's object; a
// cluster-scoped owner is found in the cluster. A reference the garbage collector would
// take as naming a deleted owner (an owner in another namespace, a wrong UID, an owner
// that does not exist, a kind the API server does not serve, a reference without a UID)
// fails the creation with operations.ErrInvalid naming the owner, and writes nothing; a
// run for which the option gives no reference has none, and a run whose reference the
// collector removed reads as before. The test API server runs no garbage collector: the
// deletion of a run with its owner is Kubernetes' behaviour, not tested here.
func TestOwnerReference(t *testing.T) {
	ctx := context.Background()
	refs := &ownerRefs{refs: map[string]*metav1.OwnerReference{}, seen: map[string]operations.Owner{}}
	s, cfg, ns := newStoreIn(t, &kubestore.Options{OwnerReference: refs.of, InlineBytes: 1 << 10, ChunkBytes: 16 << 10})
	grant(t, cfg, ns, ownerRole)
	dyn := dynamic.NewForConfigOrDie(cfg)
	owner := newConfigMap(t, cfg, ns, "app-backup")
	other := newNamespace(t, cfg)
	elsewhere := newConfigMap(t, cfg, other, "app-backup-elsewhere")

	// sizes are the runs' operations: 3 stay in the run's object, 300 spill into
	// chunks, which the run's object owns.
	sizes := map[string]int{"inline": 3, "spilled": 300}
	for name, n := range sizes {
		t.Run("Owned/"+name, func(t *testing.T) {
			o := operations.Owner{Kind: phase.Backup, Name: "owned" + name, UID: "uid-" + name}
			refs.set(o.Name, owner)
			if err := s.CreateRunWithOperations(ctx, waitingRun(t, o), testOps(o, n, operations.OperationInProgress)); err != nil {
				t.Fatalf("CreateRunWithOperations: %v", err)
			}
			if diff := cmp.Diff(o, refs.calledWith(o)); diff != "" {
				t.Errorf("the owner OwnerReference was called with (-want +got):\n%s", diff)
			}
			checkOwned(t, dyn, ns, "b.owned"+name, owner, n > 3)
			// A later commit, of new operations, keeps the reference.
			if err := s.PutOperations(ctx, o, testOps(o, n, operations.OperationCompleted)); err != nil {
				t.Fatalf("PutOperations: %v", err)
			}
			checkOwned(t, dyn, ns, "b.owned"+name, owner, n > 3)
		})
	}

	t.Run("NoReference", func(t *testing.T) {
		o := operations.Owner{Kind: phase.Backup, Name: "unowned", UID: "uid-unowned"}
		if err := s.CreateRun(ctx, waitingRun(t, o)); err != nil {
			t.Fatalf("CreateRun: %v", err)
		}
		obj, err := dyn.Resource(runsGVR).Namespace(ns).Get(ctx, "b.unowned", metav1.GetOptions{})
		if err != nil {
			t.Fatalf("get the run's object: %v", err)
		}
		if got := obj.GetOwnerReferences(); len(got) != 0 {
			t.Errorf("ownerReferences of a run the option gives none = %v, want none", got)
		}
	})

	wrongUID := *owner
	wrongUID.UID = types.UID("0b1c2d3e-0000-4000-8000-000000000000")
	missing := *owner
	missing.Name = "no-such-backup"
	unknownKind := *owner
	unknownKind.APIVersion, unknownKind.Kind = "example.io/v1", "AppBackup"
	noUID := *owner
	noUID.UID = ""
	refused := []struct {
		name string
		ref  *metav1.OwnerReference
	}{
		{"OtherNamespace", elsewhere},
		{"WrongUID", &wrongUID},
		{"Missing", &missing},
		{"UnknownKind", &unknownKind},
		{"NoUID", &noUID},
	}
	// The refused creations go through a Store of their own, whose every request w
	// records, so that the test sees that none writes.
	w := &writes{}
	r := openIn(t, ns, &kubestore.Options{OwnerReference: refs.of, InlineBytes: 1 << 10, ChunkBytes: 16 << 10},
		func(next http.RoundTripper) http.RoundTripper { w.next = next; return w })
	t.Cleanup(func() { r.Close() })
	for _, tc := range refused {
		for name, n := range sizes {
			t.Run("Refused/"+tc.name+"/"+name, func(t *testing.T) {
				before := objectNames(t, dyn, ns)
				o := operations.Owner{Kind: phase.Restore, Name: "refused", UID: "uid-refused"}
				refs.set(o.Name, tc.ref)
				w.take()
				err := r.CreateRunWithOperations(ctx, waitingRun(t, o), testOps(o, n, operations.OperationInProgress))
				if !errors.Is(err, operations.ErrInvalid) || !strings.Contains(err.Error(), tc.ref.Name) {
					t.Fatalf("CreateRunWithOperations = %v; want ErrInvalid naming %s", err, tc.ref.Name)
				}
				if got := w.take(); len(got) > 0 {
					t.Errorf("the refused creation wrote %v; want nothing", got)
				}
				if diff := cmp.Diff(before, objectNames(t, dyn, ns)); diff != "" {
					t.Errorf("objects after the refused creation (-before +after):\n%s", diff)
				}
				if _, err := r.GetRun(ctx, o); !errors.Is(err, operations.ErrNotFound) {
					t.Errorf("GetRun of the refused run = %v; want ErrNotFound", err)
				}
			})
		}
	}

	// Without get on the owner's resource, the check is Forbidden, and so is the
	// creation, which writes nothing.
	t.Run("Forbidden", func(t *testing.T) {
		f, _, fns := newStoreIn(t, &kubestore.Options{OwnerReference: refs.of})
		o := operations.Owner{Kind: phase.Backup, Name: "forbidden", UID: "uid-forbidden"}
		refs.set(o.Name, newConfigMap(t, cfg, fns, "app-backup"))
		before := objectNames(t, dyn, fns)
		if err := f.CreateRun(ctx, waitingRun(t, o)); !apierrors.IsForbidden(err) {
			t.Fatalf("CreateRun without get on configmaps = %v; want Forbidden", err)
		}
		if diff := cmp.Diff(before, objectNames(t, dyn, fns)); diff != "" {
			t.Errorf("objects after the refused creation (-before +after):\n%s", diff)
		}
	})

	// A cluster-scoped owner, a Namespace, is found in the cluster. The store runs as the
	// administrator here: storeUser may read no cluster-scoped object.
	t.Run("ClusterScoped", func(t *testing.T) {
		nsObj, err := kubernetes.NewForConfigOrDie(cfg).CoreV1().Namespaces().Get(ctx, other, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("get namespace %s: %v", other, err)
		}
		clusterOwner := &metav1.OwnerReference{APIVersion: "v1", Kind: "Namespace", Name: other, UID: nsObj.UID}
		wrong := *clusterOwner
		wrong.UID = wrongUID.UID
		a, err := kubestore.Open(ctx, cfg, ns, &kubestore.Options{OwnerReference: refs.of})
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		t.Cleanup(func() { a.Close() })
		o := operations.Owner{Kind: phase.Backup, Name: "clusterowned", UID: "uid-clusterowned"}
		refs.set(o.Name, &wrong)
		if err := a.CreateRun(ctx, waitingRun(t, o)); !errors.Is(err, operations.ErrInvalid) || !strings.Contains(err.Error(), "in the cluster") {
			t.Fatalf("CreateRun with a wrong UID = %v; want ErrInvalid naming the cluster", err)
		}
		refs.set(o.Name, clusterOwner)
		if err := a.CreateRun(ctx, waitingRun(t, o)); err != nil {
			t.Fatalf("CreateRun: %v", err)
		}
		checkOwned(t, dyn, ns, "b.clusterowned", clusterOwner, false)
	})

	// The garbage collector removes the ownerReferences of the dependents of an owner
	// deleted with propagationPolicy Orphan (kubectl delete --cascade=orphan): the run
	// then reads as before, and later commits leave it without an owner.
	t.Run("Orphaned", func(t *testing.T) {
		o := operations.Owner{Kind: phase.Backup, Name: "orphaned", UID: "uid-orphaned"}
		refs.set(o.Name, owner)
		ops := testOps(o, 300, operations.OperationInProgress)
		runs := dyn.Resource(runsGVR).Namespace(ns)
		run, obj := createWaiting(t, s, runs, "b.orphaned", o, ops)
		obj.SetOwnerReferences(nil)
		if _, err := runs.Update(ctx, obj, metav1.UpdateOptions{}); err != nil {
			t.Fatalf("remove the ownerReferences: %v", err)
		}
		got, err := s.GetRun(ctx, o)
		if err != nil {
			t.Fatalf("GetRun of the orphaned run: %v", err)
		}
		if diff := cmp.Diff(run, got); diff != "" {
			t.Errorf("GetRun of the orphaned run (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff(ops, listOps(t, s, o)); diff != "" {
			t.Errorf("ListOperations of the orphaned run (-want +got):\n%s", diff)
		}
		if err := s.PutOperations(ctx, o, testOps(o, 300, operations.OperationCompleted)); err != nil {
			t.Fatalf("PutOperations: %v", err)
		}
		if obj, err = runs.Get(ctx, "b.orphaned", metav1.GetOptions{}); err != nil {
			t.Fatalf("get the run's object: %v", err)
		}
		if got := obj.GetOwnerReferences(); len(got) != 0 {
			t.Errorf("ownerReferences after a commit of the orphaned run = %v, want none", got)
		}
	})
}

// checkOwned checks that the ItemopsRun called name in ns has exactly the ownerReference
// want, and that each of its chunks, of which it has some when spilled, is owned by it
// alone.
func checkOwned(t *testing.T, dyn dynamic.Interface, ns, name string, want *metav1.OwnerReference, spilled bool) {
	t.Helper()
	ctx := context.Background()
	head, err := dyn.Resource(runsGVR).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get the run's object: %v", err)
	}
	if diff := cmp.Diff([]metav1.OwnerReference{*want}, head.GetOwnerReferences()); diff != "" {
		t.Errorf("ownerReferences of %s (-want +got):\n%s", name, diff)
	}
	refs, _, _ := unstructured.NestedSlice(head.Object, "status", "store", "chunks")
	if spilled != (len(refs) > 0) {
		t.Fatalf("%s names %d chunks; spilled is %v", name, len(refs), spilled)
	}
	byRun := []metav1.OwnerReference{{APIVersion: runsGVR.GroupVersion().String(), Kind: "ItemopsRun", Name: name, UID: head.GetUID()}}
	for _, r := range refs {
		chunk := r.(map[string]any)["name"].(string)
		obj, err := dyn.Resource(chunksGVR).Namespace(ns).Get(ctx, chunk, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("get chunk %s: %v", chunk, err)
		}
		if diff := cmp.Diff(byRun, obj.GetOwnerReferences()); diff != "" {
			t.Errorf("ownerReferences of chunk %s (-want +got):\n%s", chunk, diff)
		}
	}
}

// objectNames returns the names of the store's objects in ns, runs and chunks, with
// their labels.
func objectNames(t *testing.T, dyn dynamic.Interface, ns string) map[string]map[string]string {
	t.Helper()
	out := map[string]map[string]string{}
	for _, res := range []string{"itemopsruns", "itemopschunks"} {
		gvr := runsGVR.GroupVersion().WithResource(res)
		l, err := dyn.Resource(gvr).Namespace(ns).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			t.Fatalf("list %s: %v", res, err)
		}
		for _, obj := range l.Items {
			out[res+"/"+obj.GetName()] = obj.GetLabels()
		}
	}
	return out
}

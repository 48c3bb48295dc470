package kubestore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/phase"
	"github.com/itemops/itemops/storage/kubestore"
	"github.com/itemops/itemops/storage/kv"
)

// spilling makes a run of 300 operations spill into chunks.
var spilling = &kubestore.Options{InlineBytes: 1 << 10, ChunkBytes: 16 << 10}

// edit reads the object called name with client, changes it with apply and writes it.
func edit(t *testing.T, client dynamic.ResourceInterface, name string, apply func(*unstructured.Unstructured)) {
	t.Helper()
	ctx := context.Background()
	obj, err := client.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get %s: %v", name, err)
	}
	apply(obj)
	if _, err := client.Update(ctx, obj, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("update %s: %v", name, err)
	}
}

// damaged fails the test unless err wraps operations.ErrCorrupt or kv.ErrFormat.
func damaged(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, operations.ErrCorrupt) && !errors.Is(err, kv.ErrFormat) {
		t.Errorf("%s: %v; want ErrCorrupt", what, err)
	}
}

// TestLabelsCheckedOnEveryRead edits the labels of a spilled run's object by hand: the
// role made pending or removed, the kind changed or removed, the phase changed or
// removed. Through a fresh Store, GetRun, ListOperations and every ListRuns the run
// could belong to fail with ErrCorrupt (none leaves it out with a nil error); a sweep
// deletes neither the object nor its chunks, and CreateRun of its owner fails.
func TestLabelsCheckedOnEveryRead(t *testing.T) {
	setLabel := func(k, v string) func(*unstructured.Unstructured) {
		return func(obj *unstructured.Unstructured) {
			l := obj.GetLabels()
			if v == "" {
				delete(l, k)
			} else {
				l[k] = v
			}
			obj.SetLabels(l)
		}
	}
	for _, tc := range []struct {
		name  string
		apply func(*unstructured.Unstructured)
	}{
		{"RolePending", setLabel("itemops.io/role", "pending")},
		{"RoleRemoved", setLabel("itemops.io/role", "")},
		{"KindChanged", setLabel("itemops.io/kind", string(phase.Restore))},
		{"KindRemoved", setLabel("itemops.io/kind", "")},
		{"PhaseChanged", setLabel("itemops.io/phase", string(phase.Completed))},
		{"PhaseRemoved", setLabel("itemops.io/phase", "")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			s, cfg, ns := newStoreIn(t, spilling)
			o := operations.Owner{Kind: phase.Backup, Name: "edited", UID: "uid-edited"}
			dyn := dynamic.NewForConfigOrDie(cfg)
			runs := dyn.Resource(runsGVR).Namespace(ns)
			createWaiting(t, s, runs, "b.edited", o, testOps(o, 300, operations.OperationInProgress))
			edit(t, runs, "b.edited", tc.apply)
			objects := count(t, cfg, runsGVR, ns) + count(t, cfg, chunksGVR, ns)

			r := openIn(t, ns, nil, nil)
			_, err := r.GetRun(ctx, o)
			damaged(t, "GetRun", err)
			_, err = r.ListOperations(ctx, o, operations.OperationFilter{})
			damaged(t, "ListOperations", err)
			for _, f := range []operations.RunFilter{
				{},
				{Kind: phase.Backup},
				{Phases: []phase.Phase{phase.WaitingForPluginOperations}},
				{Kind: phase.Backup, Phases: []phase.Phase{phase.WaitingForPluginOperations, phase.Completed}},
			} {
				runs, err := r.ListRuns(ctx, f)
				damaged(t, "ListRuns("+string(f.Kind)+", "+phasesOf(f)+")", err)
				if err == nil {
					t.Logf("ListRuns returned %d runs", len(runs))
				}
			}
			defer kubestore.SetPendingGrace(0)()
			if _, err := r.Sweep(ctx); !errors.Is(err, operations.ErrCorrupt) {
				t.Errorf("Sweep: %v; want ErrCorrupt, naming the damaged run", err)
			}
			if got := count(t, cfg, runsGVR, ns) + count(t, cfg, chunksGVR, ns); got != objects {
				t.Errorf("after the sweep the namespace holds %d objects, want the %d from before it", got, objects)
			}
			err = r.CreateRun(ctx, waitingRun(t, o))
			if !errors.Is(err, operations.ErrExists) && !errors.Is(err, operations.ErrCorrupt) {
				t.Errorf("CreateRun of the damaged run's owner: %v; want ErrExists or ErrCorrupt", err)
			}
		})
	}
}

// phasesOf returns the phases of f, for a message.
func phasesOf(f operations.RunFilter) string {
	s := ""
	for _, p := range f.Phases {
		s += string(p) + " "
	}
	return s
}

// TestSweepKeepsNamedChunks edits by hand a chunk that a spilled run's object names:
// its ownerReference made to name another UID (as a namespace restored with new UIDs
// has it) or another object, removed, and its labels changed or removed. A sweep
// deletes none of the run's chunks, and a fresh Store reads every operation.
func TestSweepKeepsNamedChunks(t *testing.T) {
	for _, tc := range []struct {
		name  string
		apply func(*unstructured.Unstructured)
	}{
		{"OwnerUIDChanged", func(obj *unstructured.Unstructured) {
			refs := obj.GetOwnerReferences()
			refs[0].UID = "0b1c2d3e-0000-4000-8000-000000000002"
			obj.SetOwnerReferences(refs)
		}},
		{"OwnerNameChanged", func(obj *unstructured.Unstructured) {
			refs := obj.GetOwnerReferences()
			refs[0].Name = "b.other"
			obj.SetOwnerReferences(refs)
		}},
		{"OwnerRemoved", func(obj *unstructured.Unstructured) { obj.SetOwnerReferences(nil) }},
		{"LabelsRemoved", func(obj *unstructured.Unstructured) { obj.SetLabels(nil) }},
		{"RunLabelChanged", func(obj *unstructured.Unstructured) {
			obj.SetLabels(map[string]string{"itemops.io/role": "chunk", "itemops.io/run": "0000000000000000000000000000000000000000"})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			s, cfg, ns := newStoreIn(t, spilling)
			o := operations.Owner{Kind: phase.Backup, Name: "spilled", UID: "uid-spilled"}
			ops := testOps(o, 300, operations.OperationInProgress)
			runs := dynamic.NewForConfigOrDie(cfg).Resource(runsGVR).Namespace(ns)
			createWaiting(t, s, runs, "b.spilled", o, ops)
			chunks := dynamic.NewForConfigOrDie(cfg).Resource(chunksGVR).Namespace(ns)
			named := namedChunks(t, cfg, ns, "b.spilled")
			for _, name := range named {
				edit(t, chunks, name, tc.apply)
			}
			if n, err := openIn(t, ns, nil, nil).Sweep(ctx); err != nil || n != 0 {
				t.Errorf("Sweep = %d, %v; want nothing deleted", n, err)
			}
			if got := count(t, cfg, chunksGVR, ns); got != 1+len(named) {
				t.Errorf("after the sweep the namespace holds %d ItemopsChunks, want %d", got, 1+len(named))
			}
			if diff := cmp.Diff(ops, listOps(t, openIn(t, ns, nil, nil), o), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("ListOperations through a fresh Store after the sweep (-want +got):\n%s", diff)
			}
		})
	}
}

// TestStoreIdentity changes what makes a namespace one store under a Store that has
// it open: the format marker (the ItemopsChunk "itemops") deleted, or replaced by a
// copy; every ItemopsRun of the namespace deleted, as deleting their CRD and
// installing it again does; a run's object of another store copied in. Every call of
// the open Store then fails with ErrCorrupt, and so does a fresh Open, or a fresh
// Store's reads, where the namespace no longer holds the store it held (a replaced
// marker that holds the same store opens as it was).
func TestStoreIdentity(t *testing.T) {
	for _, tc := range []struct {
		name string
		// change changes the namespace ns of the store, holding the run of o; other
		// is the namespace of another store holding the run of foreign.
		change func(t *testing.T, dyn dynamic.Interface, ns, other string)
		// opens says that a fresh Open succeeds, and reads the store as it was.
		opens bool
	}{
		{name: "MarkerDeleted", change: func(t *testing.T, dyn dynamic.Interface, ns, _ string) {
			if err := dyn.Resource(chunksGVR).Namespace(ns).Delete(context.Background(), "itemops", metav1.DeleteOptions{}); err != nil {
				t.Fatalf("delete the marker: %v", err)
			}
		}},
		{name: "MarkerReplaced", opens: true, change: func(t *testing.T, dyn dynamic.Interface, ns, _ string) {
			ctx := context.Background()
			chunks := dyn.Resource(chunksGVR).Namespace(ns)
			m, err := chunks.Get(ctx, "itemops", metav1.GetOptions{})
			if err != nil {
				t.Fatalf("get the marker: %v", err)
			}
			if err := chunks.Delete(ctx, "itemops", metav1.DeleteOptions{}); err != nil {
				t.Fatalf("delete the marker: %v", err)
			}
			m.SetResourceVersion("")
			m.SetUID("")
			if _, err := chunks.Create(ctx, m, metav1.CreateOptions{}); err != nil {
				t.Fatalf("create the marker again: %v", err)
			}
		}},
		{name: "RunsDeleted", change: func(t *testing.T, dyn dynamic.Interface, ns, _ string) {
			err := dyn.Resource(runsGVR).Namespace(ns).DeleteCollection(context.Background(), metav1.DeleteOptions{}, metav1.ListOptions{})
			if err != nil {
				t.Fatalf("delete the ItemopsRuns: %v", err)
			}
		}},
		{name: "RunOfAnotherStore", change: func(t *testing.T, dyn dynamic.Interface, ns, other string) {
			ctx := context.Background()
			obj, err := dyn.Resource(runsGVR).Namespace(other).Get(ctx, "r.foreign", metav1.GetOptions{})
			if err != nil {
				t.Fatalf("get the other store's run: %v", err)
			}
			obj.SetNamespace(ns)
			obj.SetResourceVersion("")
			obj.SetUID("")
			if _, err := dyn.Resource(runsGVR).Namespace(ns).Create(ctx, obj, metav1.CreateOptions{}); err != nil {
				t.Fatalf("copy the other store's run: %v", err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			s, cfg, ns := newStoreIn(t, nil)
			o := operations.Owner{Kind: phase.Backup, Name: "kept", UID: "uid-kept"}
			ops := testOps(o, 3, operations.OperationInProgress)
			if err := s.CreateRunWithOperations(ctx, waitingRun(t, o), ops); err != nil {
				t.Fatalf("CreateRunWithOperations: %v", err)
			}
			before, err := s.ListRuns(ctx, operations.RunFilter{})
			if err != nil {
				t.Fatalf("ListRuns: %v", err)
			}
			other, _, otherNS := newStoreIn(t, nil)
			foreign := operations.Owner{Kind: phase.Restore, Name: "foreign", UID: "uid-foreign"}
			if err := other.CreateRun(ctx, waitingRun(t, foreign)); err != nil {
				t.Fatalf("CreateRun in the other store: %v", err)
			}
			tc.change(t, dynamic.NewForConfigOrDie(cfg), ns, otherNS)

			read := o
			if tc.name == "RunOfAnotherStore" {
				read = foreign
			}
			calls := func(s *kubestore.Store, who string) {
				t.Helper()
				_, err := s.GetRun(ctx, read)
				damaged(t, who+": GetRun", err)
				_, err = s.ListOperations(ctx, read, operations.OperationFilter{})
				damaged(t, who+": ListOperations", err)
				_, err = s.ListRuns(ctx, operations.RunFilter{})
				damaged(t, who+": ListRuns", err)
				_, err = s.ListRuns(ctx, operations.RunFilter{Phases: []phase.Phase{phase.WaitingForPluginOperations}})
				damaged(t, who+": ListRuns of the waiting runs", err)
				damaged(t, who+": PutOperations", s.PutOperations(ctx, read, testOps(read, 1, operations.OperationCompleted)))
				if tc.name != "RunOfAnotherStore" { // the store is sound but for that run
					fresh := operations.Owner{Kind: phase.Backup, Name: "fresh", UID: "uid-fresh"}
					damaged(t, who+": CreateRun", s.CreateRun(ctx, waitingRun(t, fresh)))
				}
			}
			if tc.name != "RunOfAnotherStore" {
				calls(s, "the open Store")
			}
			r, err := kubestore.Open(ctx, userConfig(t), ns, nil)
			switch {
			case tc.opens && err != nil:
				t.Fatalf("a fresh Open: %v", err)
			case tc.opens:
				got, err := r.ListRuns(ctx, operations.RunFilter{})
				if err != nil {
					t.Fatalf("ListRuns through a fresh Store: %v", err)
				}
				if diff := cmp.Diff(before, got); diff != "" {
					t.Errorf("ListRuns through a fresh Store (-want +got):\n%s", diff)
				}
			case err == nil:
				calls(r, "a fresh Store")
			default:
				damaged(t, "a fresh Open", err)
			}
		})
	}
}

// TestCRDReinstalled deletes the runs' CRD under an open Store, which deletes every
// ItemopsRun of the cluster, and installs the CRDs again, as an administrator cleaning
// up might. Every call of the open Store then fails with ErrCorrupt, and so does a
// fresh Open: neither reads an empty store. It runs on the server disturbed (see
// TestFaults), in sequence, as no other test could bear its CRD deleted.
func TestCRDReinstalled(t *testing.T) {
	ctx := context.Background()
	admin := disturbed.Config(t)
	if err := kubestore.InstallCRDs(ctx, admin); err != nil {
		t.Fatalf("InstallCRDs: %v", err)
	}
	ns := newNamespace(t, admin)
	user := disturbed.UserConfig(t, storeUser)
	grantTo(t, admin, user, ns, shippedRole(t))
	s, err := kubestore.Open(ctx, user, ns, nil)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	o := operations.Owner{Kind: phase.Backup, Name: "kept", UID: "uid-kept"}
	if err := s.CreateRunWithOperations(ctx, waitingRun(t, o), testOps(o, 3, operations.OperationInProgress)); err != nil {
		t.Fatalf("CreateRunWithOperations: %v", err)
	}

	crds := dynamic.NewForConfigOrDie(admin).Resource(crdGVR)
	const runsCRD = "itemopsruns.store.itemops.io"
	if err := crds.Delete(ctx, runsCRD, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete CRD %s: %v", runsCRD, err)
	}
	// The server deletes the CRD's objects before the CRD itself.
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := crds.Get(ctx, runsCRD, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	if err != nil {
		t.Fatalf("wait until CRD %s is gone: %v", runsCRD, err)
	}
	if err := kubestore.InstallCRDs(ctx, admin); err != nil {
		t.Fatalf("InstallCRDs again: %v", err)
	}

	calls := func(s *kubestore.Store, who string) {
		t.Helper()
		_, err := s.GetRun(ctx, o)
		damaged(t, who+": GetRun", err)
		_, err = s.ListOperations(ctx, o, operations.OperationFilter{})
		damaged(t, who+": ListOperations", err)
		_, err = s.ListRuns(ctx, operations.RunFilter{})
		damaged(t, who+": ListRuns", err)
		_, err = s.ListRuns(ctx, operations.RunFilter{Phases: []phase.Phase{phase.WaitingForPluginOperations}})
		damaged(t, who+": ListRuns of the waiting runs", err)
		damaged(t, who+": PutOperations", s.PutOperations(ctx, o, testOps(o, 1, operations.OperationCompleted)))
		fresh := operations.Owner{Kind: phase.Backup, Name: "fresh", UID: "uid-fresh"}
		damaged(t, who+": CreateRun", s.CreateRun(ctx, waitingRun(t, fresh)))
	}
	calls(s, "the open Store")
	if r, err := kubestore.Open(ctx, user, ns, nil); err == nil {
		r.Close()
		t.Errorf("a fresh Open succeeded; want ErrCorrupt")
	} else {
		damaged(t, "a fresh Open", err)
	}
}

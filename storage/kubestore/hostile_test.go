package kubestore_test

import (
	"context"
	"encoding/base64"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/phase"
	"github.com/itemops/itemops/storage/kubestore"
)

// TestHostileObjects edits a run's objects, as kubectl edit would, into shapes the store
// does not write, and reads the run, through a Store that has cached none of its chunks,
// by each read that reaches the edited object: each read fails with
// operations.ErrCorrupt and names the object, or, where the API server refuses the edit
// or drops what its schema does not know, reads the run as it was. The Store that wrote
// the run, whose cache holds its chunks, reads an edited chunk as it was written.
func TestHostileObjects(t *testing.T) {
	type edit struct {
		name string
		// chunk says whether the edit is made to the run's first chunk rather than to
		// the run's object.
		chunk bool
		// refused says that the API server refuses the edit; kept says that it takes it
		// but the run reads as it was.
		refused, kept bool
		// apply changes the object; nil deletes it.
		apply func(obj *unstructured.Unstructured)
	}
	set := func(v any, path ...string) func(*unstructured.Unstructured) {
		return func(obj *unstructured.Unstructured) { unstructured.SetNestedField(obj.Object, v, path...) }
	}
	setLabel := func(k, v string) func(*unstructured.Unstructured) {
		return func(obj *unstructured.Unstructured) {
			l := obj.GetLabels()
			l[k] = v
			obj.SetLabels(l)
		}
	}
	remove := func(path ...string) func(*unstructured.Unstructured) {
		return func(obj *unstructured.Unstructured) { unstructured.RemoveNestedField(obj.Object, path...) }
	}
	edits := []edit{
		{name: "OwnerRenamed", refused: true, apply: set("other", "spec", "owner", "name")},
		{name: "UnknownField", kept: true, apply: set("x", "status", "store", "extra")},
		{name: "ForeignLabel", kept: true, apply: setLabel("team", "a")},
		// ownerReferences are Kubernetes' to change (its garbage collector removes them
		// when an owner is deleted with propagationPolicy Orphan), so the sum leaves them
		// out and an edit of them is no damage.
		{name: "OwnerReferenceAdded", kept: true, apply: func(obj *unstructured.Unstructured) {
			obj.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: "app", UID: "0b1c2d3e-0000-4000-8000-000000000001"}})
		}},
		{name: "PhaseBackwards", apply: set(string(phase.New), "status", "phase")},
		{name: "PhaseLabelBackwards", apply: setLabel("itemops.io/phase", string(phase.New))},
		{name: "SeqLowered", apply: set(int64(1), "status", "store", "seq")},
		{name: "DataReplaced", apply: set(base64.StdEncoding.EncodeToString([]byte("not gzip")), "status", "store", "data")},
		{name: "DataRemoved", apply: remove("status", "store", "data")},
		{name: "SumRemoved", apply: remove("status", "store", "sum")},
		{name: "CountChanged", apply: set(int64(7), "status", "operations", "completed")},
		{name: "SummaryChanged", apply: set("300/300", "status", "operations", "summary")},
		{name: "HistoryRemoved", apply: remove("status", "history")},
		{name: "RecordKeyChanged", apply: set(base64.StdEncoding.EncodeToString([]byte("nokey")), "status", "store", "recordKey")},
		{name: "ChunkDropped", apply: func(obj *unstructured.Unstructured) {
			refs, _, _ := unstructured.NestedSlice(obj.Object, "status", "store", "chunks")
			unstructured.SetNestedSlice(obj.Object, refs[1:], "status", "store", "chunks")
		}},
		{name: "StoreRemoved", apply: remove("status", "store")},
		{name: "ChunkDeleted", chunk: true},
		{name: "ChunkDataReplaced", chunk: true, apply: set(base64.StdEncoding.EncodeToString([]byte("not gzip")), "spec", "data")},
		{name: "ChunkSeqRaised", chunk: true, kept: true, apply: set(int64(1)<<62, "spec", "seq")},
	}
	ctx := context.Background()
	cfg := config(t)
	dyn := dynamic.NewForConfigOrDie(cfg)
	for _, e := range edits {
		t.Run(e.name, func(t *testing.T) {
			s, _, ns := newStoreIn(t, &kubestore.Options{InlineBytes: 1 << 10, ChunkBytes: 16 << 10})
			o := operations.Owner{Kind: phase.Restore, Name: "edited", UID: "uid-edited"}
			ops := testOps(o, 300, operations.OperationInProgress)
			runs := dyn.Resource(runsGVR).Namespace(ns)
			run, head := createWaiting(t, s, runs, "r.edited", o, ops)
			target, client := head, runs
			var err error
			if e.chunk {
				refs, _, _ := unstructured.NestedSlice(head.Object, "status", "store", "chunks")
				if len(refs) < 2 {
					t.Fatalf("the run has %d chunks, want several", len(refs))
				}
				name := refs[0].(map[string]any)["name"].(string)
				client = dyn.Resource(chunksGVR).Namespace(ns)
				if target, err = client.Get(ctx, name, metav1.GetOptions{}); err != nil {
					t.Fatalf("get chunk %s: %v", name, err)
				}
			}
			if e.apply == nil {
				err = client.Delete(ctx, target.GetName(), metav1.DeleteOptions{})
			} else {
				e.apply(target)
				_, err = client.Update(ctx, target, metav1.UpdateOptions{})
			}
			if e.refused {
				if !apierrors.IsInvalid(err) {
					t.Fatalf("the edit was taken (%v); want it refused as invalid", err)
				}
			} else if err != nil {
				t.Fatalf("update: %v", err)
			}

			// The reads go through a Store of their own, whose chunk cache is empty: s
			// holds the run's chunks in its cache, checked when they entered it, and
			// reads the keys the run's object names from there.
			if e.chunk {
				if diff := cmp.Diff(ops, listOps(t, s, o), cmpopts.EquateEmpty()); diff != "" {
					t.Errorf("ListOperations after the edit, through the Store that cached the chunk (-want +got):\n%s", diff)
				}
			}
			r := openIn(t, ns, nil, nil)
			_, getErr := r.GetRun(ctx, o)
			gotOps, opsErr := r.ListOperations(ctx, o, operations.OperationFilter{})
			// ListRuns of every filter reads every run's object (see TestLabelsCheckedOnEveryRead).
			_, listErr := r.ListRuns(ctx, operations.RunFilter{})
			if e.refused || e.kept {
				if getErr != nil || opsErr != nil || listErr != nil {
					t.Fatalf("reads after the edit: GetRun %v, ListOperations %v, ListRuns %v; want none", getErr, opsErr, listErr)
				}
				if diff := cmp.Diff(ops, gotOps, cmpopts.EquateEmpty()); diff != "" {
					t.Errorf("ListOperations after the edit (-want +got):\n%s", diff)
				}
				again, err := r.GetRun(ctx, o)
				if err != nil {
					t.Fatalf("GetRun: %v", err)
				}
				if diff := cmp.Diff(run, again); diff != "" {
					t.Errorf("GetRun after the edit (-want +got):\n%s", diff)
				}
				return
			}
			reads := map[string]error{"ListOperations": opsErr}
			if !e.chunk {
				reads["GetRun"], reads["ListRuns"] = getErr, listErr
			}
			for name, err := range reads {
				if !errors.Is(err, operations.ErrCorrupt) || !strings.Contains(err.Error(), ns+"/r.edited") {
					t.Errorf("%s after the edit: %v; want ErrCorrupt naming %s/r.edited", name, err, ns)
				}
			}
		})
	}
}

package kubestore_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/phase"
)

// TestOwnerLabels: kubectl get itemopsruns -l finds a run's object by its owner. A run
// named namespace/name (the integration's OwnerOf) carries itemops.io/namespace and
// itemops.io/name, another name itemops.io/name, and a name that no label value can
// hold neither; a label removed by hand reads as before and comes back with the run's
// next write, and a label edited by hand to name another owner fails the run's reads
// with ErrCorrupt.
func TestOwnerLabels(t *testing.T) {
	ctx := context.Background()
	s, cfg, ns := newStoreIn(t, nil)
	long := strings.Repeat("x", 64) // one byte past a label value's limit
	owners := []operations.Owner{
		{Kind: phase.Backup, Name: "orders/db", UID: "u1"},
		{Kind: phase.Backup, Name: "orders/cache", UID: "u2"},
		{Kind: phase.Restore, Name: "nightly", UID: "u3"},
		{Kind: phase.Backup, Name: "orders/" + long, UID: "u4"},
		{Kind: phase.Backup, Name: "a/b/c", UID: "u5"},
	}
	for _, o := range owners {
		if err := s.CreateRunWithOperations(ctx, waitingRun(t, o), testOps(o, 2, operations.OperationInProgress)); err != nil {
			t.Fatalf("create the run of %s: %v", o, err)
		}
	}
	runs := dynamic.NewForConfigOrDie(cfg).Resource(runsGVR).Namespace(ns)
	list := func(selector string) []unstructured.Unstructured {
		t.Helper()
		l, err := runs.List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			t.Fatalf("list %q: %v", selector, err)
		}
		return l.Items
	}
	ownerName := func(obj unstructured.Unstructured) string {
		name, _, _ := unstructured.NestedString(obj.Object, "spec", "owner", "name")
		return name
	}
	expect := func(selector string, want ...string) {
		t.Helper()
		var got []string
		for _, obj := range list(selector) {
			got = append(got, ownerName(obj))
		}
		slices.Sort(got)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("runs selected by %q (-want +got):\n%s", selector, diff)
		}
	}
	expect("itemops.io/namespace=orders,itemops.io/name=db", "orders/db")
	expect("itemops.io/namespace=orders", "orders/cache", "orders/db")
	expect("itemops.io/name=nightly,itemops.io/kind=Restore", "nightly")
	expect("!itemops.io/name,itemops.io/role=run", "a/b/c", "orders/"+long)

	o := owners[0]
	edit := func(change func(map[string]string)) {
		t.Helper()
		for _, obj := range list("itemops.io/role=run") {
			if ownerName(obj) == o.Name {
				labels := obj.GetLabels()
				change(labels)
				obj.SetLabels(labels)
				if _, err := runs.Update(ctx, &obj, metav1.UpdateOptions{}); err != nil {
					t.Fatalf("edit the labels of %s: %v", o, err)
				}
				return
			}
		}
		t.Fatalf("no object holds the run of %s", o)
	}

	// A label removed by hand: the run reads as before, and its next write puts it back.
	edit(func(l map[string]string) { delete(l, "itemops.io/name") })
	if _, err := s.GetRun(ctx, o); err != nil {
		t.Fatalf("a run whose owner label was removed: %v", err)
	}
	if _, err := s.UpdateRun(ctx, o, func(r *operations.Run) error { r.Warnings++; return nil }); err != nil {
		t.Fatalf("write the run: %v", err)
	}
	expect("itemops.io/namespace=orders,itemops.io/name=db", "orders/db")

	// A label changed by hand to name another owner is damage.
	edit(func(l map[string]string) { l["itemops.io/name"] = "cache" })
	if _, err := s.GetRun(ctx, o); !errors.Is(err, operations.ErrCorrupt) {
		t.Fatalf("a run whose owner label names another owner: %v, want ErrCorrupt", err)
	}
}

package kubestore_test

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"maps"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/phase"
	"github.com/itemops/itemops/storage/kubestore"
	"github.com/itemops/itemops/storage/kv"
)

// A handEdit is one edit of one object of a store's namespace, as an administrator
// might make with kubectl.
type handEdit struct {
	res  schema.GroupVersionResource
	name string // the object's
	what string // for messages
	// apply changes a copy of the object; nil deletes the object. dup, when set, is
	// the name under which apply's result is created beside the object, which stays.
	apply func(obj *unstructured.Unstructured)
	dup   string
}

// readResult is what one read of a store returned.
type readResult struct {
	val any
	err error
}

// TestHandEdits edits, one at a time, every object of a store's namespace holding
// three runs (two inline, one spilled into chunks), as kubectl edit and delete would:
// each label, annotation, ownerReference, spec and status field changed and removed,
// each list's first element duplicated, a label and an annotation added, the object
// deleted, and the object copied under another name. Through a Store opened before
// the edit and through a fresh one, every read (GetRun, ListOperations and
// GetOperation of each run, ListRuns of every filter that selects a run) returns what
// it returned before the edit, or fails with ErrCorrupt (kv.ErrFormat for a fresh
// Open); a run whose object was deleted may read as deleted. A sweep after the edit
// deletes no object but the chunks of a run whose object the edit deleted; once every
// edit is put back, every read returns what it did before them. With -short, every
// fifth edit is made. It does not run beside the conformance suites (t.Parallel): it
// sets the sweep's pendingGrace, which every Store of the package reads.
func TestHandEdits(t *testing.T) {
	ctx := context.Background()
	opts := &kubestore.Options{InlineBytes: 1 << 10, ChunkBytes: 16 << 10}
	s, cfg, ns := newStoreIn(t, opts)
	type run struct {
		o      operations.Owner
		object string
		ops    int
		wait   bool
	}
	runs := []run{
		{operations.Owner{Kind: phase.Backup, Name: "inline", UID: "uid-inline"}, "b.inline", 3, true},
		{operations.Owner{Kind: phase.Backup, Name: "new", UID: "uid-new"}, "b.new", 0, false},
		{operations.Owner{Kind: phase.Restore, Name: "spilled", UID: "uid-spilled"}, "r.spilled", 120, true},
	}
	for _, r := range runs {
		var err error
		if r.wait {
			err = s.CreateRunWithOperations(ctx, waitingRun(t, r.o), testOps(r.o, r.ops, operations.OperationInProgress))
		} else {
			err = s.CreateRun(ctx, operations.Run{Owner: r.o, Phase: phase.New, Created: t0, Updated: t0})
		}
		if err != nil {
			t.Fatalf("create the run of %s: %v", r.o, err)
		}
	}
	filters := []operations.RunFilter{
		{}, {Kind: phase.Backup}, {Kind: phase.Restore},
		{Phases: []phase.Phase{phase.New}}, {Phases: []phase.Phase{phase.WaitingForPluginOperations}},
		{Kind: phase.Backup, Phases: []phase.Phase{phase.WaitingForPluginOperations, phase.Completed}},
	}
	readAll := func(s *kubestore.Store) map[string]readResult {
		out := map[string]readResult{}
		for _, r := range runs {
			run, err := s.GetRun(ctx, r.o)
			out["GetRun "+r.o.String()] = readResult{run, err}
			ops, err := s.ListOperations(ctx, r.o, operations.OperationFilter{})
			out["ListOperations "+r.o.String()] = readResult{ops, err}
			if r.ops > 0 {
				op, err := s.GetOperation(ctx, r.o, "op-00001")
				out["GetOperation "+r.o.String()] = readResult{op, err}
			}
		}
		for i, f := range filters {
			got, err := s.ListRuns(ctx, f)
			out[fmt.Sprintf("ListRuns %d %+v", i, f)] = readResult{got, err}
		}
		return out
	}
	want := readAll(openIn(t, ns, nil, nil))
	for k, r := range want {
		if r.err != nil {
			t.Fatalf("%s before any edit: %v", k, r.err)
		}
	}
	dyn := dynamic.NewForConfigOrDie(cfg)
	pristine := map[string]*unstructured.Unstructured{} // by resource and name
	key := func(res schema.GroupVersionResource, name string) string { return res.Resource + "/" + name }
	var edits []handEdit
	for _, res := range []schema.GroupVersionResource{runsGVR, chunksGVR} {
		l, err := dyn.Resource(res).Namespace(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatalf("list %s: %v", res.Resource, err)
		}
		for i := range l.Items {
			obj := &l.Items[i]
			pristine[key(res, obj.GetName())] = obj.DeepCopy()
			edits = append(edits, editsOf(res, obj)...)
		}
	}
	// owners maps a chunk to the object of the run that names it.
	owners := map[string]string{}
	for _, r := range runs {
		for _, c := range namedChunks(t, cfg, ns, r.object) {
			owners[c] = r.object
		}
	}

	// putBack makes the namespace hold the pristine objects again, as they were but for
	// their UIDs and resourceVersions, and nothing else.
	putBack := func() {
		t.Helper()
		for _, res := range []schema.GroupVersionResource{runsGVR, chunksGVR} {
			client := dyn.Resource(res).Namespace(ns)
			l, err := client.List(ctx, metav1.ListOptions{})
			if err != nil {
				t.Fatalf("list %s: %v", res.Resource, err)
			}
			seen := map[string]bool{}
			for i := range l.Items {
				obj := &l.Items[i]
				p, ok := pristine[key(res, obj.GetName())]
				if !ok {
					if err := client.Delete(ctx, obj.GetName(), metav1.DeleteOptions{}); err != nil {
						t.Fatalf("delete %s: %v", obj.GetName(), err)
					}
					continue
				}
				seen[obj.GetName()] = true
				if cmp.Equal(p.Object["status"], obj.Object["status"]) && cmp.Equal(p.Object["spec"], obj.Object["spec"]) &&
					cmp.Equal(p.GetLabels(), obj.GetLabels()) && cmp.Equal(p.GetAnnotations(), obj.GetAnnotations()) &&
					cmp.Equal(p.GetOwnerReferences(), obj.GetOwnerReferences(), cmpopts.EquateEmpty()) {
					continue
				}
				back := p.DeepCopy()
				back.SetResourceVersion(obj.GetResourceVersion())
				back.SetUID(obj.GetUID())
				if _, err := client.Update(ctx, back, metav1.UpdateOptions{}); err != nil {
					t.Fatalf("put %s back: %v", obj.GetName(), err)
				}
			}
			for _, p := range pristine {
				if p.GetKind() != kindOf(res) || seen[p.GetName()] {
					continue
				}
				back := p.DeepCopy()
				back.SetResourceVersion("")
				back.SetUID("")
				back.SetCreationTimestamp(metav1.Time{})
				back.SetManagedFields(nil)
				if _, err := client.Create(ctx, back, metav1.CreateOptions{}); err != nil {
					t.Fatalf("create %s again: %v", p.GetName(), err)
				}
			}
		}
	}

	same := func(what string, got map[string]readResult, deletedRun string) {
		t.Helper()
		for _, k := range slices.Sorted(maps.Keys(want)) {
			g := got[k]
			switch {
			case g.err == nil && cmp.Equal(want[k].val, g.val, cmpopts.EquateEmpty()):
			case errors.Is(g.err, operations.ErrCorrupt) || errors.Is(g.err, kv.ErrFormat):
			case deletedRun != "" && readsAsDeleted(g, want[k]):
			case g.err != nil:
				t.Errorf("%s: %s: %v; want the result from before the edit or ErrCorrupt", what, k, g.err)
			default:
				t.Errorf("%s: %s: a result other than the one from before the edit:\n%s", what, k, cmp.Diff(want[k].val, g.val, cmpopts.EquateEmpty()))
			}
		}
	}

	t.Logf("%d edits of %d objects", len(edits), len(pristine))
	refused, made := 0, 0
	for i, e := range edits {
		if testing.Short() && i%5 != 0 {
			continue
		}
		what := fmt.Sprintf("%s %s: %s", e.res.Resource, e.name, e.what)
		pre, err := kubestore.Open(ctx, userConfig(t), ns, &kubestore.Options{ChunkCacheBytes: -1})
		if err != nil {
			t.Fatalf("%s: Open before the edit: %v", what, err)
		}
		client := dyn.Resource(e.res).Namespace(ns)
		obj, err := client.Get(ctx, e.name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("%s: get: %v", what, err)
		}
		switch {
		case e.apply == nil:
			err = client.Delete(ctx, e.name, metav1.DeleteOptions{})
		case e.dup != "":
			e.apply(obj)
			obj.SetName(e.dup)
			obj.SetResourceVersion("")
			obj.SetUID("")
			_, err = client.Create(ctx, obj, metav1.CreateOptions{})
		default:
			e.apply(obj)
			_, err = client.Update(ctx, obj, metav1.UpdateOptions{})
		}
		if apierrors.IsInvalid(err) || apierrors.IsBadRequest(err) {
			refused++
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		made++
		deletedRun := ""
		if e.apply == nil && e.res == runsGVR {
			deletedRun = e.name
		}
		same(what+", through a Store opened before", readAll(pre), deletedRun)
		if fresh, err := kubestore.Open(ctx, userConfig(t), ns, &kubestore.Options{ChunkCacheBytes: -1}); err != nil {
			if !errors.Is(err, operations.ErrCorrupt) && !errors.Is(err, kv.ErrFormat) {
				t.Errorf("%s: a fresh Open: %v; want it to open or fail with ErrCorrupt", what, err)
			}
		} else {
			same(what+", through a fresh Store", readAll(fresh), deletedRun)
		}

		// The sweep, with no grace for pending objects, deletes nothing a sound run
		// names, nor any run's object: only the chunks of a run whose object the edit
		// deleted may go.
		restore := kubestore.SetPendingGrace(0)
		pre.Sweep(ctx)
		restore()
		for k, p := range pristine {
			res := runsGVR
			if p.GetKind() == kindOf(chunksGVR) {
				res = chunksGVR
			}
			if e.apply == nil && p.GetName() == e.name || deletedRun != "" && owners[p.GetName()] == deletedRun {
				continue
			}
			if _, err := dyn.Resource(res).Namespace(ns).Get(ctx, p.GetName(), metav1.GetOptions{}); apierrors.IsNotFound(err) {
				t.Errorf("%s: the sweep deleted %s, which the edit left", what, k)
			}
		}
		putBack()
		pre.Close()
		if t.Failed() {
			t.Fatalf("stopped after the first failing edit")
		}
	}
	// Every edit was put back: the namespace reads as before the edits.
	for k, got := range readAll(openIn(t, ns, nil, nil)) {
		if got.err != nil || !cmp.Equal(want[k].val, got.val, cmpopts.EquateEmpty()) {
			t.Errorf("%s after every edit was put back: %v, %v", k, got.val, got.err)
		}
	}
	t.Logf("%d edits made, %d refused by the API server", made, refused)
	if made == 0 {
		t.Fatalf("the API server refused every edit")
	}
}

// readsAsDeleted reports whether got, the result of a read that returned want before
// the edit, is what it would be had a run been deleted: not found, or a listing of one
// run less.
func readsAsDeleted(got, want readResult) bool {
	if errors.Is(got.err, operations.ErrNotFound) {
		return true
	}
	runs, ok := got.val.([]operations.Run)
	if got.err != nil || !ok {
		return false
	}
	wanted, _ := want.val.([]operations.Run)
	return len(runs) == len(wanted)-1
}

// kindOf returns the kind of the objects of res.
func kindOf(res schema.GroupVersionResource) string {
	if res == runsGVR {
		return "ItemopsRun"
	}
	return "ItemopsChunk"
}

// editsOf returns the edits of obj, an object of res: every value of its labels,
// annotations, ownerReferences, spec and status changed (see changeValue) and removed,
// with every map and list above them; the first element of every list duplicated; a
// label, an annotation and an ownerReference added; the object deleted; and the object
// copied under another name.
func editsOf(res schema.GroupVersionResource, obj *unstructured.Unstructured) []handEdit {
	name := obj.GetName()
	var edits []handEdit
	add := func(what string, apply func(*unstructured.Unstructured)) {
		edits = append(edits, handEdit{res: res, name: name, what: what, apply: apply})
	}
	var paths [][]any
	for _, top := range [][]any{{"metadata", "labels"}, {"metadata", "annotations"}, {"metadata", "ownerReferences"}, {"spec"}, {"status"}} {
		v, ok := at2(obj.Object, top)
		if !ok {
			continue
		}
		walk(v, top, &paths)
	}
	for _, p := range paths {
		v, _ := at2(obj.Object, p)
		switch v.(type) {
		case map[string]any:
		case []any:
			if len(v.([]any)) > 0 {
				add(fmt.Sprintf("%v duplicated", p), func(o *unstructured.Unstructured) {
					l, _ := at2(o.Object, p)
					list := l.([]any)
					set(o.Object, p, append(list, runtime.DeepCopyJSONValue(list[0])))
				})
			}
		default:
			add(fmt.Sprintf("%v changed", p), func(o *unstructured.Unstructured) {
				old, _ := at2(o.Object, p)
				set(o.Object, p, changeValue(old))
			})
		}
		add(fmt.Sprintf("%v removed", p), func(o *unstructured.Unstructured) { remove(o.Object, p) })
	}
	add("a label added", func(o *unstructured.Unstructured) {
		l := o.GetLabels()
		if l == nil {
			l = map[string]string{}
		}
		l["team"] = "a"
		o.SetLabels(l)
	})
	add("an annotation added", func(o *unstructured.Unstructured) {
		o.SetAnnotations(map[string]string{"note": "edited"})
	})
	add("an ownerReference added", func(o *unstructured.Unstructured) {
		o.SetOwnerReferences(append(o.GetOwnerReferences(), metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: "app", UID: "0b1c2d3e-0000-4000-8000-000000000001"}))
	})
	edits = append(edits, handEdit{res: res, name: name, what: "deleted"})
	dup := "copy-of-" + name
	if len(name) > 2 && name[1] == '.' {
		dup = name[:2] + "copy" + name[2:] // a run's or a chunk's name of the same form
	}
	edits = append(edits, handEdit{res: res, name: name, what: "copied as " + dup, dup: dup, apply: func(*unstructured.Unstructured) {}})
	return edits
}

// walk appends to paths the path of v, below p, and of every value within it.
func walk(v any, p []any, paths *[][]any) {
	*paths = append(*paths, p)
	switch v := v.(type) {
	case map[string]any:
		for _, k := range slices.Sorted(maps.Keys(v)) {
			walk(v[k], append(slices.Clip(p), k), paths)
		}
	case []any:
		for i, e := range v {
			walk(e, append(slices.Clip(p), i), paths)
		}
	}
}

// at2 returns the value at path p in v, and whether there is one.
func at2(v any, p []any) (any, bool) {
	for _, k := range p {
		switch c := v.(type) {
		case map[string]any:
			var ok bool
			if v, ok = c[k.(string)]; !ok {
				return nil, false
			}
		case []any:
			v = c[k.(int)]
		default:
			return nil, false
		}
	}
	return v, true
}

// set sets the value at path p in m.
func set(m map[string]any, p []any, val any) {
	parent, _ := at2(m, p[:len(p)-1])
	switch c := parent.(type) {
	case map[string]any:
		c[p[len(p)-1].(string)] = val
	case []any:
		c[p[len(p)-1].(int)] = val
	}
}

// remove removes the value at path p from m: a map's key, or a list's element.
func remove(m map[string]any, p []any) {
	parent, _ := at2(m, p[:len(p)-1])
	switch c := parent.(type) {
	case map[string]any:
		delete(c, p[len(p)-1].(string))
	case []any:
		i := p[len(p)-1].(int)
		set(m, p[:len(p)-1], append(slices.Clone(c[:i]), c[i+1:]...))
	}
}

// changeValue returns v changed: base64 data with its last byte flipped, another string
// with a letter more, a number one more, a boolean flipped.
func changeValue(v any) any {
	switch v := v.(type) {
	case string:
		if b, err := base64.StdEncoding.DecodeString(v); err == nil && len(b) > 0 {
			b[len(b)-1] ^= 1
			return base64.StdEncoding.EncodeToString(b)
		}
		return v + "x"
	case int64:
		return v + 1
	case float64:
		return v + 1
	case bool:
		return !v
	}
	return v
}

package kubestore_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/phase"
	"github.com/itemops/itemops/storage/kubestore"
)

// versions returns the resourceVersion of every ItemopsRun and ItemopsChunk of
// namespace ns, by resource and name.
func versions(t *testing.T, cfg *rest.Config, ns string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, res := range []string{"itemopsruns", "itemopschunks"} {
		gvr := runsGVR
		if res == "itemopschunks" {
			gvr = chunksGVR
		}
		l, err := dynamic.NewForConfigOrDie(cfg).Resource(gvr).Namespace(ns).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			t.Fatalf("list %s: %v", res, err)
		}
		for _, obj := range l.Items {
			out[res+"/"+obj.GetName()] = obj.GetResourceVersion()
		}
	}
	return out
}

// seedCheck creates, through s, two inline runs (one with operations, one without)
// and one spilled into chunks, and returns the names of the spilled run's chunks.
func seedCheck(t *testing.T, s *kubestore.Store, cfg *rest.Config, ns string) []string {
	t.Helper()
	ctx := context.Background()
	for _, o := range []operations.Owner{
		{Kind: phase.Backup, Name: "inline", UID: "uid-inline"},
		{Kind: phase.Restore, Name: "spilled", UID: "uid-spilled"},
	} {
		n := 3
		if o.Name == "spilled" {
			n = 300
		}
		if err := s.CreateRunWithOperations(ctx, waitingRun(t, o), testOps(o, n, operations.OperationInProgress)); err != nil {
			t.Fatalf("create the run of %s: %v", o, err)
		}
	}
	o := operations.Owner{Kind: phase.Backup, Name: "new", UID: "uid-new"}
	if err := s.CreateRun(ctx, operations.Run{Owner: o, Phase: phase.New, Created: t0, Updated: t0}); err != nil {
		t.Fatalf("create the run of %s: %v", o, err)
	}
	chunks := namedChunks(t, cfg, ns, "r.spilled")
	if len(chunks) < 2 {
		t.Fatalf("the spilled run names %d chunks, want several", len(chunks))
	}
	return chunks
}

// TestCheck checks a namespace holding three runs, one spilled into chunks: sound, it
// checks clean with its counts; then, one case at a time, with the damage an
// administrator or a dead writer may leave: a run's object with its status bytes or
// its labels edited, a chunk edited or relabelled, chunks that no run's object names
// (of a commit that did not finish, which a sweep deletes; of one that may be in
// flight, which a sweep keeps, reported only once older than the grace; of a run
// whose object is gone), a pending object older than the grace, an ItemopsChunk the
// store did not name, a run's object copied under another name, and a format marker
// labelled for another store. Check reports each with ErrCorrupt naming the object,
// counts the objects, and changes no object of the namespace.
func TestCheck(t *testing.T) {
	flip := func(path ...string) func(*unstructured.Unstructured) {
		return func(obj *unstructured.Unstructured) {
			v, _, _ := unstructured.NestedString(obj.Object, path...)
			b, err := base64.StdEncoding.DecodeString(v)
			if err != nil || len(b) == 0 {
				panic(fmt.Sprintf("%v is not base64 data", path))
			}
			b[len(b)-1] ^= 1
			unstructured.SetNestedField(obj.Object, base64.StdEncoding.EncodeToString(b), path...)
		}
	}
	// copyChunk makes a copy of the chunk called from under the name name returns for
	// from's name parts: the label of its run's object and its sequence number.
	copyChunk := func(name func(label, seq string) string) func(t *testing.T, dyn dynamic.Interface, ns, from string) string {
		return func(t *testing.T, dyn dynamic.Interface, ns, from string) string {
			chunks := dyn.Resource(chunksGVR).Namespace(ns)
			obj, err := chunks.Get(context.Background(), from, metav1.GetOptions{})
			if err != nil {
				t.Fatalf("get %s: %v", from, err)
			}
			parts := strings.Split(from, ".")
			obj.SetName(name(parts[1], parts[2]))
			obj.SetResourceVersion("")
			obj.SetUID("")
			if _, err := chunks.Create(context.Background(), obj, metav1.CreateOptions{}); err != nil {
				t.Fatalf("create %s: %v", obj.GetName(), err)
			}
			return obj.GetName()
		}
	}
	for _, tc := range []struct {
		name string
		// damage damages namespace ns, whose spilled run names chunks, and returns the
		// object that Check must name ("itemopsruns/NAME" or "itemopschunks/NAME"),
		// or "" for none.
		damage func(t *testing.T, dyn dynamic.Interface, ns string, chunks []string) string
		// grace says that the check runs with no grace for pending objects and chunks
		// of commits in flight; without it, the default of a minute, which the damage
		// is younger than.
		grace bool
		want  string // what the error says of the object
		// counts is the report, beside the sound namespace's 3 runs and its chunks.
		runs, pending, chunks int
	}{
		{name: "Sound", damage: func(*testing.T, dynamic.Interface, string, []string) string { return "" }},
		{name: "RunStatusEdited", want: "damaged key data", damage: func(t *testing.T, dyn dynamic.Interface, ns string, _ []string) string {
			edit(t, dyn.Resource(runsGVR).Namespace(ns), "b.inline", flip("status", "store", "data"))
			return "itemopsruns/b.inline"
		}},
		{name: "RunPhaseEdited", want: "status.store.sum", damage: func(t *testing.T, dyn dynamic.Interface, ns string, _ []string) string {
			edit(t, dyn.Resource(runsGVR).Namespace(ns), "b.inline", func(obj *unstructured.Unstructured) {
				unstructured.SetNestedField(obj.Object, string(phase.Completed), "status", "phase")
			})
			return "itemopsruns/b.inline"
		}},
		{name: "RunRelabelled", want: "status.store.sum", damage: func(t *testing.T, dyn dynamic.Interface, ns string, _ []string) string {
			edit(t, dyn.Resource(runsGVR).Namespace(ns), "r.spilled", func(obj *unstructured.Unstructured) {
				l := obj.GetLabels()
				l["itemops.io/phase"] = string(phase.Completed)
				obj.SetLabels(l)
			})
			return "itemopsruns/r.spilled"
		}},
		{name: "ChunkEdited", want: "SHA-256", damage: func(t *testing.T, dyn dynamic.Interface, ns string, chunks []string) string {
			edit(t, dyn.Resource(chunksGVR).Namespace(ns), chunks[1], flip("spec", "data"))
			return "itemopsruns/r.spilled: chunk " + chunks[1]
		}},
		{name: "ChunkRelabelled", want: "as its name says", damage: func(t *testing.T, dyn dynamic.Interface, ns string, chunks []string) string {
			edit(t, dyn.Resource(chunksGVR).Namespace(ns), chunks[0], func(obj *unstructured.Unstructured) {
				obj.SetLabels(map[string]string{"itemops.io/role": "chunk", "itemops.io/run": strings.Repeat("0", 40)})
			})
			return "itemopschunks/" + chunks[0]
		}},
		{name: "ChunkOwnerChanged", want: "garbage collector", damage: func(t *testing.T, dyn dynamic.Interface, ns string, chunks []string) string {
			edit(t, dyn.Resource(chunksGVR).Namespace(ns), chunks[0], func(obj *unstructured.Unstructured) {
				refs := obj.GetOwnerReferences()
				refs[0].UID = "0b1c2d3e-0000-4000-8000-000000000002"
				obj.SetOwnerReferences(refs)
			})
			return "itemopschunks/" + chunks[0]
		}},
		{name: "OrphanOfDeadCommit", want: "a sweep deletes it", chunks: 1, damage: func(t *testing.T, dyn dynamic.Interface, ns string, chunks []string) string {
			// A chunk of the run's number: its commit can no longer succeed.
			return "itemopschunks/" + copyChunk(func(label, seq string) string { return "c." + label + "." + seq + ".00000000000000aa" })(t, dyn, ns, chunks[0])
		}},
		{name: "OrphanInFlight", chunks: 1, damage: func(t *testing.T, dyn dynamic.Interface, ns string, chunks []string) string {
			// A chunk of the run's next number: a commit in flight may name it.
			copyChunk(func(label, seq string) string {
				return fmt.Sprintf("c.%s.%016x.00000000000000bb", label, mustHex(t, seq)+1)
			})(t, dyn, ns, chunks[0])
			return ""
		}},
		{name: "OrphanInFlightPastGrace", grace: true, want: "a sweep keeps it", chunks: 1, damage: func(t *testing.T, dyn dynamic.Interface, ns string, chunks []string) string {
			return "itemopschunks/" + copyChunk(func(label, seq string) string {
				return fmt.Sprintf("c.%s.%016x.00000000000000cc", label, mustHex(t, seq)+1)
			})(t, dyn, ns, chunks[0])
		}},
		{name: "OrphanOfGoneRun", want: "a sweep deletes it", chunks: 1, damage: func(t *testing.T, dyn dynamic.Interface, ns string, chunks []string) string {
			name := copyChunk(func(_, seq string) string { return "c." + strings.Repeat("e", 40) + "." + seq + ".00000000000000dd" })(t, dyn, ns, chunks[0])
			edit(t, dyn.Resource(chunksGVR).Namespace(ns), name, func(obj *unstructured.Unstructured) {
				obj.SetLabels(map[string]string{"itemops.io/role": "chunk", "itemops.io/run": strings.Repeat("e", 40)})
			})
			return "itemopschunks/" + name
		}},
		{name: "PendingPastGrace", grace: true, want: "a sweep deletes it", pending: 1, damage: pendingObject},
		{name: "PendingWithinGrace", pending: 1, damage: func(t *testing.T, dyn dynamic.Interface, ns string, chunks []string) string {
			pendingObject(t, dyn, ns, chunks)
			return ""
		}},
		{name: "ForeignChunk", want: "not a name the store gives", chunks: 1, damage: func(t *testing.T, dyn dynamic.Interface, ns string, _ []string) string {
			obj := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"seq": int64(1)}}}
			obj.SetAPIVersion(chunksGVR.GroupVersion().String())
			obj.SetKind("ItemopsChunk")
			obj.SetName("notes")
			if _, err := dyn.Resource(chunksGVR).Namespace(ns).Create(context.Background(), obj, metav1.CreateOptions{}); err != nil {
				t.Fatalf("create notes: %v", err)
			}
			return "itemopschunks/notes"
		}},
		{name: "RunCopied", want: "whose object is b.inline", runs: 1, damage: func(t *testing.T, dyn dynamic.Interface, ns string, _ []string) string {
			runs := dyn.Resource(runsGVR).Namespace(ns)
			obj, err := runs.Get(context.Background(), "b.inline", metav1.GetOptions{})
			if err != nil {
				t.Fatalf("get b.inline: %v", err)
			}
			obj.SetName("b.copy")
			obj.SetResourceVersion("")
			obj.SetUID("")
			if _, err := runs.Create(context.Background(), obj, metav1.CreateOptions{}); err != nil {
				t.Fatalf("create b.copy: %v", err)
			}
			return "itemopsruns/b.copy"
		}},
		{name: "FormatMarkerForeign", want: "names the store", damage: func(t *testing.T, dyn dynamic.Interface, ns string, _ []string) string {
			edit(t, dyn.Resource(chunksGVR).Namespace(ns), "itemops", func(obj *unstructured.Unstructured) {
				l := obj.GetLabels()
				l["itemops.io/store"] = "another"
				obj.SetLabels(l)
			})
			return "itemopschunks/itemops"
		}},
		{name: "FormatMarkerOfAnotherFormat", want: "whose format the engine checked", damage: func(t *testing.T, dyn dynamic.Interface, ns string, _ []string) string {
			edit(t, dyn.Resource(chunksGVR).Namespace(ns), "itemops", func(obj *unstructured.Unstructured) {
				seq, _, _ := unstructured.NestedInt64(obj.Object, "spec", "seq")
				unstructured.SetNestedField(obj.Object, formatData(t, uint64(seq), "itemops.kv/2"), "spec", "data")
			})
			return "itemopschunks/itemops"
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			s, cfg, ns := newStoreIn(t, spilling)
			chunks := seedCheck(t, s, cfg, ns)
			// The Store that checks has cached every chunk before the damage, and is
			// open before it: Open sweeps.
			c := openIn(t, ns, nil, nil)
			defer c.Close()
			listOps(t, c, operations.Owner{Kind: phase.Restore, Name: "spilled"})
			object := tc.damage(t, dynamic.NewForConfigOrDie(cfg), ns, chunks)
			if tc.grace {
				defer kubestore.SetPendingGrace(0)()
			}
			before := versions(t, cfg, ns)
			got, err := c.Check(ctx)
			if diff := cmp.Diff(before, versions(t, cfg, ns)); diff != "" {
				t.Errorf("Check changed the namespace (-before +after):\n%s", diff)
			}
			want := kubestore.CheckReport{Runs: 3 + tc.runs, Pending: tc.pending, Chunks: len(chunks) + tc.chunks}
			if got != want {
				t.Errorf("Check = %+v, want %+v", got, want)
			}
			if object == "" {
				if err != nil {
					t.Fatalf("Check: %v; want nil", err)
				}
				return
			}
			res, name, _ := strings.Cut(object, "/")
			named := fmt.Sprintf("%s %s/%s", res, ns, name)
			if !errors.Is(err, operations.ErrCorrupt) || !strings.Contains(err.Error(), named) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Check: %v; want ErrCorrupt naming %s, saying %q", err, named, tc.want)
			}
			if n := len(err.(interface{ Unwrap() []error }).Unwrap()); n != 1 {
				t.Errorf("Check reported %d problems, want 1: %v", n, err)
			}
		})
	}
}

// formatData returns the data of a format marker, as the store encodes its keys (a
// gzip of each key's length, the key, its version, the value's length and the value),
// holding the one key "format" at version ver with value format.
func formatData(t *testing.T, ver uint64, format string) string {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	var b []byte
	b = binary.AppendUvarint(b, uint64(len("format")))
	b = append(b, "format"...)
	b = binary.AppendUvarint(b, ver)
	b = binary.AppendUvarint(b, uint64(len(format)))
	b = append(b, format...)
	zw.Write(b)
	if err := zw.Close(); err != nil {
		t.Fatalf("gzip: %v", err)
	}
	return base64.StdEncoding.EncodeToString(buf.Bytes())
}

// mustHex returns the number that the hex digits s give.
func mustHex(t *testing.T, s string) uint64 {
	t.Helper()
	var n uint64
	if _, err := fmt.Sscanf(s, "%x", &n); err != nil {
		t.Fatalf("%q: %v", s, err)
	}
	return n
}

// pendingObject creates in namespace ns the pending object of the run Backup
// "pending", as the first commit of a run that spills creates it (see createPending),
// and returns its name.
func pendingObject(t *testing.T, dyn dynamic.Interface, ns string, _ []string) string {
	t.Helper()
	ctx := context.Background()
	marker, err := dyn.Resource(runsGVR).Namespace(ns).Get(ctx, "itemops", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get the runs' marker: %v", err)
	}
	id, _, _ := unstructured.NestedString(marker.Object, "status", "store", "identity")
	obj := &unstructured.Unstructured{Object: map[string]any{
		"spec":   map[string]any{"owner": map[string]any{"kind": "Backup", "name": "pending"}, "format": "itemops.kv/1"},
		"status": map[string]any{"store": map[string]any{"seq": int64(7), "identity": id}},
	}}
	obj.SetAPIVersion(runsGVR.GroupVersion().String())
	obj.SetKind("ItemopsRun")
	obj.SetName("b.pending")
	obj.SetLabels(map[string]string{"itemops.io/role": "pending", "itemops.io/kind": "Backup"})
	if _, err := dyn.Resource(runsGVR).Namespace(ns).Create(ctx, obj, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create b.pending: %v", err)
	}
	return "itemopsruns/b.pending"
}

// TestCheckFails checks through a Store whose LIST of the runs' objects the API server
// refuses (Forbidden), and with a context already ended: Check fails with that error,
// wrapped, and an empty report.
func TestCheckFails(t *testing.T) {
	ctx := context.Background()
	s, cfg, ns := newStoreIn(t, spilling)
	seedCheck(t, s, cfg, ns)
	f := &failing{refuse: true, fail: func(req *http.Request) bool {
		return req.Method == http.MethodGet && strings.HasSuffix(req.URL.Path, "/itemopsruns")
	}}
	c := openIn(t, ns, nil, func(rt http.RoundTripper) http.RoundTripper { f.next = rt; return f })
	defer c.Close()
	f.armed.Store(true)
	got, err := c.Check(ctx)
	f.armed.Store(false)
	if !apierrors.IsForbidden(err) || got != (kubestore.CheckReport{}) {
		t.Errorf("Check with its LIST refused = %+v, %v; want an empty report and Forbidden", got, err)
	}
	done, cancel := context.WithCancel(ctx)
	cancel()
	if got, err := c.Check(done); !errors.Is(err, context.Canceled) || got != (kubestore.CheckReport{}) {
		t.Errorf("Check with its context cancelled = %+v, %v; want an empty report and context.Canceled", got, err)
	}
	if got, err := c.Check(ctx); err != nil || got.Runs != 3 {
		t.Errorf("Check once nothing fails = %+v, %v; want 3 runs, sound", got, err)
	}
}

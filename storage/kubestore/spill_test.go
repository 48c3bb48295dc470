package kubestore_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/phase"
	"github.com/itemops/itemops/storage/kubestore"
)

var (
	runsGVR   = schema.GroupVersionResource{Group: kubestore.Group, Version: kubestore.Version, Resource: "itemopsruns"}
	chunksGVR = schema.GroupVersionResource{Group: kubestore.Group, Version: kubestore.Version, Resource: "itemopschunks"}
)

// t0 is the time of every record the tests here write.
var t0 = time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)

// testOps returns n operations of o, each with a description of its own that gzip does
// not shrink to nothing, in phase p.
func testOps(o operations.Owner, n int, p operations.OperationPhase) []operations.Operation {
	ops := make([]operations.Operation, n)
	for i := range ops {
		id := fmt.Sprintf("op-%05d", i)
		ops[i] = operations.Operation{
			Owner: o, Action: "example.io/snapshotter", ID: id,
			Resource: operations.ResourceIdentifier{Resource: "persistentvolumeclaims", Namespace: "app", Name: "data-" + id},
			Status: operations.Status{
				Phase: p, NCompleted: int64(i), NTotal: 10_000, Created: t0,
				Description: fmt.Sprintf("copying volume %x of %x", i*7919, i*104729),
			},
		}
	}
	return ops
}

// waitingRun returns a run of o waiting for its plugin operations.
func waitingRun(t testing.TB, o operations.Owner) operations.Run {
	t.Helper()
	r := operations.Run{Owner: o, Phase: phase.New, Created: t0, Updated: t0}
	if err := r.SetPhase(phase.WaitingForPluginOperations, "test", t0); err != nil {
		t.Fatalf("SetPhase: %v", err)
	}
	return r
}

// createWaiting creates through s the run of o, waiting for its operations ops, and
// returns the run as s reads it back and the run's object, named name, as runs (an
// administrator's client of the run objects) reads it.
func createWaiting(t testing.TB, s *kubestore.Store, runs dynamic.ResourceInterface, name string, o operations.Owner, ops []operations.Operation) (operations.Run, *unstructured.Unstructured) {
	t.Helper()
	ctx := context.Background()
	if err := s.CreateRunWithOperations(ctx, waitingRun(t, o), ops); err != nil {
		t.Fatalf("CreateRunWithOperations: %v", err)
	}
	run, err := s.GetRun(ctx, o)
	if err != nil {
		t.Fatalf("GetRun: %v", err)
	}
	obj, err := runs.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get the run's object %s: %v", name, err)
	}
	return run, obj
}

// count returns how many objects of res namespace ns holds.
func count(t testing.TB, cfg *rest.Config, res schema.GroupVersionResource, ns string) int {
	t.Helper()
	l, err := dynamic.NewForConfigOrDie(cfg).Resource(res).Namespace(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatalf("list %s: %v", res.Resource, err)
	}
	return len(l.Items)
}

// listOps returns the operations of o in s.
func listOps(t testing.TB, s operations.Store, o operations.Owner) []operations.Operation {
	t.Helper()
	ops, err := s.ListOperations(context.Background(), o, operations.OperationFilter{})
	if err != nil {
		t.Fatalf("ListOperations(%s): %v", o, err)
	}
	return ops
}

// TestTenThousandOperationsInOneRun stores 10,000 operations in one run with the default
// options, which spills them into chunks, reads them back, changes a hundred of them and
// reads them back again, each time as written.
func TestTenThousandOperationsInOneRun(t *testing.T) {
	ctx := context.Background()
	s, cfg, ns := newStoreIn(t, nil)
	o := operations.Owner{Kind: phase.Backup, Name: "big", UID: "uid-big"}
	ops := testOps(o, 10_000, operations.OperationInProgress)
	if err := s.CreateRunWithOperations(ctx, waitingRun(t, o), ops); err != nil {
		t.Fatalf("CreateRunWithOperations: %v", err)
	}
	if n := count(t, cfg, chunksGVR, ns); n < 3 { // the format marker and at least two chunks
		t.Fatalf("the namespace holds %d ItemopsChunks, want the marker and chunks", n)
	}
	if diff := cmp.Diff(ops, listOps(t, s, o), cmpopts.EquateEmpty()); diff != "" {
		t.Fatalf("ListOperations after the batch (-want +got):\n%s", diff)
	}
	var changed []operations.Operation
	for i := 0; i < len(ops); i += 100 {
		ops[i].Status.Phase = operations.OperationCompleted
		ops[i].Status.NCompleted = ops[i].Status.NTotal
		changed = append(changed, ops[i])
	}
	if err := s.PutOperations(ctx, o, changed); err != nil {
		t.Fatalf("PutOperations: %v", err)
	}
	if diff := cmp.Diff(ops, listOps(t, s, o), cmpopts.EquateEmpty()); diff != "" {
		t.Fatalf("ListOperations after the second batch (-want +got):\n%s", diff)
	}
}

// failing is an http.RoundTripper that fails the requests that match fail while armed,
// without sending them: with a transport error, whose outcome the store cannot know,
// or, when refuse is set, with 403 Forbidden, a definite refusal.
type failing struct {
	next   http.RoundTripper
	armed  atomic.Bool
	fail   func(*http.Request) bool
	refuse bool
}

var errInjected = errors.New("injected failure")

func (f *failing) RoundTrip(req *http.Request) (*http.Response, error) {
	if f.armed.Load() && f.fail(req) {
		if f.refuse {
			return statusResponse(req, http.StatusForbidden, "Forbidden"), nil
		}
		return nil, errInjected
	}
	return f.next.RoundTrip(req)
}

// isInjected reports whether err is the failure that f injects.
func (f *failing) isInjected(err error) bool {
	if f.refuse {
		return apierrors.IsForbidden(err)
	}
	return errors.Is(err, errInjected)
}

// isWrite reports whether req writes (verb) an object of resource (itemopsruns,
// itemopschunks).
func isWrite(req *http.Request, verb, resource string) bool {
	return req.Method == verb && strings.Contains(req.URL.Path, "/"+resource)
}

// TestFailedCommitPointLeavesNothingVisible fails the write of the run's object, the
// commit point, of a batch that spills: creating a run, and changing a spilled run,
// with the chunks the commit created deleted afterwards (the API server refused the
// write) or left behind (the write's outcome is unknown, or the writer died). Each time
// the store reads as before the commit.
func TestFailedCommitPointLeavesNothingVisible(t *testing.T) {
	for _, tc := range []struct {
		name string
		// deletes says whether the writer deletes its chunks after the failed write.
		deletes bool
	}{
		{"ChunksDeleted", true},
		{"ChunksLeftBehind", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			opts := &kubestore.Options{InlineBytes: 1 << 10, ChunkBytes: 16 << 10}
			check, cfg, ns := newStoreIn(t, opts)
			f := &failing{refuse: tc.deletes, fail: func(req *http.Request) bool {
				return isWrite(req, http.MethodPut, "itemopsruns") || !tc.deletes && isWrite(req, http.MethodDelete, "itemopschunks")
			}}
			s := openIn(t, ns, opts, func(rt http.RoundTripper) http.RoundTripper { f.next = rt; return f })

			fresh := operations.Owner{Kind: phase.Backup, Name: "fresh", UID: "uid-fresh"}
			f.armed.Store(true)
			err := s.CreateRunWithOperations(ctx, waitingRun(t, fresh), testOps(fresh, 1000, operations.OperationInProgress))
			f.armed.Store(false)
			if !f.isInjected(err) {
				t.Fatalf("CreateRunWithOperations with its commit point failing: %v, want the injected failure", err)
			}
			if _, err := check.GetRun(ctx, fresh); !errors.Is(err, operations.ErrNotFound) {
				t.Errorf("GetRun of the run whose creation failed: %v, want ErrNotFound", err)
			}
			runs, err := check.ListRuns(ctx, operations.RunFilter{})
			if err != nil || len(runs) != 0 {
				t.Errorf("ListRuns after the failed creation = %d runs, %v; want none", len(runs), err)
			}
			if ops, err := check.ListOperations(ctx, fresh, operations.OperationFilter{}); !errors.Is(err, operations.ErrNotFound) {
				t.Errorf("ListOperations of the run whose creation failed = %d operations, %v; want ErrNotFound", len(ops), err)
			}

			// The creation goes through once nothing fails, over what the failed one left.
			o := operations.Owner{Kind: phase.Backup, Name: "spilled", UID: "uid-spilled"}
			ops := testOps(o, 1000, operations.OperationInProgress)
			if err := s.CreateRunWithOperations(ctx, waitingRun(t, o), ops); err != nil {
				t.Fatalf("CreateRunWithOperations: %v", err)
			}
			chunks := count(t, cfg, chunksGVR, ns)
			changed := testOps(o, 1000, operations.OperationCompleted)
			f.armed.Store(true)
			err = s.PutOperations(ctx, o, changed)
			f.armed.Store(false)
			if !f.isInjected(err) {
				t.Fatalf("PutOperations with its commit point failing: %v, want the injected failure", err)
			}
			if diff := cmp.Diff(ops, listOps(t, check, o), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("ListOperations after the failed batch (-want +got):\n%s", diff)
			}
			switch n := count(t, cfg, chunksGVR, ns); {
			case tc.deletes && n != chunks:
				t.Errorf("the failed batch left %d ItemopsChunks, want the %d from before it", n, chunks)
			case !tc.deletes && n <= chunks:
				t.Errorf("the failed batch left %d ItemopsChunks, want more than the %d from before it (its own)", n, chunks)
			}
			if err := s.PutOperations(ctx, o, changed); err != nil {
				t.Fatalf("PutOperations: %v", err)
			}
			if diff := cmp.Diff(changed, listOps(t, check, o), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("ListOperations after the batch (-want +got):\n%s", diff)
			}

			// A sweep deletes what the failed commits left: the object of the run whose
			// creation failed, and every chunk that no run's object names.
			defer kubestore.SetPendingGrace(0)()
			before := count(t, cfg, chunksGVR, ns) + count(t, cfg, runsGVR, ns)
			n, err := check.Sweep(ctx)
			if err != nil {
				t.Fatalf("Sweep: %v", err)
			}
			wantChunks := 1 + len(namedChunks(t, cfg, ns, "b.spilled")) // and the format marker
			if got := count(t, cfg, chunksGVR, ns); got != wantChunks {
				t.Errorf("after the sweep the namespace holds %d ItemopsChunks, want %d: the marker and the chunks the run's object names", got, wantChunks)
			}
			if got := count(t, cfg, runsGVR, ns); got != 2 {
				t.Errorf("after the sweep the namespace holds %d ItemopsRuns, want 2: the run's and the runs' marker", got)
			}
			if want := before - wantChunks - 2; n != want {
				t.Errorf("Sweep = %d, want %d, the objects it deleted", n, want)
			}
			if diff := cmp.Diff(changed, listOps(t, openIn(t, ns, nil, nil), o), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("ListOperations after the sweep (-want +got):\n%s", diff)
			}
		})
	}
}

// namedChunks returns the names of the chunks that the run's object called name, in
// namespace ns, names.
func namedChunks(t testing.TB, cfg *rest.Config, ns, name string) []string {
	t.Helper()
	head, err := dynamic.NewForConfigOrDie(cfg).Resource(runsGVR).Namespace(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get %s: %v", name, err)
	}
	refs, _, _ := unstructured.NestedSlice(head.Object, "status", "store", "chunks")
	var names []string
	for _, r := range refs {
		names = append(names, r.(map[string]any)["name"].(string))
	}
	return names
}

// openIn opens another Store as storeUser, with no chunk cached, in namespace ns (made
// by newStoreIn) with options o, through a client whose transport wrap wraps (when wrap
// is not nil).
func openIn(t testing.TB, ns string, o *kubestore.Options, wrap func(http.RoundTripper) http.RoundTripper) *kubestore.Store {
	t.Helper()
	cfg := userConfig(t)
	if wrap != nil {
		cfg.WrapTransport = wrap
	}
	s, err := kubestore.Open(context.Background(), cfg, ns, o)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return s
}

// gated is an http.RoundTripper that holds the writes of runs' objects while armed:
// each tells reached, then waits for release.
type gated struct {
	next    http.RoundTripper
	armed   atomic.Bool
	reached chan struct{}
	release chan struct{}
}

func (g *gated) RoundTrip(req *http.Request) (*http.Response, error) {
	if g.armed.Load() && (isWrite(req, http.MethodPut, "itemopsruns") || isWrite(req, http.MethodPost, "itemopsruns")) {
		g.reached <- struct{}{}
		<-g.release
	}
	return g.next.RoundTrip(req)
}

// failsCommitPoint reports whether req writes a run's object or deletes a chunk: failing
// these fails a commit at its commit point and leaves its chunks behind.
func failsCommitPoint(req *http.Request) bool {
	return isWrite(req, http.MethodPut, "itemopsruns") || isWrite(req, http.MethodDelete, "itemopschunks")
}

// leaveOrphans creates a run of o, with 500 new operations, through w, whose transport
// f fails as failsCommitPoint says while armed. It fails a commit of the run at its
// commit point, so that the commit's chunks stay behind, then commits again, so that
// no commit to come can name them.
func leaveOrphans(t *testing.T, w *kubestore.Store, f *failing, o operations.Owner) {
	t.Helper()
	ctx := context.Background()
	if err := w.CreateRunWithOperations(ctx, waitingRun(t, o), testOps(o, 500, operations.OperationNew)); err != nil {
		t.Fatalf("CreateRunWithOperations: %v", err)
	}
	f.armed.Store(true)
	err := w.PutOperations(ctx, o, testOps(o, 500, operations.OperationInProgress))
	f.armed.Store(false)
	if !errors.Is(err, errInjected) {
		t.Fatalf("PutOperations with its commit point failing: %v, want the injected failure", err)
	}
	if _, err := w.UpdateRun(ctx, o, func(r *operations.Run) error { r.ItemsDone++; return nil }); err != nil {
		t.Fatalf("UpdateRun: %v", err)
	}
}

// TestSweepSparesCommitsInFlight sweeps while a commit of another Store has created its
// chunks and not yet written the run's object: a change of a spilled run, and the
// creation of one, whose pending object is younger than the grace (kept) or older
// (deleted, and made again by the commit). The sweep deletes the chunks a failed commit
// left, and nothing the commit in flight will name: each commit succeeds, and a Store
// with no chunk cached reads what it wrote.
func TestSweepSparesCommitsInFlight(t *testing.T) {
	for _, tc := range []struct {
		name string
		// create says whether the commit in flight creates the run.
		create bool
		// expired says whether its pending object is older than the grace.
		expired bool
	}{
		{"Change", false, false},
		{"Create", true, false},
		{"CreateExpired", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			opts := &kubestore.Options{InlineBytes: 1 << 10, ChunkBytes: 16 << 10}
			sweeper, cfg, ns := newStoreIn(t, opts)
			f := &failing{fail: failsCommitPoint}
			g := &gated{next: f, reached: make(chan struct{}), release: make(chan struct{})}
			w := openIn(t, ns, opts, func(rt http.RoundTripper) http.RoundTripper { f.next = rt; return g })
			o := operations.Owner{Kind: phase.Backup, Name: "spilled", UID: "uid-spilled"}
			leaveOrphans(t, w, f, o)
			named := len(namedChunks(t, cfg, ns, "b.spilled"))
			orphans := count(t, cfg, chunksGVR, ns) - 1 - named
			if orphans == 0 {
				t.Fatalf("the failed commit left no chunk behind")
			}

			target, want := o, testOps(o, 500, operations.OperationCompleted)
			commit := func() error { return w.PutOperations(ctx, o, want) }
			if tc.create {
				target = operations.Owner{Kind: phase.Backup, Name: "fresh", UID: "uid-fresh"}
				want = testOps(target, 500, operations.OperationNew)
				commit = func() error { return w.CreateRunWithOperations(ctx, waitingRun(t, target), want) }
			}
			g.armed.Store(true)
			done := make(chan error)
			go func() { done <- commit() }()
			if tc.create {
				<-g.reached // the pending object's creation
				g.release <- struct{}{}
			}
			<-g.reached // the commit point, after the chunks
			if tc.expired {
				defer kubestore.SetPendingGrace(0)()
			}
			n, err := sweeper.Sweep(ctx)
			if err != nil {
				t.Fatalf("Sweep: %v", err)
			}
			if tc.expired {
				// The commit point fails on the pending object's deletion; the commit
				// makes it again and writes it.
				go func() {
					for range g.reached {
						g.release <- struct{}{}
					}
				}()
				defer close(g.reached)
			}
			g.release <- struct{}{}
			if err := <-done; err != nil {
				t.Fatalf("the commit in flight during the sweep: %v", err)
			}
			g.armed.Store(false)
			wantDeleted := orphans
			if tc.expired {
				wantDeleted = -1 // the pending object and its chunks too, as many as there were
			}
			if wantDeleted >= 0 && n != wantDeleted {
				t.Errorf("Sweep = %d, want %d, the chunks the failed commit left", n, wantDeleted)
			}
			if tc.expired && n <= orphans+1 {
				t.Errorf("Sweep = %d, want the %d chunks the failed commit left, the pending object and its chunks", n, orphans)
			}
			if diff := cmp.Diff(want, listOps(t, openIn(t, ns, nil, nil), target), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("ListOperations of the commit made during the sweep (-want +got):\n%s", diff)
			}
		})
	}
}

// counting is an http.RoundTripper that counts the GETs of ItemopsChunks other than
// the format marker.
type counting struct {
	next http.RoundTripper
	gets atomic.Int64
}

func (c *counting) RoundTrip(req *http.Request) (*http.Response, error) {
	if isWrite(req, http.MethodGet, "itemopschunks") && !strings.HasSuffix(req.URL.Path, "/itemops") {
		c.gets.Add(1)
	}
	return c.next.RoundTrip(req)
}

// openCounting opens the store in namespace ns of cfg with options o, through a client
// that counts its GETs of chunks.
func openCounting(t testing.TB, cfg *rest.Config, ns string, o *kubestore.Options) (*kubestore.Store, *counting) {
	t.Helper()
	c := &counting{}
	return openIn(t, ns, o, func(rt http.RoundTripper) http.RoundTripper { c.next = rt; return c }), c
}

// TestChunkCache reads a spilled run through Stores with and without a chunk cache: with
// one, a Store fetches each chunk once, and none that it wrote itself; without, every
// read fetches every chunk. Each read returns the operations as written.
func TestChunkCache(t *testing.T) {
	ctx := context.Background()
	opts := kubestore.Options{InlineBytes: 1 << 10, ChunkBytes: 16 << 10}
	_, cfg, ns := newStoreIn(t, &opts)
	writer, wrote := openCounting(t, cfg, ns, &opts)
	o := operations.Owner{Kind: phase.Backup, Name: "cached", UID: "uid-cached"}
	ops := testOps(o, 1000, operations.OperationInProgress)
	if err := writer.CreateRunWithOperations(ctx, waitingRun(t, o), ops); err != nil {
		t.Fatalf("CreateRunWithOperations: %v", err)
	}
	chunks := int64(count(t, cfg, chunksGVR, ns) - 1) // less the format marker
	if chunks < 2 {
		t.Fatalf("the run has %d chunks, want several", chunks)
	}
	uncached := opts
	uncached.ChunkCacheBytes = -1
	reader, read := openCounting(t, cfg, ns, &opts)
	bare, readBare := openCounting(t, cfg, ns, &uncached)
	for _, tc := range []struct {
		name    string
		s       *kubestore.Store
		c       *counting
		perRead []int64 // chunk GETs of each of three reads
	}{
		{"Writer", writer, wrote, []int64{0, 0, 0}},
		{"Reader", reader, read, []int64{chunks, 0, 0}},
		{"NoCache", bare, readBare, []int64{chunks, chunks, chunks}},
	} {
		for i, want := range tc.perRead {
			before := tc.c.gets.Load()
			if diff := cmp.Diff(ops, listOps(t, tc.s, o), cmpopts.EquateEmpty()); diff != "" {
				t.Fatalf("%s: ListOperations %d (-want +got):\n%s", tc.name, i, diff)
			}
			if got := tc.c.gets.Load() - before; got != want {
				t.Errorf("%s: ListOperations %d fetched %d chunks, want %d of the run's %d", tc.name, i, got, want, chunks)
			}
		}
	}
}

// BenchmarkSpilledRead lists the 2,000 operations of a run spilled into chunks of 16 KiB,
// through a Store whose cache holds them (Cached) and through one without a cache
// (Uncached), the baseline.
func BenchmarkSpilledRead(b *testing.B) {
	ctx := context.Background()
	opts := kubestore.Options{InlineBytes: 1 << 10, ChunkBytes: 16 << 10}
	s, cfg, ns := newStoreIn(b, &opts)
	o := operations.Owner{Kind: phase.Backup, Name: "bench", UID: "uid-bench"}
	ops := testOps(o, 2000, operations.OperationInProgress)
	if err := s.CreateRunWithOperations(ctx, waitingRun(b, o), ops); err != nil {
		b.Fatalf("CreateRunWithOperations: %v", err)
	}
	for _, bc := range []struct {
		name  string
		cache int
	}{{"Uncached", -1}, {"Cached", 0}} {
		b.Run(bc.name, func(b *testing.B) {
			o2 := opts
			o2.ChunkCacheBytes = bc.cache
			s, c := openCounting(b, cfg, ns, &o2)
			if got := listOps(b, s, o); len(got) != len(ops) {
				b.Fatalf("ListOperations returned %d operations, want %d", len(got), len(ops))
			}
			before := c.gets.Load()
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				if _, err := s.ListOperations(ctx, o, operations.OperationFilter{}); err != nil {
					b.Fatalf("ListOperations: %v", err)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(c.gets.Load()-before)/float64(b.N), "chunkGETs/op")
		})
	}
}

// TestSweepLeavesDamagedRuns sweeps a namespace where a failed commit left chunks of a
// run whose object was then edited by hand: the sweep fails with operations.ErrCorrupt
// naming the object, and deletes none of the run's chunks; a sweep whose context has
// ended fails with its error.
func TestSweepLeavesDamagedRuns(t *testing.T) {
	ctx := context.Background()
	opts := &kubestore.Options{InlineBytes: 1 << 10, ChunkBytes: 16 << 10}
	sweeper, cfg, ns := newStoreIn(t, opts)
	f := &failing{fail: failsCommitPoint}
	w := openIn(t, ns, opts, func(rt http.RoundTripper) http.RoundTripper { f.next = rt; return f })
	o := operations.Owner{Kind: phase.Backup, Name: "spilled", UID: "uid-spilled"}
	leaveOrphans(t, w, f, o)
	runs := dynamic.NewForConfigOrDie(cfg).Resource(runsGVR).Namespace(ns)
	head, err := runs.Get(ctx, "b.spilled", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get the run's object: %v", err)
	}
	unstructured.SetNestedField(head.Object, string(phase.New), "status", "phase")
	if _, err := runs.Update(ctx, head, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("edit the run's object: %v", err)
	}
	chunks := count(t, cfg, chunksGVR, ns)
	if chunks <= 1+len(namedChunks(t, cfg, ns, "b.spilled")) {
		t.Fatalf("the failed commit left no chunk behind")
	}
	n, err := sweeper.Sweep(ctx)
	if !errors.Is(err, operations.ErrCorrupt) || !strings.Contains(err.Error(), ns+"/b.spilled") {
		t.Errorf("Sweep of a namespace with a damaged run's object = %d, %v; want ErrCorrupt naming %s/b.spilled", n, err, ns)
	}
	if got := count(t, cfg, chunksGVR, ns); n != 0 || got != chunks {
		t.Errorf("Sweep deleted %d objects, and left %d of the %d ItemopsChunks; want none deleted", n, got, chunks)
	}
	done, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := sweeper.Sweep(done); !errors.Is(err, context.Canceled) {
		t.Errorf("Sweep with its context cancelled: %v, want context.Canceled", err)
	}
}

// TestDeleteRunDeletesChunks deletes spilled runs. DeleteRun deletes a run's chunks
// itself once the run's object is gone (the test's API server runs no garbage
// collector, so nothing else does), and none of another run. When the object's DELETE
// fails without an answer, the object may still be there and name them: the chunks
// stay, and the run reads as before.
func TestDeleteRunDeletesChunks(t *testing.T) {
	ctx := context.Background()
	small := &kubestore.Options{InlineBytes: 8 << 10, ChunkBytes: 16 << 10}
	s, cfg, ns := newStoreIn(t, small)
	f := &failing{fail: func(req *http.Request) bool { return isWrite(req, http.MethodDelete, "itemopsruns") }}
	lossy := openIn(t, ns, small, func(rt http.RoundTripper) http.RoundTripper { f.next = rt; return f })
	defer lossy.Close()
	owners := []operations.Owner{
		{Kind: phase.Backup, Name: "spilled", UID: "uid-spilled"},
		{Kind: phase.Backup, Name: "kept", UID: "uid-kept"},
	}
	for _, o := range owners {
		if err := s.CreateRunWithOperations(ctx, waitingRun(t, o), testOps(o, 2_000, operations.OperationInProgress)); err != nil {
			t.Fatalf("CreateRunWithOperations(%s): %v", o, err)
		}
	}
	all := count(t, cfg, chunksGVR, ns)
	if all < 5 { // the format marker and at least two chunks of each run
		t.Fatalf("the namespace holds %d ItemopsChunks, want the marker and each run's chunks", all)
	}

	f.armed.Store(true)
	err := lossy.DeleteRun(ctx, owners[0])
	f.armed.Store(false)
	if !f.isInjected(err) {
		t.Fatalf("DeleteRun with its DELETE failed: %v, want the injected failure", err)
	}
	if n := count(t, cfg, chunksGVR, ns); n != all {
		t.Fatalf("after a DELETE that got no answer: %d ItemopsChunks, want the %d there were", n, all)
	}
	if got := listOps(t, s, owners[0]); len(got) != 2_000 {
		t.Fatalf("after a DELETE that got no answer: %d operations, want 2,000", len(got))
	}

	if err := s.DeleteRun(ctx, owners[0]); err != nil {
		t.Fatalf("DeleteRun: %v", err)
	}
	left := count(t, cfg, chunksGVR, ns)
	if left >= all || left < 3 {
		t.Fatalf("after DeleteRun: %d ItemopsChunks of %d, want those of the other run and the marker", left, all)
	}
	if got := listOps(t, s, owners[1]); len(got) != 2_000 {
		t.Fatalf("the other run after DeleteRun: %d operations, want 2,000", len(got))
	}
	if err := s.DeleteRun(ctx, owners[1]); err != nil {
		t.Fatalf("DeleteRun: %v", err)
	}
	if n := count(t, cfg, chunksGVR, ns); n != 1 {
		t.Fatalf("after both runs were deleted: %d ItemopsChunks, want the format marker alone", n)
	}
}

package kubestore_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"

	"github.com/itemops/itemops/internal/testutil/scalebench"
	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/phase"
	"github.com/itemops/itemops/storage/kubestore"
)

// waiting is the filter of a Monitor's pass.
var waiting = operations.RunFilter{Phases: []phase.Phase{phase.WaitingForPluginOperations}}

// A request is what recorder saw of one: its verb (LIST for a GET of a collection),
// the resource and the object's name, empty for a collection.
type request struct{ verb, resource, name string }

func (r request) String() string { return strings.TrimSuffix(r.verb+" "+r.resource+"/"+r.name, "/") }

// recorder records the requests of the store's resources that a client sends through
// it. While expire is above 0, it answers a LIST that asks for a next page (continue=)
// with 410 Gone, reason Expired, as the API server answers one whose snapshot etcd has
// compacted, and counts it down; before, when set, is called with each request before
// it is sent.
type recorder struct {
	next   http.RoundTripper
	expire atomic.Int64
	before func(request)

	mu   sync.Mutex // guards reqs
	reqs []request
}

func (r *recorder) wrap(rt http.RoundTripper) http.RoundTripper { r.next = rt; return r }

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	_, rest, ok := strings.Cut(req.URL.Path, "/apis/"+kubestore.Group+"/")
	if !ok {
		return r.next.RoundTrip(req)
	}
	parts := strings.Split(rest, "/") // version, namespaces, ns, resource[, name]
	rq := request{verb: req.Method}
	if len(parts) >= 4 {
		rq.resource = parts[3]
	}
	if len(parts) >= 5 {
		rq.name = parts[4]
	}
	if rq.verb == http.MethodGet && rq.name == "" {
		rq.verb = "LIST"
	}
	r.mu.Lock()
	r.reqs = append(r.reqs, rq)
	r.mu.Unlock()
	if r.before != nil {
		r.before(rq)
	}
	if rq.verb == "LIST" && req.URL.Query().Get("continue") != "" && r.expire.Load() > 0 {
		r.expire.Add(-1)
		return statusResponse(req, http.StatusGone, "Expired"), nil
	}
	return r.next.RoundTrip(req)
}

// since returns the requests recorded after the first n.
func (r *recorder) since(n int) []request {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.reqs[n:])
}

// mark returns how many requests r has recorded.
func (r *recorder) mark() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.reqs)
}

// readPass returns the runs of s that a pass selects, by owner name, and the names in
// each page.
func readPass(t testing.TB, s *kubestore.Store) (map[string]operations.PassRun, [][]string) {
	t.Helper()
	runs := map[string]operations.PassRun{}
	var pages [][]string
	err := s.ReadPass(context.Background(), waiting, func(page []operations.PassRun) error {
		var names []string
		for _, pr := range page {
			if _, dup := runs[pr.Run.Owner.Name]; dup {
				t.Errorf("ReadPass gave the run %s twice", pr.Run.Owner.Name)
			}
			runs[pr.Run.Owner.Name] = pr
			names = append(names, pr.Run.Owner.Name)
		}
		pages = append(pages, names)
		return nil
	})
	if err != nil {
		t.Fatalf("ReadPass: %v", err)
	}
	return runs, pages
}

// advanced returns ops with the progress of each moved on by n.
func advanced(ops []operations.Operation, n int64) []operations.Operation {
	out := slices.Clone(ops)
	for i := range out {
		out[i].Status.NCompleted += n
	}
	return out
}

// TestPassCost reads a pass over six waiting runs, three of them spilled
// (InlineBytes 1 KiB, ChunkBytes 16 KiB), and commits every operation of four: the
// read costs one GET of the format marker and one LIST, and each commit one PUT of the
// run's object, beside, for a spilled run, the creation of its new chunks and the
// deletion of those they replace; the runs not committed cost nothing. A fresh Store
// reads what was committed, and a pass with no change costs the GET and the LIST alone.
func TestPassCost(t *testing.T) {
	ctx := context.Background()
	opts := &kubestore.Options{InlineBytes: 1 << 10, ChunkBytes: 16 << 10}
	_, cfg, ns := newStoreIn(t, opts)
	rec := &recorder{}
	s := openIn(t, ns, opts, rec.wrap)
	const n, committed = 6, 4
	want := map[string][]operations.Operation{}
	for i := range n {
		o := operations.Owner{Kind: phase.Backup, Name: fmt.Sprintf("run%d", i), UID: fmt.Sprintf("uid-%d", i)}
		size := 3
		if i%2 == 1 {
			size = 300
		}
		want[o.Name] = testOps(o, size, operations.OperationInProgress)
		if err := s.CreateRunWithOperations(ctx, waitingRun(t, o), want[o.Name]); err != nil {
			t.Fatalf("CreateRunWithOperations: %v", err)
		}
		if spilled := len(namedChunks(t, cfg, ns, "b."+o.Name)) > 0; spilled != (i%2 == 1) {
			t.Fatalf("run %s spilled: %v, want %v", o.Name, spilled, i%2 == 1)
		}
	}

	mark := rec.mark()
	runs, _ := readPass(t, s)
	if diff := cmp.Diff([]request{{"GET", "itemopschunks", "itemops"}, {"LIST", "itemopsruns", ""}}, rec.since(mark), cmp.AllowUnexported(request{})); diff != "" {
		t.Errorf("requests of ReadPass (-want +got):\n%s", diff)
	}
	if len(runs) != n {
		t.Fatalf("ReadPass gave %d runs, want %d", len(runs), n)
	}
	for name, pr := range runs {
		if diff := cmp.Diff(want[name], pr.Operations, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("operations of %s as ReadPass read them (-want +got):\n%s", name, diff)
		}
	}

	wantPuts := map[string]int{}
	var retired, made int // chunks of the committed runs that the commits replaced, and made
	mark = rec.mark()
	for i := range committed {
		name := fmt.Sprintf("run%d", i)
		before := namedChunks(t, cfg, ns, "b."+name)
		want[name] = advanced(want[name], 1000)
		if err := s.CommitPass(ctx, runs[name], want[name]); err != nil {
			t.Fatalf("CommitPass of %s: %v", name, err)
		}
		wantPuts["b."+name] = 1
		after := namedChunks(t, cfg, ns, "b."+name)
		for _, c := range before {
			if !slices.Contains(after, c) {
				retired++
			}
		}
		for _, c := range after {
			if !slices.Contains(before, c) {
				made++
			}
		}
	}
	got := rec.since(mark)
	puts := map[string]int{}
	var posts, deletes int
	for _, r := range got {
		switch {
		case r.verb == "PUT" && r.resource == "itemopsruns":
			puts[r.name]++
		case r.verb == "POST" && r.resource == "itemopschunks":
			posts++
		case r.verb == "DELETE" && r.resource == "itemopschunks":
			deletes++
		default:
			t.Errorf("CommitPass sent %s, want only a PUT of the run's object and the chunks' POSTs and DELETEs", r)
		}
	}
	if diff := cmp.Diff(wantPuts, puts); diff != "" {
		t.Errorf("PUTs of runs' objects by CommitPass (-want +got):\n%s", diff)
	}
	if posts != made || deletes != retired || made == 0 {
		t.Errorf("CommitPass created %d chunks and deleted %d; want the %d chunks the spilled runs name anew created, and the %d they no longer name deleted", posts, deletes, made, retired)
	}
	t.Logf("%d runs committed: %d requests (%d chunks created, %d deleted)", committed, len(got), posts, deletes)

	fresh := openIn(t, ns, nil, nil)
	for name, ops := range want {
		o := operations.Owner{Kind: phase.Backup, Name: name}
		if diff := cmp.Diff(ops, listOps(t, fresh, o), cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("operations of %s through a fresh Store (-want +got):\n%s", name, diff)
		}
	}

	mark = rec.mark()
	if runs, _ := readPass(t, s); len(runs) != n {
		t.Errorf("the second ReadPass gave %d runs, want %d", len(runs), n)
	}
	if got := rec.since(mark); len(got) != 2 {
		t.Errorf("a pass with no change sent %v, want the GET of the marker and the LIST", got)
	}
}

// TestPassListExpired reads a pass in LIST pages of two objects, whose snapshot has
// expired (410 Gone) when the pass asks for its second page: the pass LISTs again from
// the start and gives every run once, in order, and no run twice. ListRuns, which
// holds no page for long, fails with the 410, and so does a pass whose LIST, begun
// again, expires before it gives a new run.
func TestPassListExpired(t *testing.T) {
	ctx := context.Background()
	defer kubestore.SetListPage(2)()
	rec := &recorder{}
	_, _, ns := newStoreIn(t, nil)
	s := openIn(t, ns, nil, rec.wrap)
	for i := range 7 {
		o := operations.Owner{Kind: phase.Backup, Name: fmt.Sprintf("run%d", i), UID: fmt.Sprintf("uid-%d", i)}
		if err := s.CreateRunWithOperations(ctx, waitingRun(t, o), testOps(o, 2, operations.OperationInProgress)); err != nil {
			t.Fatalf("CreateRunWithOperations: %v", err)
		}
	}
	mark := rec.mark()
	first := true
	var pages [][]string
	err := s.ReadPass(ctx, waiting, func(page []operations.PassRun) error {
		var names []string
		for _, pr := range page {
			names = append(names, pr.Run.Owner.Name)
		}
		pages = append(pages, names)
		if first {
			rec.expire.Store(1) // the Monitor polls the page for longer than etcd keeps its revision
			first = false
		}
		return nil
	})
	if err != nil {
		t.Fatalf("ReadPass whose LIST expired between pages: %v", err)
	}
	// The objects, in the LIST's order: b.run0 … b.run6, then the runs' marker.
	want := [][]string{{"run0", "run1"}, {"run2", "run3"}, {"run4", "run5"}, {"run6"}}
	if diff := cmp.Diff(want, pages); diff != "" {
		t.Errorf("pages of ReadPass (-want +got):\n%s", diff)
	}
	lists := 0
	for _, r := range rec.since(mark) {
		if r.verb == "LIST" {
			lists++
		}
	}
	// Four pages, the one that expired, and the first page again.
	if lists != 6 {
		t.Errorf("ReadPass sent %d LISTs, want 6", lists)
	}
	if rec.expire.Load() != 0 {
		t.Errorf("no LIST asked for a next page")
	}

	rec.expire.Store(1)
	if _, err := s.ListRuns(ctx, waiting); !apierrors.IsResourceExpired(err) {
		t.Errorf("ListRuns whose LIST expired: %v, want 410 Gone (Expired)", err)
	}

	// A LIST begun again that expires before it gives a new run fails the pass.
	rec.expire.Store(0)
	first = true
	err = s.ReadPass(ctx, waiting, func([]operations.PassRun) error {
		if first {
			rec.expire.Store(2)
			first = false
		}
		return nil
	})
	if !apierrors.IsResourceExpired(err) {
		t.Errorf("ReadPass whose LIST expired twice in a row: %v, want 410 Gone (Expired)", err)
	}
}

// TestPassStale changes runs through another Store between ReadPass and CommitPass (its
// record by UpdateRun, its operations by PutOperations, inline and spilled): the
// CommitPass of each fails with ErrStale, and a fresh Store reads each as the other
// Store left it; a run left alone is committed.
func TestPassStale(t *testing.T) {
	ctx := context.Background()
	opts := &kubestore.Options{InlineBytes: 1 << 10, ChunkBytes: 16 << 10}
	s, _, ns := newStoreIn(t, opts)
	w := openIn(t, ns, opts, nil)
	sizes := map[string]int{"updated": 3, "updatedspilled": 300, "put": 3, "putspilled": 300, "kept": 300}
	want := map[string][]operations.Operation{}
	owner := func(name string) operations.Owner {
		return operations.Owner{Kind: phase.Backup, Name: name, UID: "uid-" + name}
	}
	for name, size := range sizes {
		o := owner(name)
		want[name] = testOps(o, size, operations.OperationInProgress)
		if err := s.CreateRunWithOperations(ctx, waitingRun(t, o), want[name]); err != nil {
			t.Fatalf("CreateRunWithOperations: %v", err)
		}
	}
	runs, _ := readPass(t, s)
	records := map[string]operations.Run{}
	for _, name := range []string{"updated", "updatedspilled"} {
		r, err := w.UpdateRun(ctx, owner(name), func(r *operations.Run) error { r.ItemsDone++; return nil })
		if err != nil {
			t.Fatalf("UpdateRun: %v", err)
		}
		records[name] = r
	}
	for _, name := range []string{"put", "putspilled"} {
		changed := slices.Clone(want[name][:1])
		changed[0].Status.NCompleted += 7
		if err := w.PutOperations(ctx, owner(name), changed); err != nil {
			t.Fatalf("PutOperations: %v", err)
		}
		want[name][0] = changed[0]
	}
	for name := range sizes {
		err := s.CommitPass(ctx, runs[name], advanced(runs[name].Operations, 1000))
		switch {
		case name == "kept" && err != nil:
			t.Errorf("CommitPass of the run left alone: %v", err)
		case name == "kept":
			want[name] = advanced(want[name], 1000)
		case !errors.Is(err, operations.ErrStale):
			t.Errorf("CommitPass of %s, changed since ReadPass: %v, want ErrStale", name, err)
		}
	}
	fresh := openIn(t, ns, nil, nil)
	for name := range sizes {
		if diff := cmp.Diff(want[name], listOps(t, fresh, owner(name)), cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("operations of %s through a fresh Store (-want +got):\n%s", name, diff)
		}
	}
	for name, r := range records {
		got, err := fresh.GetRun(ctx, owner(name))
		if err != nil || got.ItemsDone != r.ItemsDone {
			t.Errorf("GetRun(%s) = ItemsDone %d, %v; want %d, as UpdateRun left it", name, got.ItemsDone, err, r.ItemsDone)
		}
	}
}

// TestPassReadsChunks reads a pass through a Store that has cached no chunk: a spilled
// run whose chunks another Store replaces between the pass's LIST and its GET of the
// first chunk is read again, and given as changed, and its CommitPass goes through; a
// chunk deleted from an unchanged run's object fails the pass with ErrCorrupt.
func TestPassReadsChunks(t *testing.T) {
	ctx := context.Background()
	opts := &kubestore.Options{InlineBytes: 1 << 10, ChunkBytes: 16 << 10}
	w, cfg, ns := newStoreIn(t, opts)
	o := operations.Owner{Kind: phase.Backup, Name: "spilled", UID: "uid-spilled"}
	ops := testOps(o, 300, operations.OperationInProgress)
	if err := w.CreateRunWithOperations(ctx, waitingRun(t, o), ops); err != nil {
		t.Fatalf("CreateRunWithOperations: %v", err)
	}
	changed := advanced(ops, 3)
	rec := &recorder{}
	var once sync.Once
	rec.before = func(r request) {
		if r.verb == "GET" && r.resource == "itemopschunks" && r.name != "itemops" {
			once.Do(func() {
				if err := w.PutOperations(ctx, o, changed); err != nil {
					t.Errorf("PutOperations: %v", err)
				}
			})
		}
	}
	s := openIn(t, ns, opts, rec.wrap)
	runs, _ := readPass(t, s)
	if diff := cmp.Diff(changed, runs["spilled"].Operations, cmpopts.EquateEmpty()); diff != "" {
		t.Fatalf("operations that ReadPass read of a run changed under it (-want +got):\n%s", diff)
	}
	if err := s.CommitPass(ctx, runs["spilled"], advanced(changed, 1)); err != nil {
		t.Fatalf("CommitPass: %v", err)
	}
	if diff := cmp.Diff(advanced(changed, 1), listOps(t, openIn(t, ns, nil, nil), o), cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("operations through a fresh Store (-want +got):\n%s", diff)
	}

	chunks := dynamic.NewForConfigOrDie(cfg).Resource(chunksGVR).Namespace(ns)
	if err := chunks.Delete(ctx, namedChunks(t, cfg, ns, "b.spilled")[0], metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete a chunk: %v", err)
	}
	err := openIn(t, ns, nil, nil).ReadPass(ctx, waiting, func([]operations.PassRun) error { return nil })
	if !errors.Is(err, operations.ErrCorrupt) {
		t.Errorf("ReadPass of a run whose chunk is gone: %v, want ErrCorrupt", err)
	}
}

// TestPassLostAnswer commits a pass's change of a spilled run (InlineBytes 1 KiB,
// ChunkBytes 16 KiB, 300 operations) through a client that loses the outcome of the
// write of the run's object, as TestLostAnswerKeepsRun does. CommitPass fails; after a
// 409 that answers a write that was applied, with ErrStale, as a CommitPartition that
// reads the run again fails. A fresh Store reads the run as the outcome left it; a
// refused write leaves no chunk behind. The same CommitPass again succeeds where the
// write was not applied and fails with ErrStale where it was; either way a fresh Store
// then reads the change, and a sweep leaves only the chunks the run's object names.
func TestPassLostAnswer(t *testing.T) {
	for _, tc := range lostAnswerModes {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			cfg, ns, l, w, o, ops := spilledBehindLostAnswer(t, tc.mode)
			chunks := count(t, cfg, chunksGVR, ns)
			runs, _ := readPass(t, w)
			changed := advanced(ops, 5000)
			l.armed.Store(true)
			err := w.CommitPass(ctx, runs["spilled"], changed)
			l.armed.Store(false)
			t.Logf("CommitPass whose answer was lost: %v", err)
			switch {
			case err == nil:
				t.Fatalf("CommitPass whose answer was lost succeeded")
			case tc.mode == answerConflict && !errors.Is(err, operations.ErrStale):
				t.Errorf("CommitPass answered 409 after its write was applied: %v, want ErrStale", err)
			}
			check := func(when string, want []operations.Operation) {
				t.Helper()
				r := openIn(t, ns, nil, nil)
				if diff := cmp.Diff(want, listOps(t, r, o), cmpopts.EquateEmpty()); diff != "" {
					t.Errorf("%s: ListOperations through a fresh Store (-want +got):\n%s", when, diff)
				}
			}
			want := ops
			if tc.applied {
				want = changed
			}
			check("after the lost answer", want)
			if tc.mode == refused {
				if n := count(t, cfg, chunksGVR, ns); n != chunks {
					t.Errorf("the refused write left %d ItemopsChunks, want the %d from before it", n, chunks)
				}
			}

			err = w.CommitPass(ctx, runs["spilled"], changed)
			switch {
			case tc.applied && !errors.Is(err, operations.ErrStale):
				t.Errorf("CommitPass again, after a write that was applied: %v, want ErrStale", err)
			case !tc.applied && err != nil:
				t.Errorf("CommitPass again, after a write that was not applied: %v", err)
			}
			check("after CommitPass again", changed)
			if _, err := openIn(t, ns, nil, nil).Sweep(ctx); err != nil {
				t.Fatalf("Sweep: %v", err)
			}
			check("after a sweep", changed)
			if got, named := count(t, cfg, chunksGVR, ns), len(namedChunks(t, cfg, ns, "b.spilled")); got != 1+named {
				t.Errorf("after the sweep the namespace holds %d ItemopsChunks, want %d: the marker and the %d chunks the run's object names", got, 1+named, named)
			}
		})
	}
}

// BenchmarkPass measures the requests and bytes of a Monitor's pass over 100 waiting
// runs of 100 operations (the workload of BenchmarkMonitorScale, loaded once), without
// the Monitor: ByCall, the baseline, reads and writes each run by calls of its own
// (ListRuns, then GetRun, ListOperations and PutOperations of every operation, 16 runs
// at a time); Pass reads the runs by ReadPass and commits every operation of each run
// by CommitPass (changed), or commits nothing (unchanged). Each reports the requests
// per run and the bytes of the requests' and answers' bodies per pass, and Pass the time
// of its pass as a fraction of ByCall's, measured in the same run.
//
//	cd storage/kubestore && go test -run '^$' -bench 'BenchmarkPass$' -benchtime 5x .
func BenchmarkPass(b *testing.B) {
	ctx := context.Background()
	runs := scalebench.Runs(b, 100)
	cfg := config(b)
	ns := newNamespace(b, cfg)
	c := &counter{}
	s, err := kubestore.Open(ctx, counted(cfg, c), ns, nil)
	if err != nil {
		b.Fatalf("Open: %v", err)
	}
	defer s.Close()
	scalebench.Load(b, s, runs)
	step := int64(0)
	// each calls fn with 0 … n-1, 16 at a time, and returns the first error.
	each := func(n int, fn func(i int) error) error {
		var (
			wg    sync.WaitGroup
			next  atomic.Int64
			first error
			mu    sync.Mutex
		)
		for range 16 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
					if err := fn(i); err != nil {
						mu.Lock()
						if first == nil {
							first = err
						}
						mu.Unlock()
					}
				}
			}()
		}
		wg.Wait()
		return first
	}
	progress := func(ops []operations.Operation) []operations.Operation {
		out := slices.Clone(ops)
		for i := range out {
			out[i].Status.NCompleted, out[i].Status.NTotal = step, 1<<62
		}
		return out
	}
	var baseline float64 // ByCall's seconds per pass
	for _, bc := range []struct {
		name string
		pass func() error
	}{
		{"ByCall", func() error {
			listed, err := s.ListRuns(ctx, waiting)
			if err != nil || len(listed) != runs {
				return fmt.Errorf("ListRuns = %d runs, %v", len(listed), err)
			}
			return each(len(listed), func(i int) error {
				o := listed[i].Owner
				if _, err := s.GetRun(ctx, o); err != nil {
					return err
				}
				ops, err := s.ListOperations(ctx, o, operations.OperationFilter{})
				if err != nil {
					return err
				}
				return s.PutOperations(ctx, o, progress(ops))
			})
		}},
		{"Pass/changed", func() error {
			n := 0
			err := s.ReadPass(ctx, waiting, func(page []operations.PassRun) error {
				n += len(page)
				return each(len(page), func(i int) error {
					return s.CommitPass(ctx, page[i], progress(page[i].Operations))
				})
			})
			if err == nil && n != runs {
				err = fmt.Errorf("ReadPass gave %d runs, want %d", n, runs)
			}
			return err
		}},
		{"Pass/unchanged", func() error {
			n := 0
			err := s.ReadPass(ctx, waiting, func(page []operations.PassRun) error { n += len(page); return nil })
			if err == nil && n != runs {
				err = fmt.Errorf("ReadPass gave %d runs, want %d", n, runs)
			}
			return err
		}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			step++
			if err := bc.pass(); err != nil { // warm the chunk cache and the client
				b.Fatal(err)
			}
			before := c.counts()
			b.ReportAllocs()
			b.ResetTimer()
			start := time.Now()
			for range b.N {
				step++
				if err := bc.pass(); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			perPass := time.Since(start).Seconds() / float64(b.N)
			if bc.name == "ByCall" { // b.Run may call this more than once: the last call counts
				baseline = perPass
			} else {
				b.ReportMetric(perPass/baseline, "time-of-ByCall")
			}
			after := c.counts()
			passes := float64(b.N)
			b.ReportMetric(float64(after["requests"]-before["requests"])/passes/float64(runs), "requests/run")
			b.ReportMetric(float64(after["sent-B"]-before["sent-B"])/passes, "sent-B/pass")
			b.ReportMetric(float64(after["received-B"]-before["received-B"])/passes, "received-B/pass")
		})
	}
}

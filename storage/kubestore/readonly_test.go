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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/phase"
	"github.com/itemops/itemops/storage/kubestore"
	"github.com/itemops/itemops/storage/kv"
)

// viewerRole returns the Role of kubestore.RBAC for viewers, rbac/viewer-role.yaml.
func viewerRole(t testing.TB) *rbacv1.Role {
	t.Helper()
	data, err := kubestore.RBAC.ReadFile("rbac/viewer-role.yaml")
	if err != nil {
		t.Fatalf("read the viewer Role: %v", err)
	}
	var role rbacv1.Role
	if err := yaml.Unmarshal(data, &role); err != nil {
		t.Fatalf("decode the viewer Role: %v", err)
	}
	return &role
}

// A requestLog is an http.RoundTripper that records every request it passes on.
type requestLog struct {
	next http.RoundTripper
	mu   sync.Mutex
	reqs []string // method and path of each request
}

func (l *requestLog) RoundTrip(req *http.Request) (*http.Response, error) {
	l.mu.Lock()
	l.reqs = append(l.reqs, req.Method+" "+req.URL.Path)
	l.mu.Unlock()
	return l.next.RoundTrip(req)
}

// count returns how many requests l has passed on.
func (l *requestLog) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.reqs)
}

// writes returns the requests l passed on that are neither GETs nor LISTs.
func (l *requestLog) writes() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, r := range l.reqs {
		if !strings.HasPrefix(r, http.MethodGet+" ") {
			out = append(out, r)
		}
	}
	return out
}

// viewerConfig returns storeUser's configuration, whose requests log records.
func viewerConfig(t *testing.T) (*rest.Config, *requestLog) {
	cfg := userConfig(t)
	log := &requestLog{}
	cfg.WrapTransport = func(next http.RoundTripper) http.RoundTripper {
		log.next = next
		return log
	}
	return cfg, log
}

// TestReadOnly opens, as a user bound to exactly the viewer Role of kubestore.RBAC (get
// and list on the store's two resources), with Options.ReadOnly, a namespace holding
// three runs (one spilled into chunks), a chunk of a commit that died and a pending
// object past its grace, both left for a sweep. The read-only Store reads every run and
// operation as a writable Store does, through a pass too, and its Check reports the
// leftovers; each write fails with ErrReadOnly, the claims and the sweep with no
// request at all; the Store makes no request but GETs and LISTs, changes no object's
// resourceVersion, and keeps both leftovers, which a writable Open then deletes.
func TestReadOnly(t *testing.T) {
	ctx := context.Background()
	admin := config(t)
	ns := newNamespace(t, admin)
	w, err := kubestore.Open(ctx, admin, ns, spilling)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	chunks := seedCheck(t, w, admin, ns)
	dyn := dynamic.NewForConfigOrDie(admin)
	orphan := strings.Split(chunks[0], ".")
	orphan[3] = "00000000000000aa" // of the run's number: its commit can no longer succeed
	obj, err := dyn.Resource(chunksGVR).Namespace(ns).Get(ctx, chunks[0], metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get %s: %v", chunks[0], err)
	}
	obj.SetName(strings.Join(orphan, "."))
	obj.SetResourceVersion("")
	obj.SetUID("")
	if _, err := dyn.Resource(chunksGVR).Namespace(ns).Create(ctx, obj, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create the orphan chunk: %v", err)
	}
	pendingObject(t, dyn, ns, nil)
	defer kubestore.SetPendingGrace(0)()
	// What a writable Store reads, to compare with.
	wantRuns, err := w.ListRuns(ctx, operations.RunFilter{})
	if err != nil || len(wantRuns) != 3 {
		t.Fatalf("ListRuns through the writable store: %d runs, %v; want 3", len(wantRuns), err)
	}
	wantOps := map[operations.Owner][]operations.Operation{}
	for _, r := range wantRuns {
		wantOps[r.Owner] = listOps(t, w, r.Owner)
	}
	w.Close()

	grant(t, admin, ns, viewerRole(t))
	before := versions(t, admin, ns)
	cfg, log := viewerConfig(t)
	s, err := kubestore.Open(ctx, cfg, ns, &kubestore.Options{ReadOnly: true})
	if err != nil {
		t.Fatalf("read-only Open as a viewer: %v", err)
	}

	runs, err := s.ListRuns(ctx, operations.RunFilter{})
	if err != nil {
		t.Fatalf("ListRuns: %v", err)
	}
	if diff := cmp.Diff(wantRuns, runs); diff != "" {
		t.Errorf("ListRuns (-writable +read-only):\n%s", diff)
	}
	for _, r := range wantRuns {
		got, err := s.GetRun(ctx, r.Owner)
		if err != nil {
			t.Fatalf("GetRun(%s): %v", r.Owner, err)
		}
		if diff := cmp.Diff(r, got); diff != "" {
			t.Errorf("GetRun(%s) (-writable +read-only):\n%s", r.Owner, diff)
		}
		if diff := cmp.Diff(wantOps[r.Owner], listOps(t, s, r.Owner)); diff != "" {
			t.Errorf("ListOperations(%s) (-writable +read-only):\n%s", r.Owner, diff)
		}
		counts, _, err := s.CountOperations(ctx, r.Owner, operations.OperationFilter{})
		if err != nil || counts.Total() != len(wantOps[r.Owner]) {
			t.Errorf("CountOperations(%s) = %+v, %v; want a total of %d", r.Owner, counts, err, len(wantOps[r.Owner]))
		}
	}
	var pass []operations.PassRun
	err = s.ReadPass(ctx, operations.RunFilter{}, func(page []operations.PassRun) error {
		pass = append(pass, page...)
		return nil
	})
	if err != nil || len(pass) != len(wantRuns) {
		t.Fatalf("ReadPass: %d runs, %v; want %d", len(pass), err, len(wantRuns))
	}

	report, err := s.Check(ctx)
	if want := (kubestore.CheckReport{Runs: 3, Pending: 1, Chunks: len(chunks) + 1}); report != want {
		t.Errorf("Check = %+v, want %+v", report, want)
	}
	for _, named := range []string{"itemopschunks " + ns + "/" + obj.GetName(), "itemopsruns " + ns + "/b.pending"} {
		if !errors.Is(err, operations.ErrCorrupt) || !strings.Contains(err.Error(), named) || !strings.Contains(err.Error(), "a sweep deletes it") {
			t.Errorf("Check: %v; want ErrCorrupt naming %s, which a sweep deletes", err, named)
		}
	}

	o := wantRuns[0].Owner
	newOwner := operations.Owner{Kind: phase.Backup, Name: "another", UID: "uid-another"}
	writes := map[string]func() error{
		"CreateRun": func() error { return s.CreateRun(ctx, waitingRun(t, newOwner)) },
		"CreateRunWithOperations": func() error {
			return s.CreateRunWithOperations(ctx, waitingRun(t, newOwner), testOps(newOwner, 2, operations.OperationInProgress))
		},
		"PutOperations": func() error {
			return s.PutOperations(ctx, o, testOps(o, 1, operations.OperationCompleted))
		},
		"UpdateRun": func() error {
			_, err := s.UpdateRun(ctx, o, func(r *operations.Run) error { r.Warnings++; return nil })
			return err
		},
		"DeleteRun": func() error { return s.DeleteRun(ctx, o) },
		"CommitPass": func() error {
			for _, r := range pass {
				if len(r.Operations) > 0 {
					op := r.Operations[0]
					op.Status.Phase = operations.OperationCompleted
					return s.CommitPass(ctx, r, []operations.Operation{op})
				}
			}
			t.Fatal("no run of the pass has operations")
			return nil
		},
		"Sweep": func() error {
			_, err := s.Sweep(ctx)
			return err
		},
		"ClaimRun": func() error {
			_, _, err := s.ClaimRun(ctx, o)
			return err
		},
		"KeepClaims": func() error {
			session := s.KeepClaims(ctx, time.Minute, nil)
			defer session.End()
			_, _, err := session.ClaimRun(ctx, o)
			return err
		},
		"TakeOverClaims": func() error {
			_, err := s.TakeOverClaims(ctx)
			return err
		},
	}
	// The claims and the sweep make no request; the engine's writes read what they plan
	// on, and fail where they would write.
	unsent := map[string]bool{"Sweep": true, "ClaimRun": true, "KeepClaims": true, "TakeOverClaims": true}
	for name, write := range writes {
		n := log.count()
		err := write()
		if !errors.Is(err, kubestore.ErrReadOnly) {
			t.Errorf("%s on a read-only store: %v, want ErrReadOnly", name, err)
		}
		if made := log.count() - n; unsent[name] && made != 0 {
			t.Errorf("%s on a read-only store made %d requests, want none", name, made)
		}
	}
	if err := s.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if got := log.writes(); len(got) > 0 {
		t.Errorf("the read-only store made requests that are not reads: %v", got)
	}
	if diff := cmp.Diff(before, versions(t, admin, ns)); diff != "" {
		t.Errorf("the read-only store changed the namespace (-before +after):\n%s", diff)
	}
	if l, err := leaseClient(t, admin, ns).List(ctx, metav1.ListOptions{}); err != nil || len(l.Items) > 0 {
		t.Errorf("the namespace holds %d Leases (%v), want none", len(l.Items), err)
	}

	// A writable Open sweeps both leftovers.
	w, err = kubestore.Open(ctx, admin, ns, nil)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer w.Close()
	after := versions(t, admin, ns)
	for _, gone := range []string{"itemopschunks/" + obj.GetName(), "itemopsruns/b.pending"} {
		if _, ok := before[gone]; !ok {
			t.Errorf("%s was not there to begin with", gone)
		}
		if _, ok := after[gone]; ok {
			t.Errorf("a writable Open left %s", gone)
		}
	}
}

// TestReadOnlyOpenNoStore opens with Options.ReadOnly a namespace where no store was
// ever opened, once as a viewer and once as an administrator, whom the API server would
// let write: Open fails with kv.ErrFormat, saying there is no store, and the namespace
// stays empty. A writable Open of it then makes the store.
func TestReadOnlyOpenNoStore(t *testing.T) {
	ctx := context.Background()
	admin := config(t)
	ns := newNamespace(t, admin)
	grant(t, admin, ns, viewerRole(t))
	viewer, log := viewerConfig(t)
	for who, cfg := range map[string]*rest.Config{"a viewer": viewer, "an administrator": admin} {
		_, err := kubestore.Open(ctx, cfg, ns, &kubestore.Options{ReadOnly: true})
		if !errors.Is(err, kv.ErrFormat) || !strings.Contains(err.Error(), "no store") {
			t.Errorf("read-only Open of an empty namespace as %s: %v, want kv.ErrFormat saying there is no store", who, err)
		}
		if got := versions(t, admin, ns); len(got) > 0 {
			t.Fatalf("read-only Open as %s left objects: %v", who, got)
		}
	}
	if got := log.writes(); len(got) > 0 {
		t.Errorf("the viewer's read-only Open made requests that are not reads: %v", got)
	}
	s, err := kubestore.Open(ctx, admin, ns, nil)
	if err != nil {
		t.Fatalf("writable Open: %v", err)
	}
	s.Close()
	if got := versions(t, admin, ns); len(got) != 2 {
		t.Errorf("a writable Open made %v, want the store's two markers", got)
	}
}

// TestReadOnlyOpenBeforeIdentities opens with Options.ReadOnly, as a viewer, the store
// of a namespace made before stores had identities (a format marker with no
// itemops.io/store label, and no runs' marker), whose runs' marker only a writable Open
// writes: Open fails with ErrReadOnly, naming the marker, and writes nothing. Once a
// writable Open has written it, a read-only Open opens the store.
func TestReadOnlyOpenBeforeIdentities(t *testing.T) {
	ctx := context.Background()
	admin := config(t)
	ns := newNamespace(t, admin)
	w, err := kubestore.Open(ctx, admin, ns, nil)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	w.Close()
	dyn := dynamic.NewForConfigOrDie(admin)
	edit(t, dyn.Resource(chunksGVR).Namespace(ns), "itemops", func(obj *unstructured.Unstructured) {
		l := obj.GetLabels()
		delete(l, "itemops.io/store")
		obj.SetLabels(l)
	})
	if err := dyn.Resource(runsGVR).Namespace(ns).Delete(ctx, "itemops", metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete the runs' marker: %v", err)
	}
	grant(t, admin, ns, viewerRole(t))
	before := versions(t, admin, ns)
	cfg, log := viewerConfig(t)
	_, err = kubestore.Open(ctx, cfg, ns, &kubestore.Options{ReadOnly: true})
	if !errors.Is(err, kubestore.ErrReadOnly) || !strings.Contains(err.Error(), "runs' marker") {
		t.Fatalf("read-only Open of a store made before identities: %v, want ErrReadOnly naming the runs' marker", err)
	}
	if diff := cmp.Diff(before, versions(t, admin, ns)); diff != "" {
		t.Errorf("the read-only Open changed the namespace (-before +after):\n%s", diff)
	}
	if got := log.writes(); len(got) > 0 {
		t.Errorf("the read-only Open made requests that are not reads: %v", got)
	}
	w, err = kubestore.Open(ctx, admin, ns, nil)
	if err != nil {
		t.Fatalf("writable Open: %v", err)
	}
	w.Close()
	s, err := kubestore.Open(ctx, cfg, ns, &kubestore.Options{ReadOnly: true})
	if err != nil {
		t.Fatalf("read-only Open once the runs' marker is written: %v", err)
	}
	if _, err := s.ListRuns(ctx, operations.RunFilter{}); err != nil {
		t.Errorf("ListRuns: %v", err)
	}
	s.Close()
}

package controllerruntime

import (
	"context"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/itemops/itemops/clock/clocktest"
	"github.com/itemops/itemops/integrations/controllerruntime/apiservertest"
	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/operations/monitor"
	"github.com/itemops/itemops/operations/operationstest"
	"github.com/itemops/itemops/phase"
	"github.com/itemops/itemops/storage/memstore"
)

// kube is the API server of this test binary's tests that need one (those named
// TestAPIServer... and TestLeaderElection...), with the Widget kind of testdata/crd
// installed; TestMain stops it.
var kube = apiservertest.New(apiservertest.Options{CRDDirectoryPaths: []string{"testdata/crd"}})

// widget is an object of a kind of the tests' own whose status is a subresource.
type widget struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Status            struct {
		RunStatus `json:",inline"`
	} `json:"status,omitempty"`
}

func (w *widget) DeepCopyObject() runtime.Object {
	out := *w
	w.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	w.Status.RunStatus.DeepCopyInto(&out.Status.RunStatus)
	return &out
}

type widgetList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []widget `json:"items"`
}

func (l *widgetList) DeepCopyObject() runtime.Object {
	out := *l
	l.ListMeta.DeepCopyInto(&out.ListMeta)
	out.Items = make([]widget, len(l.Items))
	for i := range l.Items {
		out.Items[i] = *l.Items[i].DeepCopyObject().(*widget)
	}
	return &out
}

// apiServerClient returns the scheme of the tests (Kubernetes' types and widget) and a
// client of the API server with it that reads without a cache, and makes a namespace
// of the test's own.
func apiServerClient(t *testing.T) (*runtime.Scheme, client.Client, string) {
	t.Helper()
	cfg := kube.Config(t)
	scheme := runtime.NewScheme()
	require.NoError(t, clientgoscheme.AddToScheme(scheme))
	gv := schema.GroupVersion{Group: "test.itemops.io", Version: "v1"}
	scheme.AddKnownTypeWithName(gv.WithKind("Widget"), &widget{})
	scheme.AddKnownTypeWithName(gv.WithKind("WidgetList"), &widgetList{})
	metav1.AddToGroupVersion(scheme, gv)
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	require.NoError(t, err)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "itemops-"}}
	require.NoError(t, c.Create(context.Background(), ns))
	return scheme, c, ns.Name
}

// TestAPIServerHandleDeletion: the API server holds a deleted object while
// HandleDeletion's finalizer is on it; HandleDeletion cancels the run's jobs, deletes
// the run and removes the finalizer, and the object is gone. A reconcile that read the
// object before it went (from a cache, say) finds it gone and is done, with no error.
func TestAPIServerHandleDeletion(t *testing.T) {
	_, c, ns := apiServerClient(t)
	ctx := context.Background()
	obj := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "nightly"}}
	require.NoError(t, c.Create(ctx, obj))
	j := newJobs()
	m := newMonitor(memstore.New(), resolverOf(t, c, j), logr.Discard(), nil)

	deleted, err := m.HandleDeletion(ctx, c, obj, Kind{Name: phase.Backup})
	require.NoError(t, err)
	require.False(t, deleted)
	_, err = m.StartRun(ctx, operations.Run{Owner: OwnerOf(phase.Backup, obj)}, j.start("a", "b"))
	require.NoError(t, err)
	require.NoError(t, c.Delete(ctx, obj))

	var held corev1.ConfigMap
	require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(obj), &held), "the API server holds the object for its finalizer")
	require.NotNil(t, held.DeletionTimestamp)
	require.Equal(t, []string{Finalizer}, held.Finalizers)
	stale := held.DeepCopy()

	deleted, err = m.HandleDeletion(ctx, c, &held, Kind{Name: phase.Backup})
	require.NoError(t, err)
	require.True(t, deleted)
	require.Empty(t, j.left(), "jobs left running")
	if diff := cmp.Diff(map[string]types.UID{"a": obj.UID, "b": obj.UID}, j.cancelled); diff != "" {
		t.Errorf("cancels (-want +got):\n%s", diff)
	}
	_, err = m.store.GetRun(ctx, OwnerOf(phase.Backup, obj))
	require.ErrorIs(t, err, operations.ErrNotFound)
	require.True(t, apierrors.IsNotFound(c.Get(ctx, client.ObjectKeyFromObject(obj), &held)), "the object is gone")

	deleted, err = m.HandleDeletion(ctx, c, stale, Kind{Name: phase.Backup})
	require.NoError(t, err, "HandleDeletion of a copy read before the object went")
	require.True(t, deleted)
}

// TestAPIServerSourceEnqueues: on a real manager, a controller that watches the
// Monitor's source is asked to reconcile an object when the Monitor changes its run,
// with no change of the object itself; the source of another kind is not.
func TestAPIServerSourceEnqueues(t *testing.T) {
	scheme, c, ns := apiServerClient(t)
	ctx := context.Background()
	obj := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "nightly"}}
	require.NoError(t, c.Create(ctx, obj))
	// A Secret of the same name, whose reconcile shows that the other controller runs.
	require.NoError(t, c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: obj.Name}}))

	skipNameValidation := true // the tests of this binary start several managers
	mgr, err := manager.New(kube.Config(t), manager.Options{
		Scheme: scheme, Logger: logr.Discard(), Metrics: metricsserver.Options{BindAddress: "0"},
		Controller: ctrlconfig.Controller{SkipNameValidation: &skipNameValidation},
	})
	require.NoError(t, err)
	var done atomic.Bool // whether the tracker reports the operation done
	tracker := &operationstest.Tracker{ProgressFunc: func(context.Context, operations.Operation) (operations.Progress, error) {
		return operations.Progress{Completed: done.Load()}, nil
	}}
	m, err := New(mgr, memstore.New(), operationstest.Resolver(map[string]operations.Tracker{"p": tracker}), WithMonitorOptions(monitor.WithInterval(50*time.Millisecond)))
	require.NoError(t, err)
	requests := make(chan string, 100)
	record := func(name string) reconcile.Func {
		return func(_ context.Context, req reconcile.Request) (reconcile.Result, error) {
			if req.Name == obj.Name {
				requests <- name
			}
			return reconcile.Result{}, nil
		}
	}
	require.NoError(t, builder.ControllerManagedBy(mgr).Named("backups").For(&corev1.ConfigMap{}).
		WatchesRawSource(m.Source(Kind{Name: phase.Backup})).Complete(Gate(m, record("backups"))))
	require.NoError(t, builder.ControllerManagedBy(mgr).Named("restores").For(&corev1.Secret{}).
		WatchesRawSource(m.Source(Kind{Name: phase.Restore})).Complete(Gate(m, record("restores"))))
	ctx, stop := context.WithCancel(ctx)
	managerDone := make(chan error, 1)
	go func() { managerDone <- mgr.Start(ctx) }()
	defer func() {
		stop()
		require.NoError(t, <-managerDone)
	}()

	next := func() string {
		select {
		case name := <-requests:
			return name
		case <-time.After(30 * time.Second):
			t.Fatal("no reconcile")
			return ""
		}
	}
	// Each controller's reconcile of the object it found. Both controllers have then
	// started, and stopping them does not leave controller-runtime v0.19's source
	// goroutine of a controller that was still starting (which goleak would report).
	require.ElementsMatch(t, []string{"backups", "restores"}, []string{next(), next()})
	_, err = m.StartRun(ctx, operations.Run{Owner: OwnerOf(phase.Backup, obj)}, func(context.Context) (operations.MainRun, error) {
		return operations.MainRun{Operations: []operations.Operation{{Action: "p", ID: "op-1"}}}, nil
	})
	require.NoError(t, err)
	for len(requests) > 0 { // the reconciles of the run's start, if any
		<-requests
	}
	done.Store(true)
	require.Equal(t, "backups", next(), "the reconcile the source asks for when the run moves on")
	run, err := m.store.GetRun(ctx, OwnerOf(phase.Backup, obj))
	require.NoError(t, err)
	require.NotEqual(t, phase.WaitingForPluginOperations, run.Phase)
	select {
	case name := <-requests:
		require.Equal(t, "backups", name, "a reconcile from the source of another kind")
	default:
	}
}

// TestAPIServerStatusConflict: a status written through the status subresource from a
// copy with a stale resourceVersion meets the API server's 409 Conflict and changes
// nothing; SetFromStore on a fresh read then writes it, and the API server returns the
// status as written. An update of the object itself leaves the status alone.
func TestAPIServerStatusConflict(t *testing.T) {
	_, c, ns := apiServerClient(t)
	ctx := context.Background()
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC) // whole seconds: metav1.Time keeps no more
	m := newMonitor(memstore.New(), operationstest.Resolver(nil), logr.Discard(), []monitor.Option{monitor.WithClock(clocktest.NewClock(t0))})
	w := &widget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "w"}}
	require.NoError(t, c.Create(ctx, w))
	owner := OwnerOf(phase.Backup, w)
	_, err := m.StartRun(ctx, operations.Run{Owner: owner}, func(context.Context) (operations.MainRun, error) {
		return operations.MainRun{Operations: []operations.Operation{{Action: "p", ID: "op-1"}}}, nil
	})
	require.NoError(t, err)

	stale := w.DeepCopyObject().(*widget)
	w.Annotations = map[string]string{"touched": "yes"}
	require.NoError(t, c.Update(ctx, w)) // another writer moves the resourceVersion on
	_, changed, err := stale.Status.SetFromStore(ctx, m.store, owner, stale.Generation)
	require.NoError(t, err)
	require.True(t, changed)
	err = c.Status().Update(ctx, stale)
	require.True(t, apierrors.IsConflict(err), "status write from a stale copy = %v, want a 409 Conflict", err)
	var got widget
	require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(w), &got))
	require.Empty(t, got.Status.Phase, "the conflicting write changed the status")

	_, changed, err = got.Status.SetFromStore(ctx, m.store, owner, got.Generation)
	require.NoError(t, err)
	require.True(t, changed)
	require.NoError(t, c.Status().Update(ctx, &got))
	written := got.Status.RunStatus
	require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(w), &got))
	if d := cmp.Diff(written, got.Status.RunStatus); d != "" {
		t.Errorf("status read back (-written +read):\n%s", d)
	}
	require.Equal(t, string(phase.WaitingForPluginOperations), got.Status.Phase)
	_, changed, err = got.Status.SetFromStore(ctx, m.store, owner, got.Generation)
	require.NoError(t, err)
	require.False(t, changed, "the status read back is the run's: nothing to write")

	got.Status.Phase = "Changed"
	require.NoError(t, c.Update(ctx, &got))
	require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(w), &got))
	require.Equal(t, string(phase.WaitingForPluginOperations), got.Status.Phase, "an update of the object changed its status")
}

// TestAPIServerEventsOfARetriedReconcile: RecordPhaseChanges called again for the same
// changes from a newer version of the object, as the reconcile after a status write that
// met a 409 Conflict does, gives the events API one Event per change, in a series of
// two, not a second Event for each.
func TestAPIServerEventsOfARetriedReconcile(t *testing.T) {
	scheme, c, ns := apiServerClient(t)
	ctx := context.Background()
	rec := eventRecorder(t, scheme)

	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	m := newMonitor(memstore.New(), operationstest.Resolver(nil), logr.Discard(), []monitor.Option{monitor.WithClock(clocktest.NewClock(t0))})
	w := &widget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "w"}}
	require.NoError(t, c.Create(ctx, w))
	run, err := m.StartRun(ctx, operations.Run{Owner: OwnerOf(phase.Backup, w)}, func(context.Context) (operations.MainRun, error) {
		return operations.MainRun{Operations: []operations.Operation{{Action: "p", ID: "op-1"}}}, nil
	})
	require.NoError(t, err)
	RecordPhaseChanges(rec, w, "", run)
	w.Annotations = map[string]string{"touched": "yes"}
	require.NoError(t, c.Update(ctx, w)) // the newer version the retried reconcile reads
	RecordPhaseChanges(rec, w, "", run)

	type event struct {
		Reason, Note string
		Count        int32
	}
	want := []event{
		{Reason: "InProgress", Note: "New → InProgress: main run started", Count: 2},
		{Reason: "WaitingForPluginOperations", Note: "InProgress → WaitingForPluginOperations: main run ended: 1 operations started", Count: 2},
	}
	var got []event
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		var list eventsv1.EventList
		require.NoError(t, c.List(ctx, &list, client.InNamespace(ns)))
		got = got[:0]
		recorded := int32(0)
		for _, e := range list.Items {
			count := int32(1)
			if e.Series != nil {
				count = e.Series.Count
			}
			recorded += count
			got = append(got, event{Reason: e.Reason, Note: e.Note, Count: count})
		}
		if recorded >= 4 {
			break
		}
		require.False(t, time.Now().After(deadline), "the events API does not hold the four recordings within 30 s: %v", got)
	}
	slices.SortFunc(got, func(a, b event) int { return strings.Compare(a.Reason, b.Reason) })
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("Events (-want +got):\n%s", d)
	}
}

// eventRecorder returns a recorder of the events API on the test API server, for the
// objects of scheme, whose Events are sent until the test ends.
func eventRecorder(t *testing.T, scheme *runtime.Scheme) events.EventRecorder {
	t.Helper()
	clientset, err := kubernetes.NewForConfig(kube.Config(t))
	require.NoError(t, err)
	broadcaster := events.NewBroadcaster(&events.EventSinkImpl{Interface: clientset.EventsV1()})
	stopCh := make(chan struct{})
	broadcaster.StartRecordingToSink(stopCh)
	t.Cleanup(func() {
		close(stopCh)
		broadcaster.Shutdown()
	})
	return broadcaster.NewRecorder(scheme, "itemops-test")
}

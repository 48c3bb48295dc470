package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/testr"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	apiwatch "k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/itemops/itemops/adapters"
	"github.com/itemops/itemops/clock"
	"github.com/itemops/itemops/integrations/controllerruntime"
	"github.com/itemops/itemops/integrations/controllerruntime/apiservertest"
	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/phase"
	"github.com/itemops/itemops/storage/kubestore"
	"github.com/itemops/itemops/storage/memstore"
)

// kube is the API server of the tests named TestCluster...; installCRD, the example's
// own, installs AppBackup's CRD in it.
var kube = apiservertest.New(apiservertest.Options{})

func TestMain(m *testing.M) { os.Exit(kube.StopAfter(m).Run()) }

// testManager is the manager options of the tests: one process starts several managers,
// each with a controller named appbackup.
var testManager = manager.Options{Logger: logr.Discard(), Controller: config.Controller{SkipNameValidation: ptr.To(true)}}

// eventually waits up to 30 s, checking every pollEvery, for cond to hold, and fails the
// test with msg if it does not. cond runs on the test's goroutine, so it may fail the
// test itself.
func eventually(t *testing.T, msg string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); !cond(); time.Sleep(pollEvery) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 30 s", msg)
		}
	}
}

// cluster is an operator on the test binary's API server, in a namespace of its own.
type cluster struct {
	c   client.Client // reads and writes the API server directly, with no cache
	r   *BackupReconciler
	mgr manager.Manager
	ns  string
	// errs are the operator's errors: its log's, among them the controller's
	// "Reconciler error" for each reconcile that returned one.
	errs *errorLog
}

// newCluster installs the CRD, makes a namespace and the operator with action as its
// plugin, not started: the test may change r first (its Client, say), then calls start.
func newCluster(t *testing.T, action adapters.BackupItemAction[*AppBackup]) *cluster {
	t.Helper()
	return newClusterOn(t, memstore.New(), action)
}

// newClusterOn is newCluster with the runs in store.
func newClusterOn(t *testing.T, store operations.Store, action adapters.BackupItemAction[*AppBackup]) *cluster {
	t.Helper()
	cfg := kube.Config(t)
	ctx := context.Background()
	scheme, err := newScheme()
	require.NoError(t, err)
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	require.NoError(t, err)
	require.NoError(t, installCRD(ctx, c))
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "appbackup-"}}
	require.NoError(t, c.Create(ctx, ns))
	opts := testManager
	opts.Cache.DefaultNamespaces = map[string]cache.Config{ns.Name: {}} // not the other tests' AppBackups
	k := &cluster{c: c, ns: ns.Name, errs: new(errorLog)}
	opts.Logger = logr.New(errorSink{LogSink: testr.New(t).GetSink(), log: k.errs})
	k.r, k.mgr, err = newClusterOperator(cfg, opts, store, action)
	require.NoError(t, err)
	return k
}

// errorLog holds the messages logged at the error level.
type errorLog struct {
	mu   sync.Mutex
	msgs []string
}

// errorSink passes every message to the test's log and keeps those at the error level,
// but for errors that wrap context.Canceled: the manager's stop at the end of the test
// cancels the requests under way, such as the event recorder's writes of events, which
// then log "Unable to write event".
type errorSink struct {
	logr.LogSink
	log *errorLog
}

func (s errorSink) Error(err error, msg string, kv ...any) {
	s.LogSink.Error(err, msg, kv...)
	// The Monitor logs through slog, whose records reach a logr sink with a nil error
	// and the error as the value of the key "error".
	for i := 0; err == nil && i+1 < len(kv); i += 2 {
		if e, ok := kv[i+1].(error); ok && kv[i] == "error" {
			err = e
		}
	}
	if errors.Is(err, context.Canceled) {
		return
	}
	s.log.mu.Lock()
	s.log.msgs = append(s.log.msgs, fmt.Sprintf("%s: %v", msg, err))
	s.log.mu.Unlock()
}

func (s errorSink) WithValues(kv ...any) logr.LogSink {
	return errorSink{LogSink: s.LogSink.WithValues(kv...), log: s.log}
}

func (s errorSink) WithName(name string) logr.LogSink {
	return errorSink{LogSink: s.LogSink.WithName(name), log: s.log}
}

// start starts the manager until the test ends, and then fails the test if the operator
// logged an error.
func (k *cluster) start(t *testing.T) {
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- k.mgr.Start(ctx) }()
	t.Cleanup(func() {
		stop()
		require.NoError(t, <-done)
		k.errs.mu.Lock()
		defer k.errs.mu.Unlock()
		require.Empty(t, k.errs.msgs, "the operator logged errors")
	})
}

// create creates an AppBackup of three volume claims named name and returns it.
func (k *cluster) create(t *testing.T, name string) *AppBackup {
	t.Helper()
	b := &AppBackup{Spec: AppBackupSpec{VolumeClaims: []string{"data-0", "data-1", "data-2"}}}
	b.Namespace, b.Name = k.ns, name
	require.NoError(t, k.c.Create(context.Background(), b))
	return b
}

// get reads the AppBackup of key from the API server.
func (k *cluster) get(t *testing.T, key types.NamespacedName) (AppBackup, error) {
	t.Helper()
	var b AppBackup
	err := k.c.Get(context.Background(), key, &b)
	return b, err
}

// waitPhase waits until the status of the AppBackup of key shows phase p, and returns it.
func (k *cluster) waitPhase(t *testing.T, key types.NamespacedName, p phase.Phase) AppBackup {
	t.Helper()
	var b AppBackup
	eventually(t, "the AppBackup's status reaches "+string(p), func() bool {
		var err error
		b, err = k.get(t, key)
		require.NoError(t, err)
		return b.Status.Phase == string(p)
	})
	return b
}

// waitGone waits until the AppBackup of key is gone from the API server.
func (k *cluster) waitGone(t *testing.T, key types.NamespacedName) {
	t.Helper()
	eventually(t, "the AppBackup is gone", func() bool {
		_, err := k.get(t, key)
		if !apierrors.IsNotFound(err) {
			require.NoError(t, err)
			return false
		}
		return true
	})
}

// events returns the Events the API server holds about the object of uid, each as
// "type reason action: note", sorted.
func (k *cluster) events(t *testing.T, uid types.UID) []string {
	t.Helper()
	var list eventsv1.EventList
	require.NoError(t, k.c.List(context.Background(), &list, client.InNamespace(k.ns)))
	var got []string
	for _, e := range list.Items {
		if e.Regarding.UID == uid {
			got = append(got, fmt.Sprintf("%s %s %s: %s", e.Type, e.Reason, e.Action, e.Note))
		}
	}
	slices.Sort(got)
	return got
}

// conditions returns the conditions of s as "type=status reason", in order.
func conditions(s AppBackupStatus) []string {
	var got []string
	for _, c := range s.Conditions {
		got = append(got, fmt.Sprintf("%s=%s %s", c.Type, c.Status, c.Reason))
	}
	return got
}

// completedEvents are the Events of a run that reaches Completed, sorted.
var completedEvents = []string{
	"Normal Completed PhaseChange: Finalizing → Completed: finalized",
	"Normal Finalizing PhaseChange: WaitingForPluginOperations → Finalizing: all operations ended",
	"Normal InProgress PhaseChange: New → InProgress: main run started",
	"Normal WaitingForPluginOperations PhaseChange: InProgress → WaitingForPluginOperations: main run ended: 3 operations started",
}

// TestClusterToCompleted: on a real API server, an AppBackup's reconcile starts its run,
// the Monitor polls the uploads to their end, and the reconciler writes the status
// through the status subresource, with the conditions the CRD's schema accepts, and an
// Event for each phase change that the events API then serves.
func TestClusterToCompleted(t *testing.T) {
	up := newUploader(time.Millisecond, clock.System{})
	k := newCluster(t, up)
	k.start(t)
	b := k.create(t, "nightly")
	key := client.ObjectKeyFromObject(b)

	got := k.waitPhase(t, key, phase.Completed)
	require.Equal(t, 3, got.Status.Operations)
	require.Equal(t, 3, got.Status.OperationsCompleted)
	require.NotNil(t, got.Status.LastProgressTime, "when the run last moved")
	require.Nil(t, got.Status.SlowestOperation, "no operation is unfinished")
	require.Nil(t, got.Status.FailedOperation, "no operation failed")
	require.Equal(t, []string{"Ready=True Completed", "Progressing=False Completed", "Degraded=False Completed"}, conditions(got.Status))
	require.Equal(t, []string{controllerruntime.Finalizer}, got.Finalizers, "HandleDeletion's finalizer, written by an update that left the status alone")
	require.Len(t, up.uploads, 3)

	eventually(t, "the events API serves an Event for each phase change", func() bool {
		return len(k.events(t, got.UID)) >= len(completedEvents)
	})
	if d := cmp.Diff(completedEvents, k.events(t, got.UID)); d != "" {
		t.Errorf("Events of the AppBackup (-want +got):\n%s", d)
	}
}

// TestClusterProgressShown: while the uploads run, the AppBackup's status on the API
// server shows the slowest of them, with its plugin, item and last progress, as the
// Monitor's first pass over the run started them; the CRD's schema keeps every field.
func TestClusterProgressShown(t *testing.T) {
	up := newUploader(time.Hour, clock.System{})
	k := newCluster(t, up)
	k.start(t)
	b := k.create(t, "nightly")
	key := client.ObjectKeyFromObject(b)

	var got AppBackup
	eventually(t, "the status shows an upload in progress", func() bool {
		var err error
		got, err = k.get(t, key)
		require.NoError(t, err)
		s := got.Status.SlowestOperation
		return s != nil && s.Phase == string(operations.OperationInProgress) && s.NTotal > 0
	})
	s := got.Status.SlowestOperation
	require.Equal(t, up.Name(), s.Action)
	require.Contains(t, []string{"data-0", "data-1", "data-2"}, s.Resource[strings.LastIndex(s.Resource, "/")+1:])
	require.True(t, strings.HasPrefix(s.Resource, "persistentvolumeclaims "+k.ns+"/"), s.Resource)
	require.NotNil(t, s.LastProgressTime)
	require.NotNil(t, got.Status.LastProgressTime)
	require.Nil(t, got.Status.FailedOperation)
	require.Equal(t, string(phase.WaitingForPluginOperations), got.Status.Phase)
}

// heldUploader is the uploader whose Cancel waits until release is closed, having
// closed cancelling on its first call, so that a test sees what happens while the
// uploads are being cancelled.
type heldUploader struct {
	*uploader
	once       sync.Once
	cancelling chan struct{}
	release    chan struct{}
}

func (u *heldUploader) Cancel(ctx context.Context, id string, b *AppBackup) error {
	u.once.Do(func() { close(u.cancelling) })
	select {
	case <-u.release:
	case <-ctx.Done():
		return ctx.Err()
	}
	return u.uploader.Cancel(ctx, id, b)
}

// TestClusterDeletionHeldUntilCancelled deletes an AppBackup whose uploads run: the API
// server keeps the object, marked for deletion, while its finalizer stays, which is
// until every upload is cancelled; then the object is gone, and so is its run.
func TestClusterDeletionHeldUntilCancelled(t *testing.T) {
	up := &heldUploader{uploader: newUploader(time.Hour, clock.System{}), cancelling: make(chan struct{}), release: make(chan struct{})}
	k := newCluster(t, up)
	k.start(t)
	b := k.create(t, "nightly")
	key := client.ObjectKeyFromObject(b)
	b2 := k.waitPhase(t, key, phase.WaitingForPluginOperations)
	require.Len(t, up.running(), 3)

	require.NoError(t, k.c.Delete(context.Background(), &b2))
	select {
	case <-up.cancelling:
	case <-time.After(30 * time.Second):
		t.Fatal("no upload was cancelled after the AppBackup was deleted")
	}
	held, err := k.get(t, key)
	require.NoError(t, err, "the API server keeps the AppBackup while its uploads are being cancelled")
	require.NotNil(t, held.DeletionTimestamp)
	require.Equal(t, []string{controllerruntime.Finalizer}, held.Finalizers)
	require.Len(t, up.running(), 3, "no upload is cancelled yet")

	close(up.release)
	k.waitGone(t, key)
	require.Empty(t, up.running(), "uploads left running")
	_, err = k.r.Store.GetRun(context.Background(), k.r.Kind.Owner(&b2))
	require.ErrorIs(t, err, operations.ErrNotFound)
}

// TestClusterRecreated deletes a finished AppBackup and creates another of the same
// name: the API server gives it a new UID, and it gets a run of its own, with uploads of
// its own, rather than the old one's Completed status.
func TestClusterRecreated(t *testing.T) {
	up := newUploader(time.Millisecond, clock.System{})
	k := newCluster(t, up)
	k.start(t)
	key := client.ObjectKeyFromObject(k.create(t, "nightly"))
	old := k.waitPhase(t, key, phase.Completed)
	require.NoError(t, k.c.Delete(context.Background(), &old))
	k.waitGone(t, key)

	k.create(t, "nightly")
	var b AppBackup
	eventually(t, "the new AppBackup's own run shows in its status", func() bool {
		var err error
		b, err = k.get(t, key)
		require.NoError(t, err)
		return b.Status.Phase != ""
	})
	require.NotEqual(t, old.UID, b.UID)
	b = k.waitPhase(t, key, phase.Completed)
	run, err := k.r.Store.GetRun(context.Background(), k.r.Kind.Owner(&b))
	require.NoError(t, err)
	require.Equal(t, string(b.UID), run.Owner.UID)
	_, err = k.r.Store.GetRun(context.Background(), k.r.Kind.Owner(&old))
	require.ErrorIs(t, err, operations.ErrUIDMismatch, "the store holds the new object's run, not the old one's")

	up.uploadsMu.Lock()
	defer up.uploadsMu.Unlock()
	perUID := map[string]int{}
	for id := range up.uploads {
		for _, uid := range []types.UID{old.UID, b.UID} {
			if strings.HasPrefix(id, "upload-"+string(uid)+"-") {
				perUID[string(uid)]++
			}
		}
	}
	require.Equal(t, map[string]int{string(old.UID): 3, string(b.UID): 3}, perUID, "uploads per object")
}

// TestClusterStatusConflictRetried makes the reconciler's first status write meet a 409
// Conflict for real: another client updates the AppBackup between the reconciler's read
// and its write. The next reconcile, which the other client's update brings, writes the
// status, which reaches Completed; the run does not fail, the other client's change
// stays, and the operator logs no error (start checks).
func TestClusterStatusConflictRetried(t *testing.T) {
	k := newCluster(t, newUploader(time.Millisecond, clock.System{}))
	var writes, conflicts atomic.Int32
	k.r.Client = touchingClient{Client: k.r.Client, beforeStatusWrite: func(ctx context.Context, obj client.Object) func(error) {
		if writes.Add(1) == 1 {
			var other AppBackup
			// On the controller's goroutine: a failure is reported, and the test goes on.
			assert.NoError(t, k.c.Get(ctx, client.ObjectKeyFromObject(obj), &other))
			other.Annotations = map[string]string{"example.itemops.io/touched": "by another client"}
			assert.NoError(t, k.c.Update(ctx, &other))
		}
		return func(err error) {
			if apierrors.IsConflict(err) {
				conflicts.Add(1)
			}
		}
	}}
	k.start(t)
	key := client.ObjectKeyFromObject(k.create(t, "nightly"))

	b := k.waitPhase(t, key, phase.Completed)
	require.GreaterOrEqual(t, conflicts.Load(), int32(1), "the first status write met a 409 Conflict")
	require.Equal(t, "by another client", b.Annotations["example.itemops.io/touched"])
	run, err := k.r.Store.GetRun(context.Background(), k.r.Kind.Owner(&b))
	require.NoError(t, err)
	require.Equal(t, phase.Completed, run.Phase)
	require.Empty(t, run.FailureReason)
	require.Equal(t, 3, b.Status.OperationsCompleted)
}

// TestClusterExample runs what `go run ./operator -cluster` runs, on the test binary's
// API server: the CRD installed (or found), an AppBackup through its run to Completed,
// then deleted.
func TestClusterExample(t *testing.T) {
	cfg := kube.Config(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out bytes.Buffer
	require.NoError(t, onCluster(ctx, &out, cfg, testManager, storeFlags{kind: "memory"}))
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	require.GreaterOrEqual(t, len(lines), 3, "output:\n%s", out.String())
	require.Regexp(t, `^created AppBackup shop/nightly-\w+$`, lines[0])
	require.Equal(t, "status: phase Completed, 3 of 3 operations completed", lines[len(lines)-2])
	require.Regexp(t, `^deleted AppBackup shop/nightly-\w+: its finalizer let it go once its run was deleted$`, lines[len(lines)-1])
}

// TestClusterExampleKubeStore runs what `go run ./operator -cluster -store=kube
// -install-store-crds -store-namespace=shop` runs, twice in one store namespace: the
// first run installs the store's CRDs and opens the store, the second finds both; a
// watch of the second sees its AppBackup's run made an ItemopsRun there, owned by the
// AppBackup, and deleted with it. (The test's API server runs no garbage collector: the
// finalizer deletes the run here.)
func TestClusterExampleKubeStore(t *testing.T) {
	cfg := kube.Config(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	f := storeFlags{kind: "kube", namespace: "shop", install: true}
	var out bytes.Buffer
	require.NoError(t, onCluster(ctx, &out, cfg, testManager, f), "the first run")
	require.Contains(t, out.String(), "status: phase Completed, 3 of 3 operations completed", "the first run's output")

	runs := schema.GroupVersionResource{Group: kubestore.Group, Version: kubestore.Version, Resource: "itemopsruns"}
	watch, err := dynamic.NewForConfigOrDie(cfg).Resource(runs).Namespace(f.namespace).Watch(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	defer watch.Stop()
	out.Reset()
	require.NoError(t, onCluster(ctx, &out, cfg, testManager, f), "the second run")
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	require.Regexp(t, `^created AppBackup shop/(nightly-\w+)$`, lines[0])
	name := strings.TrimPrefix(lines[0], "created AppBackup ")
	require.Equal(t, "status: phase Completed, 3 of 3 operations completed", lines[len(lines)-2])

	var seen []string
	for ev := range watch.ResultChan() {
		obj, ok := ev.Object.(*unstructured.Unstructured)
		require.True(t, ok, "watch event %s of %T", ev.Type, ev.Object)
		owner, _, _ := unstructured.NestedString(obj.Object, "spec", "owner", "name")
		if owner != name {
			continue
		}
		// The store found the AppBackup with the reference's UID before it created the
		// run's object, so a UID is all that the test need see of it.
		refs := obj.GetOwnerReferences()
		want := []metav1.OwnerReference{{APIVersion: GroupVersion.String(), Kind: "AppBackup", Name: strings.TrimPrefix(name, "shop/")}}
		require.Empty(t, cmp.Diff(want, refs, cmpopts.IgnoreFields(metav1.OwnerReference{}, "UID")), "the ownerReferences of the run of %s", name)
		require.NotEmpty(t, refs[0].UID, "the UID of the run's owner")
		if len(seen) == 0 || seen[len(seen)-1] != string(ev.Type) {
			seen = append(seen, string(ev.Type))
		}
		if ev.Type == apiwatch.Deleted {
			break
		}
	}
	require.Equal(t, []string{"ADDED", "MODIFIED", "DELETED"}, seen, "the watch's events of the run of %s", name)

	_, err = openStore(ctx, cfg, nil, storeFlags{kind: "bolt"})
	require.ErrorContains(t, err, "-store=bolt: want memory or kube")
}

// touchingClient is a client whose status writes call beforeStatusWrite first, and then
// the function it returns with the write's error.
type touchingClient struct {
	client.Client
	beforeStatusWrite func(context.Context, client.Object) func(error)
}

func (c touchingClient) Status() client.SubResourceWriter {
	return touchingStatus{SubResourceWriter: c.Client.Status(), before: c.beforeStatusWrite}
}

type touchingStatus struct {
	client.SubResourceWriter
	before func(context.Context, client.Object) func(error)
}

func (s touchingStatus) Update(ctx context.Context, obj client.Object, opts ...client.SubResourceUpdateOption) error {
	after := s.before(ctx, obj)
	err := s.SubResourceWriter.Update(ctx, obj, opts...)
	after(err)
	return err
}

// refusingStore is the operator's store, whose PutOperations fails while refuse is set,
// as a kubestore's writes fail for an operator that lacks the update right on
// itemopsruns.
type refusingStore struct {
	operations.Store
	refuse atomic.Bool
}

var errRefused = errors.New(`itemopsruns.store.itemops.io is forbidden: the operator may not update itemopsruns`)

func (s *refusingStore) PutOperations(ctx context.Context, o operations.Owner, ops []operations.Operation) error {
	if s.refuse.Load() {
		return errRefused
	}
	return s.Store.PutOperations(ctx, o, ops)
}

// TestClusterBlocked: while the operator's store refuses the Monitor's writes of an
// AppBackup's uploads, the AppBackup's status shows the condition Blocked (StoreError,
// with the store's error) and a Warning Event says so; once the store takes the writes
// again, the condition turns False (NotBlocked), a Normal Event says so, and the run
// goes on to Completed.
func TestClusterBlocked(t *testing.T) {
	store := &refusingStore{Store: memstore.New()}
	k := newClusterOn(t, store, newUploader(2*time.Second, clock.System{}))
	k.start(t)
	b := k.create(t, "nightly")
	key := client.ObjectKeyFromObject(b)
	k.waitPhase(t, key, phase.WaitingForPluginOperations)
	store.refuse.Store(true)

	var got AppBackup
	eventually(t, "the status shows the run blocked", func() bool {
		var err error
		got, err = k.get(t, key)
		require.NoError(t, err)
		c := meta.FindStatusCondition(got.Status.Conditions, controllerruntime.ConditionBlocked)
		return c != nil && c.Status == metav1.ConditionTrue
	})
	c := meta.FindStatusCondition(got.Status.Conditions, controllerruntime.ConditionBlocked)
	require.Equal(t, controllerruntime.ReasonStoreError, c.Reason)
	require.Contains(t, c.Message, errRefused.Error())
	eventually(t, "a Warning Event says the run is blocked", func() bool {
		return slices.ContainsFunc(k.events(t, got.UID), func(e string) bool {
			return strings.HasPrefix(e, "Warning StoreError Blocked: ") && strings.Contains(e, errRefused.Error())
		})
	})

	store.refuse.Store(false)
	got = k.waitPhase(t, key, phase.Completed)
	c = meta.FindStatusCondition(got.Status.Conditions, controllerruntime.ConditionBlocked)
	require.NotNil(t, c, "the condition Blocked once the run moves again")
	require.Equal(t, metav1.ConditionFalse, c.Status)
	require.Equal(t, controllerruntime.ReasonNotBlocked, c.Reason)
	eventually(t, "a Normal Event says the run is blocked no more", func() bool {
		return slices.ContainsFunc(k.events(t, got.UID), func(e string) bool {
			return strings.HasPrefix(e, "Normal NotBlocked Unblocked")
		})
	})
	// The Monitor logged each refused write as an error: the test made them.
	k.errs.mu.Lock()
	k.errs.msgs = slices.DeleteFunc(k.errs.msgs, func(m string) bool { return strings.Contains(m, errRefused.Error()) })
	k.errs.mu.Unlock()
}

// TestClusterOperatorServesTheView: the operator's manager serves the web view of its
// store at /ops/ of its metrics server, where the run of an AppBackup it works on shows.
func TestClusterOperatorServesTheView(t *testing.T) {
	cfg := kube.Config(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close()) // the manager listens there next
	opts := testManager
	opts.Metrics = metricsserver.Options{BindAddress: addr}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out bytes.Buffer
	done := make(chan error, 1)
	go func() { done <- onCluster(ctx, &out, cfg, opts, storeFlags{kind: "memory"}) }()
	var page string
	eventually(t, "the view at /ops/ lists a backup's run", func() bool {
		res, err := http.Get("http://" + addr + "/ops/?format=json")
		if err != nil {
			return false
		}
		defer res.Body.Close()
		b, err := io.ReadAll(res.Body)
		page = string(b)
		return err == nil && res.StatusCode == http.StatusOK && strings.Contains(page, "nightly-")
	})
	require.Regexp(t, `"kind":\s*"AppBackup",\s*"name":\s*"shop/nightly-`, page, "the run of the AppBackup, of its own kind")
	require.NoError(t, <-done)
}

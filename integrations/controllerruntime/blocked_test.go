package controllerruntime

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/require"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/operations/decorate"
	"github.com/itemops/itemops/operations/monitor"
	"github.com/itemops/itemops/operations/operationstest"
	"github.com/itemops/itemops/phase"
	"github.com/itemops/itemops/storage/memstore"
)

// TestAPIServerStoreErrorBlocksRun: a store that refuses the Monitor's writes for a run,
// as the API server refuses an operator without the update right on itemopsruns (403
// Forbidden, with a long message), keeps the run from moving. The operator's reconcile,
// which the Monitor asks for, shows it on the object: the condition Blocked is True,
// with reason StoreError and the error's text, cut to 1,024 bytes, and a Warning Event
// is recorded. Once the store takes the writes again the run completes, the condition
// is False (NotBlocked) and a Normal Event says so.
func TestAPIServerStoreErrorBlocksRun(t *testing.T) {
	scheme, c, ns := apiServerClient(t)
	ctx := context.Background()
	rec := eventRecorder(t, scheme)

	w := &widget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "w"}}
	require.NoError(t, c.Create(ctx, w))
	var refuse, done atomic.Bool
	denial := apierrors.NewForbidden(schema.GroupResource{Group: "itemops.io", Resource: "itemopsruns"}, "w",
		errors.New("User \"system:serviceaccount:ops:operator\" cannot update resource \"itemopsruns\": "+strings.Repeat("RBAC: access denied; ", 300)))
	store := decorate.Store(memstore.New(), func(ctx context.Context, call decorate.Call, do func(context.Context) error) error {
		if call.Write && refuse.Load() {
			return denial
		}
		return do(ctx)
	})
	tracker := &operationstest.Tracker{ProgressFunc: func(context.Context, operations.Operation) (operations.Progress, error) {
		return operations.Progress{Completed: done.Load()}, nil
	}}
	skipNameValidation := true
	mgr, err := manager.New(kube.Config(t), manager.Options{
		Scheme: scheme, Logger: logr.Discard(), Metrics: metricsserver.Options{BindAddress: "0"},
		Controller: ctrlconfig.Controller{SkipNameValidation: &skipNameValidation},
	})
	require.NoError(t, err)
	m, err := New(mgr, store, operationstest.Resolver(map[string]operations.Tracker{"p": tracker}),
		WithRegistry(nil), WithMonitorOptions(monitor.WithInterval(20*time.Millisecond)))
	require.NoError(t, err)
	kind := Kind{Name: phase.Backup}
	r := reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
		var got widget
		if err := c.Get(ctx, req.NamespacedName, &got); err != nil {
			return reconcile.Result{}, client.IgnoreNotFound(err)
		}
		o := OwnerOf(phase.Backup, &got)
		if _, err := store.GetRun(ctx, o); errors.Is(err, operations.ErrNotFound) {
			if _, err := m.StartRun(ctx, operations.Run{Owner: o}, func(context.Context) (operations.MainRun, error) {
				return operations.MainRun{Operations: []operations.Operation{{Action: "p", ID: "op-1"}}}, nil
			}); err != nil {
				return reconcile.Result{}, err
			}
		}
		before := got.Status.RunStatus
		var read RunStatus
		before.DeepCopyInto(&read)
		run, changed, err := got.Status.SetFromStore(ctx, store, o, got.Generation)
		if err != nil {
			return reconcile.Result{}, err
		}
		RecordPhaseChanges(rec, &got, read.Phase, run)
		blocked := m.RunBlocked(o)
		RecordBlocked(rec, &got, read, blocked)
		if got.Status.SetBlocked(blocked, got.Generation, time.Now()) || changed {
			return reconcile.Result{}, c.Status().Update(ctx, &got)
		}
		return reconcile.Result{}, nil
	})
	require.NoError(t, builder.ControllerManagedBy(mgr).Named("blocked").For(&widget{}).
		WatchesRawSource(m.Source(kind)).Complete(Gate(m, r)))
	ctx, stop := context.WithCancel(ctx)
	managerDone := make(chan error, 1)
	go func() { managerDone <- mgr.Start(ctx) }()
	defer func() {
		stop()
		require.NoError(t, <-managerDone)
	}()

	// statusUntil reads w until cond holds of its status, for a minute at most (a guard
	// against hanging, not a timing).
	statusUntil := func(what string, cond func(RunStatus) bool) RunStatus {
		for deadline := time.Now().Add(time.Minute); ; time.Sleep(20 * time.Millisecond) {
			var got widget
			require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(w), &got))
			if cond(got.Status.RunStatus) {
				return got.Status.RunStatus
			}
			require.False(t, time.Now().After(deadline), "%s: not within a minute; status %+v", what, got.Status.RunStatus)
		}
	}
	eventsUntil := func(what string, cond func(eventsv1.Event) bool) eventsv1.Event {
		for deadline := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
			var list eventsv1.EventList
			require.NoError(t, c.List(ctx, &list, client.InNamespace(ns)))
			for _, e := range list.Items {
				if cond(e) {
					return e
				}
			}
			require.False(t, time.Now().After(deadline), "%s: no such Event within a minute", what)
		}
	}
	statusUntil("the run waits for its operation", func(s RunStatus) bool {
		return s.Phase == string(phase.WaitingForPluginOperations)
	})

	refuse.Store(true)
	done.Store(true) // the operation completes; the Monitor's write of it is refused
	s := statusUntil("the condition Blocked", func(s RunStatus) bool {
		return meta.IsStatusConditionTrue(s.Conditions, ConditionBlocked)
	})
	cond := meta.FindStatusCondition(s.Conditions, ConditionBlocked)
	require.Equal(t, ReasonStoreError, cond.Reason)
	require.Contains(t, cond.Message, "cannot update resource \"itemopsruns\"")
	require.LessOrEqual(t, len(cond.Message), 1024, "the message is bounded")
	require.True(t, strings.HasSuffix(cond.Message, "…") && utf8.ValidString(cond.Message), "the cut message ends in an ellipsis")
	require.Equal(t, string(phase.WaitingForPluginOperations), s.Phase, "the run did not move")
	blockedErr := m.RunBlocked(OwnerOf(phase.Backup, w))
	var be *BlockedError
	require.ErrorAs(t, blockedErr, &be)
	require.True(t, apierrors.IsForbidden(blockedErr), "the store's error is seen through: %v", blockedErr)
	e := eventsUntil("the Warning Event", func(e eventsv1.Event) bool { return e.Reason == ReasonStoreError })
	require.Equal(t, "Warning", e.Type)
	require.Equal(t, "Blocked", e.Action)
	require.Equal(t, cond.Message, e.Note)

	refuse.Store(false)
	s = statusUntil("the run completes, no longer blocked", func(s RunStatus) bool {
		return s.Phase == string(phase.Completed) && meta.IsStatusConditionFalse(s.Conditions, ConditionBlocked)
	})
	cond = meta.FindStatusCondition(s.Conditions, ConditionBlocked)
	require.Equal(t, ReasonNotBlocked, cond.Reason)
	require.Empty(t, cond.Message)
	require.NoError(t, m.RunBlocked(OwnerOf(phase.Backup, w)))
	e = eventsUntil("the Normal Event", func(e eventsv1.Event) bool { return e.Reason == ReasonNotBlocked })
	require.Equal(t, "Normal", e.Type)
	require.Equal(t, "Unblocked", e.Action)
}

// TestSetBlocked: SetBlocked adds no condition to an object never blocked; it sets
// Blocked True with the error's reason and its text cut to 1,024 bytes at a rune's
// boundary, keeps the transition time while the status stays, and sets it False once
// the error is gone. RecordBlockedFor records an Event only when the condition changes.
func TestSetBlocked(t *testing.T) {
	t1 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	var s RunStatus
	require.False(t, s.SetBlocked(nil, 1, t1), "a status never blocked changed")
	require.Empty(t, s.Conditions)

	long := &BlockedError{Owner: operations.Owner{Kind: phase.Backup, Name: "ns/w"}, Method: "ClaimRun",
		Err: errors.New(strings.Repeat("é", 2000))}
	rec := &captureRecorder{}
	RecordBlockedFor(rec, &widget{}, s, long)
	require.True(t, s.SetBlocked(long, 1, t1))
	c := meta.FindStatusCondition(s.Conditions, ConditionBlocked)
	require.Equal(t, metav1.ConditionTrue, c.Status)
	require.Equal(t, ReasonClaimError, c.Reason)
	require.LessOrEqual(t, len(c.Message), 1024)
	require.True(t, utf8.ValidString(c.Message) && strings.HasSuffix(c.Message, "…"))
	RecordBlockedFor(rec, &widget{}, s, long) // the same error: no second Event
	require.False(t, s.SetBlocked(long, 1, t1.Add(time.Hour)), "the same error changed the status")

	RecordBlockedFor(rec, &widget{}, s, nil)
	require.True(t, s.SetBlocked(nil, 1, t1.Add(time.Hour)))
	c = meta.FindStatusCondition(s.Conditions, ConditionBlocked)
	require.Equal(t, metav1.ConditionFalse, c.Status)
	require.Equal(t, ReasonNotBlocked, c.Reason)
	require.True(t, c.LastTransitionTime.Time.Equal(t1.Add(time.Hour)))
	RecordBlockedFor(rec, &widget{}, s, nil)
	require.Equal(t, []string{"Warning " + ReasonClaimError, "Normal " + ReasonNotBlocked}, rec.events)
}

// captureRecorder is a record.EventRecorder that keeps the type and reason of each Event.
type captureRecorder struct{ events []string }

func (r *captureRecorder) Event(_ runtime.Object, typ, reason, _ string) {
	r.events = append(r.events, typ+" "+reason)
}
func (r *captureRecorder) Eventf(obj runtime.Object, typ, reason, _ string, _ ...any) {
	r.Event(obj, typ, reason, "")
}
func (r *captureRecorder) AnnotatedEventf(obj runtime.Object, _ map[string]string, typ, reason, _ string, _ ...any) {
	r.Event(obj, typ, reason, "")
}

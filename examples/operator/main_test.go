package main

import (
	"bytes"
	"context"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/itemops/itemops/clock/clocktest"
	itemotel "github.com/itemops/itemops/integrations/otel"
	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/phase"
)

// The AppBackup goes from WaitingForPluginOperations to Completed while the Monitor polls
// its three uploads, and its status says so.
func TestExample(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out bytes.Buffer
	require.NoError(t, example(ctx, &out))
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	require.Equal(t, "status: phase WaitingForPluginOperations, 0 of 3 operations completed", lines[0])
	require.Equal(t, "status: phase Completed, 3 of 3 operations completed", lines[len(lines)-1])
}

// TestExampleTraces runs the example with its Monitor traced, one option more
// (integrations/otel's, as main's -trace gives it): each upload's Progress calls have
// spans under the run's span, under a pass's, and the run's span that finalizes it
// shows its move to Completed.
func TestExampleTraces(t *testing.T) {
	spans := tracetest.NewSpanRecorder()
	provider := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	defer func() { require.NoError(t, provider.Shutdown(context.Background())) }()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, example(ctx, io.Discard, itemotel.Options(itemotel.WithTracerProvider(provider))...))

	byID := map[trace.SpanID]sdktrace.ReadOnlySpan{}
	for _, s := range spans.Ended() {
		byID[s.SpanContext().SpanID()] = s
	}
	attr := func(s sdktrace.ReadOnlySpan, key string) string {
		for _, kv := range s.Attributes() {
			if string(kv.Key) == key {
				return kv.Value.String()
			}
		}
		return ""
	}
	uploads := map[string]bool{} // the operations with a Progress span
	completed := false
	for _, s := range byID {
		switch s.Name() {
		case "itemops.progress":
			require.Equal(t, "example.itemops.io/uploader", attr(s, "itemops.plugin"))
			run, ok := byID[s.Parent().SpanID()]
			require.True(t, ok && run.Name() == "itemops.run", "a Progress span's parent is a run's span")
			pass, ok := byID[run.Parent().SpanID()]
			require.True(t, ok && pass.Name() == "itemops.pass", "a run span's parent is a pass's span")
			uploads[attr(s, "itemops.operation.id")] = true
		case "itemops.run":
			for _, ev := range s.Events() {
				for _, kv := range ev.Attributes {
					completed = completed || ev.Name == "itemops.phase_change" && string(kv.Key) == "itemops.phase.to" && kv.Value.String() == "Completed"
				}
			}
		}
	}
	require.Len(t, uploads, 3, "a Progress span for each of the three uploads")
	require.True(t, completed, "a run span shows the move to Completed")
}

var key = types.NamespacedName{Namespace: "shop", Name: "nightly"}

// toCompleted drives the AppBackup of r to Completed with the fake clock: reconcile,
// a Monitor pass, the uploads' time, another pass, reconcile.
func toCompleted(t *testing.T, r *BackupReconciler, clock *clocktest.Clock) AppBackup {
	t.Helper()
	ctx := context.Background()
	_, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: key})
	require.NoError(t, err)
	_, err = r.Monitor.RunOnce(ctx)
	require.NoError(t, err)
	clock.Advance(time.Second)
	_, err = r.Monitor.RunOnce(ctx)
	require.NoError(t, err)
	_, err = r.Reconcile(ctx, ctrl.Request{NamespacedName: key})
	require.NoError(t, err)
	var b AppBackup
	require.NoError(t, r.Client.Get(ctx, key, &b))
	return b
}

// far is a time far ahead of any system clock: the Monitor's clock and the times it
// stamps are the fake clock's, whatever the system's says.
var far = time.Date(2126, 1, 2, 3, 0, 0, 0, time.UTC)

// TestFakeClockToCompleted reaches Completed without waiting, with an Event for each
// phase change and the Ready condition set, on a fake clock a century ahead of the
// system's.
func TestFakeClockToCompleted(t *testing.T) {
	clock := clocktest.NewClock(far)
	r, _, _, err := newReconciler(clock, nil, newBackup("uid-1"))
	require.NoError(t, err)
	b := toCompleted(t, r, clock)
	require.Equal(t, "Completed", b.Status.Phase)
	require.Equal(t, 3, b.Status.OperationsCompleted)
	require.Equal(t, "Ready", b.Status.Conditions[0].Type)
	require.Equal(t, "True", string(b.Status.Conditions[0].Status))

	rec := r.Events.(*events.FakeRecorder)
	close(rec.Events)
	var got []string
	for e := range rec.Events {
		got = append(got, e)
	}
	want := []string{
		"Normal InProgress New → InProgress: main run started",
		"Normal WaitingForPluginOperations InProgress → WaitingForPluginOperations: main run ended: 3 operations started",
		"Normal Finalizing WaitingForPluginOperations → Finalizing: all operations ended",
		"Normal Completed Finalizing → Completed: finalized",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	run, err := r.Store.GetRun(context.Background(), r.Kind.Owner(&b))
	require.NoError(t, err)
	require.Equal(t, far, run.Created)
	require.Equal(t, phase.Kind("AppBackup"), run.Owner.Kind, "the run is of the operator's own kind")
	require.Equal(t, phase.Profile{Base: phase.Backup}, run.Profile)
}

// TestDeletedBackup deletes an AppBackup while its uploads run: the reconcile that sees
// the deletion cancels every upload, deletes the run, and lets the AppBackup go.
func TestDeletedBackup(t *testing.T) {
	ctx := context.Background()
	clock := clocktest.NewClock(far)
	r, _, up, err := newReconciler(clock, nil, newBackup("uid-1"))
	require.NoError(t, err)
	_, err = r.Reconcile(ctx, ctrl.Request{NamespacedName: key})
	require.NoError(t, err)
	require.Len(t, up.running(), 3)

	var b AppBackup
	require.NoError(t, r.Client.Get(ctx, key, &b))
	require.NoError(t, r.Client.Delete(ctx, &b))
	_, err = r.Reconcile(ctx, ctrl.Request{NamespacedName: key})
	require.NoError(t, err)
	require.Empty(t, up.running(), "uploads left running")
	require.True(t, apierrors.IsNotFound(r.Client.Get(ctx, key, &b)), "the AppBackup is gone")
	_, err = r.Store.GetRun(ctx, r.Kind.Owner(newBackup("uid-1")))
	require.ErrorIs(t, err, operations.ErrNotFound)
}

// TestRecreatedBackup deletes a finished AppBackup and creates it again under the same
// name: the new object gets a run of its own, not the old one's Completed status.
func TestRecreatedBackup(t *testing.T) {
	ctx := context.Background()
	clock := clocktest.NewClock(far)
	r, _, _, err := newReconciler(clock, nil, newBackup("uid-1"))
	require.NoError(t, err)
	require.Equal(t, "Completed", toCompleted(t, r, clock).Status.Phase)

	var old AppBackup
	require.NoError(t, r.Client.Get(ctx, key, &old))
	require.NoError(t, r.Client.Delete(ctx, &old))
	_, err = r.Reconcile(ctx, ctrl.Request{NamespacedName: key}) // the finalizer's work
	require.NoError(t, err)
	require.NoError(t, r.Client.Create(ctx, newBackup("uid-2")))
	_, err = r.Reconcile(ctx, ctrl.Request{NamespacedName: key})
	require.NoError(t, err)
	var b AppBackup
	require.NoError(t, r.Client.Get(ctx, key, &b))
	require.Equal(t, "WaitingForPluginOperations", b.Status.Phase, "the new object's own run")
	require.Equal(t, 0, b.Status.OperationsCompleted)

	b = toCompleted(t, r, clock)
	require.Equal(t, "Completed", b.Status.Phase)
	require.Equal(t, types.UID("uid-2"), b.UID)
}

// running returns the IDs of the uploads neither done nor cancelled, sorted.
func (u *uploader) running() []string {
	u.uploadsMu.Lock()
	defer u.uploadsMu.Unlock()
	var ids []string
	for id, started := range u.uploads {
		if !u.cancelled[id] && u.clock.Now().Sub(started) < u.took {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids
}

// TestRunsOfTheOwnKind: the AppBackup's run is of the kind AppBackup, and the reason
// Recover gives a run a crash left InProgress names that kind; the status's conditions
// carry it.
func TestRunsOfTheOwnKind(t *testing.T) {
	ctx := context.Background()
	clock := clocktest.NewClock(far)
	r, _, _, err := newReconciler(clock, nil, newBackup("uid-1"))
	require.NoError(t, err)
	var b AppBackup
	require.NoError(t, r.Client.Get(ctx, key, &b))
	crashed := r.Kind.Run(&b)
	crashed.Phase, crashed.Created = phase.New, far
	require.NoError(t, crashed.SetPhase(phase.InProgress, "main run started", far))
	require.NoError(t, r.Store.CreateRun(ctx, crashed))
	_, err = r.Monitor.Recover(ctx)
	require.NoError(t, err)

	_, err = r.Reconcile(ctx, ctrl.Request{NamespacedName: key})
	require.NoError(t, err)
	require.NoError(t, r.Client.Get(ctx, key, &b))
	reason := `found an AppBackup with status "InProgress" during the server starting, mark it as "Failed"`
	require.Equal(t, "Failed", b.Status.Phase)
	require.Equal(t, reason, b.Status.FailureReason)
	require.Equal(t, "Degraded", b.Status.Conditions[2].Type)
	require.Equal(t, reason, b.Status.Conditions[2].Message)
	run, err := r.Store.GetRun(ctx, r.Kind.Owner(&b))
	require.NoError(t, err)
	require.Equal(t, phase.Kind("AppBackup"), run.Owner.Kind)
}

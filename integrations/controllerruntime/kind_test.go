package controllerruntime

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/operations/monitor"
	"github.com/itemops/itemops/phase"
	"github.com/itemops/itemops/storage/memstore"
)

func TestDeclareKind(t *testing.T) {
	k, err := DeclareKind("DatabaseSnapshot", phase.Backup, phase.WithQueue())
	require.NoError(t, err)
	require.Empty(t, cmp.Diff(Kind{Name: "DatabaseSnapshot", Profile: phase.Profile{Queue: true, Base: phase.Backup}}, k))
	obj := newConfigMap("uid-1")
	require.Empty(t, cmp.Diff(operations.Run{
		Owner:   operations.Owner{Kind: "DatabaseSnapshot", Name: "shop/nightly", UID: "uid-1"},
		Profile: phase.Profile{Queue: true, Base: phase.Backup},
	}, k.Run(obj)))
	for _, tc := range []struct{ name, base phase.Kind }{{"Database-Snapshot", phase.Backup}, {"", phase.Backup}, {"DatabaseSnapshot", "Migration"}, {phase.Backup, phase.Restore}} {
		_, err := DeclareKind(tc.name, tc.base)
		require.ErrorIs(t, err, phase.ErrUnknownKind, "%q following %q", tc.name, tc.base)
	}

	// A kind that names its phases: the fewest, or a set that lacks a required one.
	fewest := []phase.Phase{phase.New, phase.InProgress, phase.WaitingForPluginOperations,
		phase.WaitingForPluginOperationsPartiallyFailed, phase.Completed, phase.PartiallyFailed, phase.Failed}
	k, err = DeclareKind("Migration", phase.Backup, phase.WithPhases(fewest...))
	require.NoError(t, err)
	require.Empty(t, cmp.Diff(Kind{Name: "Migration", Profile: phase.Profile{Base: phase.Backup, Phases: phase.SetOf(fewest...)}}, k))
	_, err = DeclareKind("Migration", phase.Backup, phase.WithPhases(fewest[1:]...))
	require.ErrorIs(t, err, phase.ErrUnknownPhase)
	require.ErrorContains(t, err, "lack New")
}

// TestOwnKindOnManager: an operator whose resource is a DatabaseSnapshot declares that
// kind once, and its runs, the reasons its status and Events show, and the metrics say
// DatabaseSnapshot, never backup; its run goes through the phases of a backup, and its
// deletion cancels its jobs.
func TestOwnKindOnManager(t *testing.T) {
	ctx := context.Background()
	snapshots, err := DeclareKind("DatabaseSnapshot", phase.Backup)
	require.NoError(t, err)
	c := fake.NewClientBuilder().WithObjects(newConfigMap("uid-1")).Build()
	store := memstore.New()
	// The run of another snapshot, left InProgress by a crash.
	crashed := operations.Owner{Kind: "DatabaseSnapshot", Name: "shop/crashed", UID: "uid-0"}
	left := operations.Run{Owner: crashed, Phase: phase.New, Profile: snapshots.Profile, Created: t0}
	require.NoError(t, left.SetPhase(phase.InProgress, "main run started", t0))
	require.NoError(t, store.CreateRun(ctx, left))

	j := newJobs()
	j.progress = make(chan string, 100)
	passes := make(chan monitor.PassStats, 100)
	// An interval of an hour: the Monitor polls the run when StartRun wakes it, and the
	// deletion cancels through Poll, so the test sees no pass but those.
	m := startManagerOn(t, c, store, resolverOf(t, c, j), monitor.WithInterval(time.Hour),
		monitor.WithObserver(monitor.Observer{Pass: func(s monitor.PassStats) {
			select {
			case passes <- s:
			default:
			}
		}}))

	// Recover failed the crashed run with a reason that names its kind, which its
	// status conditions and its Events carry.
	failed, err := store.GetRun(ctx, crashed)
	require.NoError(t, err)
	reason := `found a DatabaseSnapshot with status "InProgress" during the server starting, mark it as "Failed"`
	require.Equal(t, phase.Failed, failed.Phase)
	require.Equal(t, reason, failed.FailureReason)
	var status RunStatus
	require.True(t, status.Set(failed, nil, 1))
	degraded := metav1.Condition{Type: ConditionDegraded, Status: metav1.ConditionTrue, ObservedGeneration: 1,
		Reason: string(phase.Failed), Message: reason, LastTransitionTime: metav1.NewTime(failed.Updated)}
	require.Empty(t, cmp.Diff(degraded, status.Conditions[2]))
	rec := events.NewFakeRecorder(10)
	RecordPhaseChanges(rec, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "crashed"}}, "", failed)
	close(rec.Events)
	var got []string
	for e := range rec.Events {
		got = append(got, e)
	}
	require.Equal(t, []string{
		"Normal InProgress New → InProgress: main run started",
		"Warning Failed InProgress → Failed: " + reason,
	}, got)

	// The operator's reconcile, with its kind declared once.
	reconcileSnapshot := func(main func(context.Context) (operations.MainRun, error)) error {
		var obj corev1.ConfigMap
		if err := c.Get(ctx, cmKey, &obj); err != nil {
			return client.IgnoreNotFound(err)
		}
		if deleted, err := m.HandleDeletion(ctx, c, &obj, snapshots); deleted || err != nil {
			return err
		}
		_, err := m.StartRun(ctx, snapshots.Run(&obj), main)
		return err
	}
	require.NoError(t, reconcileSnapshot(j.start("a", "b")))
	<-j.progress // the Monitor polls them
	o := snapshots.Owner(newConfigMap("uid-1"))
	run, err := store.GetRun(ctx, o)
	require.NoError(t, err)
	require.Equal(t, phase.Kind("DatabaseSnapshot"), run.Owner.Kind)
	require.Equal(t, snapshots.Profile, run.Profile)
	require.Equal(t, phase.WaitingForPluginOperations, run.Phase)
	require.NoError(t, reconcileSnapshot(j.start("a", "b")), "a second reconcile starts nothing")

	// The metrics count the run under its kind, once a pass has seen it.
	for seen := false; !seen; {
		select {
		case s := <-passes:
			seen = slicesContainKind(s.RunPhases, "DatabaseSnapshot")
		case <-time.After(time.Minute): // a guard against hanging: the woken pass comes at once
			t.Fatal("no pass counted the run")
		}
	}
	series := gatherSeries(t, metrics.Registry)
	require.Equal(t, 1.0, series[`itemops_runs{kind="DatabaseSnapshot",monitor="default",phase="WaitingForPluginOperations"}`], "series: %v", series)

	// Deleting the object cancels its jobs, and its run goes.
	var obj corev1.ConfigMap
	require.NoError(t, c.Get(ctx, cmKey, &obj))
	require.NoError(t, c.Delete(ctx, &obj))
	require.NoError(t, reconcileSnapshot(j.start("never")))
	require.Empty(t, j.left(), "jobs left running")
	_, err = store.GetRun(ctx, o)
	require.ErrorIs(t, err, operations.ErrNotFound)
	require.True(t, apierrors.IsNotFound(c.Get(ctx, cmKey, &obj)))

	// Nothing the operator's user sees called the run a backup.
	for _, text := range append(got, failed.FailureReason, status.Conditions[0].Message) {
		require.NotContains(t, strings.ToLower(text), "backup")
	}
}

func slicesContainKind(counts []monitor.PhaseCount, kind phase.Kind) bool {
	for _, c := range counts {
		if c.Kind == kind {
			return true
		}
	}
	return false
}

package controllerruntime

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/phase"
)

// runThrough returns a backup run moved through phases, one minute apart from t0.
func runThrough(t *testing.T, phases ...phase.Phase) operations.Run {
	t.Helper()
	r := operations.Run{Owner: operations.Owner{Kind: phase.Backup, Name: "shop/nightly"}, Phase: phase.New, Created: t0}
	for i, p := range phases {
		require.NoError(t, r.SetPhase(p, "to "+string(p), t0.Add(time.Duration(i+1)*time.Minute)))
	}
	return r
}

func conditions(at time.Time, reason, message string, ready, progressing, degraded metav1.ConditionStatus) []metav1.Condition {
	c := func(typ string, s metav1.ConditionStatus) metav1.Condition {
		return metav1.Condition{Type: typ, Status: s, ObservedGeneration: 3, Reason: reason, Message: message, LastTransitionTime: metav1.NewTime(at)}
	}
	return []metav1.Condition{c(ConditionReady, ready), c(ConditionProgressing, progressing), c(ConditionDegraded, degraded)}
}

func TestRunStatusSet(t *testing.T) {
	const T, F = metav1.ConditionTrue, metav1.ConditionFalse
	ops := []operations.Operation{
		{ID: "a", Status: operations.Status{Phase: operations.OperationCompleted}},
		{ID: "b", Status: operations.Status{Phase: operations.OperationFailed}},
		{ID: "c", Status: operations.Status{Phase: operations.OperationInProgress}},
	}
	waiting := runThrough(t, phase.InProgress, phase.WaitingForPluginOperations)
	waiting.Warnings = 2
	partial := runThrough(t, phase.InProgress, phase.WaitingForPluginOperationsPartiallyFailed, phase.FinalizingPartiallyFailed, phase.PartiallyFailed)
	partial.Errors = 1
	done := runThrough(t, phase.InProgress, phase.WaitingForPluginOperations, phase.Finalizing, phase.Completed)
	failed := runThrough(t, phase.InProgress, phase.Failed)
	failed.FailureReason = "to Failed"
	tests := []struct {
		name string
		run  operations.Run
		want RunStatus
	}{
		{"waiting", waiting, RunStatus{Phase: "WaitingForPluginOperations", Operations: 3, OperationsCompleted: 1, OperationsFailed: 1, Warnings: 2,
			Conditions: conditions(t0.Add(2*time.Minute), "WaitingForPluginOperations", "to WaitingForPluginOperations", F, T, F)}},
		{"partially failed", partial, RunStatus{Phase: "PartiallyFailed", Operations: 3, OperationsCompleted: 1, OperationsFailed: 1, Errors: 1,
			Conditions: conditions(t0.Add(4*time.Minute), "PartiallyFailed", "to PartiallyFailed", F, F, T)}},
		{"completed", done, RunStatus{Phase: "Completed", Operations: 3, OperationsCompleted: 1, OperationsFailed: 1,
			Conditions: conditions(t0.Add(4*time.Minute), "Completed", "to Completed", T, F, F)}},
		{"failed", failed, RunStatus{Phase: "Failed", Operations: 3, OperationsCompleted: 1, OperationsFailed: 1, FailureReason: "to Failed",
			Conditions: conditions(t0.Add(2*time.Minute), "Failed", "to Failed", F, F, T)}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// Every case shows the same operations: c, the one unfinished, and b, the
			// one failed; none reports a time, so the run last moved at its last
			// phase change.
			tc.want.SlowestOperation = &OperationStatus{ID: "c", Phase: "InProgress"}
			tc.want.FailedOperation = &OperationStatus{ID: "b", Phase: "Failed"}
			tc.want.LastProgressTime = statusTime(tc.run.Updated)
			var s RunStatus
			require.True(t, s.Set(tc.run, ops, 3))
			if diff := cmp.Diff(tc.want, s); diff != "" {
				t.Errorf("Set (-want +got):\n%s", diff)
			}
			require.False(t, s.Set(tc.run, ops, 3), "setting the same run again changes nothing")
		})
	}
}

// A condition whose status does not change keeps its transition time.
func TestRunStatusKeepsTransitionTime(t *testing.T) {
	var s RunStatus
	s.Set(runThrough(t, phase.InProgress), nil, 1)
	require.True(t, s.Set(runThrough(t, phase.InProgress, phase.WaitingForPluginOperations), nil, 1))
	progressing := s.Conditions[1]
	require.Equal(t, ConditionProgressing, progressing.Type)
	require.Equal(t, t0.Add(time.Minute), progressing.LastTransitionTime.Time, "still True since InProgress")
	require.Equal(t, "WaitingForPluginOperations", progressing.Reason)
}

// TestRecordPhaseChanges: both recorders, that of the Events API and the core one, get
// the same Events.
func TestRecordPhaseChanges(t *testing.T) {
	obj := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "nightly"}}
	run := runThrough(t, phase.InProgress, phase.WaitingForPluginOperationsPartiallyFailed, phase.FinalizingPartiallyFailed, phase.PartiallyFailed)
	for _, tc := range []struct {
		name, from string
		want       []string
	}{
		{"from the status's phase", "WaitingForPluginOperationsPartiallyFailed", []string{
			"Warning FinalizingPartiallyFailed WaitingForPluginOperationsPartiallyFailed → FinalizingPartiallyFailed: to FinalizingPartiallyFailed",
			"Warning PartiallyFailed FinalizingPartiallyFailed → PartiallyFailed: to PartiallyFailed",
		}},
		{"from an empty status", "", []string{
			"Normal InProgress New → InProgress: to InProgress",
			"Warning WaitingForPluginOperationsPartiallyFailed InProgress → WaitingForPluginOperationsPartiallyFailed: to WaitingForPluginOperationsPartiallyFailed",
			"Warning FinalizingPartiallyFailed WaitingForPluginOperationsPartiallyFailed → FinalizingPartiallyFailed: to FinalizingPartiallyFailed",
			"Warning PartiallyFailed FinalizingPartiallyFailed → PartiallyFailed: to PartiallyFailed",
		}},
		{"up to date", "PartiallyFailed", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := events.NewFakeRecorder(10)
			RecordPhaseChanges(rec, obj, tc.from, run)
			if diff := cmp.Diff(tc.want, drain(rec.Events)); diff != "" {
				t.Errorf("events of RecordPhaseChanges (-want +got):\n%s", diff)
			}
			core := record.NewFakeRecorder(10)
			RecordPhaseChangesFor(core, obj, tc.from, run)
			if diff := cmp.Diff(tc.want, drain(core.Events)); diff != "" {
				t.Errorf("events of RecordPhaseChangesFor (-want +got):\n%s", diff)
			}
		})
	}
}

// drain returns what events holds, closing it.
func drain(events chan string) []string {
	close(events)
	var got []string
	for e := range events {
		got = append(got, e)
	}
	return got
}

// What every manager gives, from controller-runtime v0.19 on, is what
// RecordPhaseChangesFor takes.
var _ func(manager.Manager, string) record.EventRecorder = manager.Manager.GetEventRecorderFor

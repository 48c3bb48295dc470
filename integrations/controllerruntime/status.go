package controllerruntime

import (
	"context"
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/tools/record"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/phase"
)

// The condition types [RunStatus.Set] keeps.
const (
	// ConditionReady is True once the run has Completed.
	ConditionReady = "Ready"
	// ConditionProgressing is True while the run is unfinished.
	ConditionProgressing = "Progressing"
	// ConditionDegraded is True once something went wrong: the run is Failed,
	// FailedValidation, or in a partially failed phase.
	ConditionDegraded = "Degraded"
)

// RunStatus is the part of an object's status that mirrors its run. Embed it in the
// status type, inline:
//
//	type AppBackupStatus struct {
//		controllerruntime.RunStatus `json:",inline"`
//	}
type RunStatus struct {
	// Phase is the run's phase (one of package phase's).
	Phase string `json:"phase,omitempty"`
	// Operations counts the run's operations, OperationsCompleted and OperationsFailed
	// those that ended so.
	Operations          int `json:"operations,omitempty"`
	OperationsCompleted int `json:"operationsCompleted,omitempty"`
	OperationsFailed    int `json:"operationsFailed,omitempty"`
	// Errors and Warnings are the run's counts.
	Errors   int `json:"errors,omitempty"`
	Warnings int `json:"warnings,omitempty"`
	// FailureReason says why a Failed run failed.
	FailureReason string `json:"failureReason,omitempty"`
	// Conditions are Ready, Progressing and Degraded, each with the run's phase as its
	// reason and the reason of the run's last phase change as its message.
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// DeepCopyInto copies s into out, sharing no memory.
func (s *RunStatus) DeepCopyInto(out *RunStatus) {
	*out = *s
	out.Conditions = slices.Clone(s.Conditions)
	for i := range out.Conditions {
		s.Conditions[i].DeepCopyInto(&out.Conditions[i])
	}
}

// Set copies run and the counts of ops, the run's operations, into s; generation is the
// object's metadata.generation, recorded as each condition's ObservedGeneration. A
// condition's LastTransitionTime is the time of the run's last phase change when its
// status changes, and is kept otherwise. Set reports whether s changed.
func (s *RunStatus) Set(run operations.Run, ops []operations.Operation, generation int64) bool {
	var before RunStatus
	s.DeepCopyInto(&before)
	s.Phase = string(run.Phase)
	s.Operations, s.OperationsCompleted, s.OperationsFailed = len(ops), 0, 0
	for _, op := range ops {
		switch op.Status.Phase {
		case operations.OperationCompleted:
			s.OperationsCompleted++
		case operations.OperationFailed:
			s.OperationsFailed++
		}
	}
	s.Errors, s.Warnings, s.FailureReason = run.Errors, run.Warnings, run.FailureReason

	p := run.Phase
	degraded := p == phase.Failed || p == phase.FailedValidation || phase.IsPartiallyFailed(p)
	at := metav1.NewTime(run.Updated)
	if run.Updated.IsZero() {
		at = metav1.NewTime(run.Created)
	}
	message := ""
	if n := len(run.History); n > 0 {
		message = run.History[n-1].Reason
	}
	for _, c := range []struct {
		typ string
		on  bool
	}{
		{ConditionReady, p == phase.Completed},
		{ConditionProgressing, !phase.IsTerminal(p)},
		{ConditionDegraded, degraded},
	} {
		status := metav1.ConditionFalse
		if c.on {
			status = metav1.ConditionTrue
		}
		meta.SetStatusCondition(&s.Conditions, metav1.Condition{
			Type: c.typ, Status: status, ObservedGeneration: generation,
			Reason: string(p), Message: message, LastTransitionTime: at,
		})
	}
	return !equalStatus(before, *s)
}

func equalStatus(a, b RunStatus) bool {
	type scalars struct {
		phase, reason              string
		ops, done, failed, errs, w int
	}
	sa := scalars{a.Phase, a.FailureReason, a.Operations, a.OperationsCompleted, a.OperationsFailed, a.Errors, a.Warnings}
	sb := scalars{b.Phase, b.FailureReason, b.Operations, b.OperationsCompleted, b.OperationsFailed, b.Errors, b.Warnings}
	return sa == sb && slices.EqualFunc(a.Conditions, b.Conditions, func(x, y metav1.Condition) bool {
		return x.Type == y.Type && x.Status == y.Status && x.ObservedGeneration == y.ObservedGeneration &&
			x.Reason == y.Reason && x.Message == y.Message && x.LastTransitionTime.Equal(&y.LastTransitionTime)
	})
}

// SetFromStore reads the run of o and its operations from store and sets them into s (see
// [RunStatus.Set]). It returns the run and whether s changed; it fails with the store's
// errors (among them [operations.ErrNotFound] and [operations.ErrUIDMismatch]), leaving s
// unchanged.
func (s *RunStatus) SetFromStore(ctx context.Context, store operations.Store, o operations.Owner, generation int64) (operations.Run, bool, error) {
	run, err := store.GetRun(ctx, o)
	if err != nil {
		return operations.Run{}, false, err
	}
	ops, err := store.ListOperations(ctx, o, operations.OperationFilter{})
	if err != nil {
		return operations.Run{}, false, err
	}
	return run, s.Set(run, ops, generation), nil
}

// RecordPhaseChanges emits an Event on obj through rec for each phase change of run after
// the last one that reached from, the phase obj's status showed (every change when from
// is empty or not in the history): type Normal, or Warning when the phase reached is
// Failed, FailedValidation or partially failed; the phase reached as reason, "PhaseChange"
// as action, and "<from> → <to>: <the change's reason>" as note. Call it before the new
// status is written, with the phase the status had; a status write that fails then
// repeats the Events on the next reconcile, which the Events API counts as one series.
// The Events name obj without its resourceVersion, so that they are the same Events to
// rec when the repeat comes from a newer version of obj (a status write that met a 409
// Conflict), not new ones.
//
// A manager gives rec with GetEventRecorder(name) in controller-runtime v0.24 and later;
// with the GetEventRecorderFor of older managers, use [RecordPhaseChangesFor].
func RecordPhaseChanges(rec events.EventRecorder, obj runtime.Object, from string, run operations.Run) {
	obj = withoutResourceVersion(obj)
	phaseChanges(from, run, func(typ, reason, note string) {
		rec.Eventf(obj, nil, typ, reason, "PhaseChange", "%s", note)
	})
}

// RecordPhaseChangesFor emits the Events of [RecordPhaseChanges] through rec, a recorder
// of the core Events API, such as GetEventRecorderFor(name) of a manager gives (the one
// recorder a manager of controller-runtime v0.19 to v0.21 gives). Those Events have no
// action; their message is the note. They too name obj without its resourceVersion.
func RecordPhaseChangesFor(rec record.EventRecorder, obj runtime.Object, from string, run operations.Run) {
	obj = withoutResourceVersion(obj)
	phaseChanges(from, run, func(typ, reason, note string) { rec.Event(obj, typ, reason, note) })
}

// phaseChanges calls emit with the type, reason and note of the Event of each phase
// change of run after the last one that reached from (see [RecordPhaseChanges]).
func phaseChanges(from string, run operations.Run, emit func(typ, reason, note string)) {
	h := run.History
	for i := len(h) - 1; i >= 0; i-- {
		if string(h[i].To) == from {
			h = h[i+1:]
			break
		}
	}
	for _, t := range h {
		typ := "Normal"
		if t.To == phase.Failed || t.To == phase.FailedValidation || phase.IsPartiallyFailed(t.To) {
			typ = "Warning"
		}
		emit(typ, string(t.To), fmt.Sprintf("%s → %s: %s", t.From, t.To, t.Reason))
	}
}

// withoutResourceVersion returns obj, or a copy of it without its resourceVersion when
// it has one, for the Events of a phase change to name: a recorder counts the Events
// that name one version of an object apart from those that name another.
func withoutResourceVersion(obj runtime.Object) runtime.Object {
	m, err := meta.Accessor(obj)
	if err != nil || m.GetResourceVersion() == "" {
		return obj
	}
	obj = obj.DeepCopyObject()
	if m, err := meta.Accessor(obj); err == nil {
		m.SetResourceVersion("")
	}
	return obj
}

package controllerruntime

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

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
	// LastProgressTime is when the run last moved, as far as the operations read show:
	// the latest of the run's creation, its last phase change, and the last progress
	// (see [OperationStatus]) of each operation read. It never goes back. Unset on a
	// status never set.
	LastProgressTime *metav1.Time `json:"lastProgressTime,omitempty"`
	// SlowestOperation is the unfinished operation (New or InProgress) least far along:
	// the lowest share of its NCompleted in its NTotal (an operation that reports no
	// total counts as not begun), then the one that last progressed the longest ago,
	// then the first put. Unset when no operation is unfinished.
	SlowestOperation *OperationStatus `json:"slowestOperation,omitempty"`
	// FailedOperation is the first operation of the run that failed, in the order the
	// operations were put, with its error; while none has, the unfinished operation
	// whose Progress errors the Monitor has been retrying the longest (see
	// monitor.WithRetryPolicy), with the last of those errors. Unset when neither is.
	FailedOperation *OperationStatus `json:"failedOperation,omitempty"`
}

// An OperationStatus shows one operation of a run in [RunStatus]: who runs it, on
// what, and its last progress, as its plugin last reported it (see
// [operations.Progress]). Each text is cut to 1,024 bytes, ending in "…" when cut, so
// that a status stays small whatever a plugin reports.
type OperationStatus struct {
	// ID is the operation's ID, as its plugin gave it.
	ID string `json:"id"`
	// Action is the name of the plugin that runs the operation.
	Action string `json:"action,omitempty"`
	// Resource is the item the plugin acted on: "resource.group namespace/name".
	Resource string `json:"resource,omitempty"`
	// Phase is the operation's phase: New, InProgress, Completed or Failed.
	Phase string `json:"phase"`
	// NCompleted, NTotal, OperationUnits and Description are the plugin's last report
	// of its progress: NCompleted of NTotal OperationUnits done.
	NCompleted     int64  `json:"nCompleted,omitempty"`
	NTotal         int64  `json:"nTotal,omitempty"`
	OperationUnits string `json:"operationUnits,omitempty"`
	Description    string `json:"description,omitempty"`
	// Error is why the operation failed; for an unfinished one, the last Progress error
	// that the Monitor retries.
	Error string `json:"error,omitempty"`
	// LastProgressTime is when the operation last moved: the Updated time of its
	// plugin's last report, else its Started time, else its Created time.
	LastProgressTime *metav1.Time `json:"lastProgressTime,omitempty"`
}

// maxStatusText bounds each text of an [OperationStatus], in bytes.
const maxStatusText = 1024

// DeepCopyInto copies s into out, sharing no memory.
func (s *OperationStatus) DeepCopyInto(out *OperationStatus) {
	*out = *s
	if s.LastProgressTime != nil {
		out.LastProgressTime = s.LastProgressTime.DeepCopy()
	}
}

// DeepCopyInto copies s into out, sharing no memory.
func (s *RunStatus) DeepCopyInto(out *RunStatus) {
	*out = *s
	out.Conditions = slices.Clone(s.Conditions)
	for i := range out.Conditions {
		s.Conditions[i].DeepCopyInto(&out.Conditions[i])
	}
	if s.LastProgressTime != nil {
		out.LastProgressTime = s.LastProgressTime.DeepCopy()
	}
	for _, p := range []struct{ from, to **OperationStatus }{
		{&s.SlowestOperation, &out.SlowestOperation}, {&s.FailedOperation, &out.FailedOperation},
	} {
		if *p.from != nil {
			*p.to = new(OperationStatus)
			(*p.from).DeepCopyInto(*p.to)
		}
	}
}

// Set copies run and what ops, all the run's operations, show into s: their counts, the
// slowest and the failed operation, and when the run last moved; generation is the
// object's metadata.generation, recorded as each condition's ObservedGeneration. A
// condition's LastTransitionTime is the time of the run's last phase change when its
// status changes, and is kept otherwise. Set reports whether s changed: whether its
// JSON, as the API server would store it (times to the second), changed.
//
// Set looks at every operation of ops once, and keeps none: its cost grows with
// len(ops), its memory does not. [RunStatus.SetFromStore] reads less on the stores
// that count operations.
func (s *RunStatus) Set(run operations.Run, ops []operations.Operation, generation int64) bool {
	return s.set(run, operations.Count(ops), ops, generation)
}

// set is Set with the counts of the run's operations given apart: ops may then be only
// some of them (the unfinished and failed ones), in the order they were put.
func (s *RunStatus) set(run operations.Run, counts operations.OperationCounts, ops []operations.Operation, generation int64) bool {
	var before RunStatus
	s.DeepCopyInto(&before)
	s.Phase = string(run.Phase)
	s.Operations, s.OperationsCompleted, s.OperationsFailed = counts.Total(), counts.Completed, counts.Failed
	s.Errors, s.Warnings, s.FailureReason = run.Errors, run.Warnings, run.FailureReason
	s.setOperations(run, ops)

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

// setOperations sets the slowest and the failed operation of s, and when the run last
// moved, from run and ops, some or all of its operations in the order they were put.
func (s *RunStatus) setOperations(run operations.Run, ops []operations.Operation) {
	last := run.Created
	if run.Updated.After(last) {
		last = run.Updated
	}
	var slowest, failed, retried *operations.Operation
	for i := range ops {
		op := &ops[i]
		if t := movedAt(op); t.After(last) {
			last = t
		}
		switch {
		case op.Status.Phase == operations.OperationFailed:
			if failed == nil {
				failed = op
			}
		case op.Status.Phase.Finished():
		default:
			if slowest == nil || slower(op, slowest) {
				slowest = op
			}
			if op.Monitor.Attempts > 0 && (retried == nil || op.Monitor.ErrorSince.Before(retried.Monitor.ErrorSince)) {
				retried = op
			}
		}
	}
	if failed == nil {
		failed = retried
	}
	s.SlowestOperation, s.FailedOperation = operationStatus(slowest), operationStatus(failed)
	if s.LastProgressTime == nil || !last.IsZero() && last.After(s.LastProgressTime.Time) {
		s.LastProgressTime = statusTime(last)
	}
}

// movedAt returns when op last moved (see OperationStatus.LastProgressTime).
func movedAt(op *operations.Operation) time.Time {
	switch st := op.Status; {
	case !st.Updated.IsZero():
		return st.Updated
	case !st.Started.IsZero():
		return st.Started
	}
	return op.Status.Created
}

// slower reports whether a, an unfinished operation, is less far along than b (see
// RunStatus.SlowestOperation); of two as far along, the one that moved first.
func slower(a, b *operations.Operation) bool {
	fa, fb := done(a), done(b)
	if fa != fb {
		return fa < fb
	}
	return movedAt(a).Before(movedAt(b))
}

// done returns the share of op that its plugin reports done, 0 without a total.
func done(op *operations.Operation) float64 {
	if op.Status.NTotal <= 0 {
		return 0
	}
	return float64(op.Status.NCompleted) / float64(op.Status.NTotal)
}

// operationStatus returns what a status shows of op, or nil for nil.
func operationStatus(op *operations.Operation) *OperationStatus {
	if op == nil {
		return nil
	}
	errText := op.Status.Error
	if errText == "" && !op.Status.Phase.Finished() {
		errText = op.Monitor.LastError
	}
	resource := ""
	if op.Resource != (operations.ResourceIdentifier{}) {
		resource = op.Resource.String()
	}
	return &OperationStatus{
		ID:               bound(op.ID, maxStatusText),
		Action:           bound(op.Action, maxStatusText),
		Resource:         bound(resource, maxStatusText),
		Phase:            string(op.Status.Phase),
		NCompleted:       op.Status.NCompleted,
		NTotal:           op.Status.NTotal,
		OperationUnits:   bound(op.Status.OperationUnits, maxStatusText),
		Description:      bound(op.Status.Description, maxStatusText),
		Error:            bound(errText, maxStatusText),
		LastProgressTime: statusTime(movedAt(op)),
	}
}

// statusTime returns t as a status holds it: in UTC, to the second (what its JSON
// keeps); nil for the zero time.
func statusTime(t time.Time) *metav1.Time {
	if t.IsZero() {
		return nil
	}
	mt := metav1.NewTime(t.UTC().Truncate(time.Second))
	return &mt
}

// equalStatus reports whether a and b are the same status to the API server: whether
// their JSON is the same.
func equalStatus(a, b RunStatus) bool {
	ja, errA := json.Marshal(a)
	jb, errB := json.Marshal(b)
	return errA == nil && errB == nil && bytes.Equal(ja, jb)
}

// shown selects the operations a status may show: the unfinished and the failed ones.
var shown = operations.OperationFilter{Phases: []operations.OperationPhase{operations.OperationNew, operations.OperationInProgress, operations.OperationFailed}}

// SetFromStore reads the run of o and what [RunStatus.Set] needs of its operations from
// store, and sets them into s. It returns the run and whether s changed; it fails with
// the store's errors (among them [operations.ErrNotFound] and
// [operations.ErrUIDMismatch]), leaving s unchanged.
//
// On a store that counts operations ([operations.OperationCounter]: those of
// storage/kv, memstore, boltstore, etcdstore and kubestore) it makes two reads: the run,
// and, in one read, the counts of its operations and its unfinished and failed
// operations, decoding no completed one. For a run of 10,000 operations of which 100
// are unfinished, that takes a fraction of the time and memory of decoding them all
// (docs/BENCHMARKS.md, "What a status reads"). The time when the run last moved then
// leaves out when its completed operations completed, unless a phase change or another
// operation moved later. On another store it reads the run and all its operations.
func (s *RunStatus) SetFromStore(ctx context.Context, store operations.Store, o operations.Owner, generation int64) (operations.Run, bool, error) {
	run, err := store.GetRun(ctx, o)
	if err != nil {
		return operations.Run{}, false, err
	}
	counter, ok := store.(operations.OperationCounter)
	if !ok {
		ops, err := store.ListOperations(ctx, o, operations.OperationFilter{})
		if err != nil {
			return operations.Run{}, false, err
		}
		return run, s.Set(run, ops, generation), nil
	}
	counts, ops, err := counter.CountOperations(ctx, o, shown)
	if err != nil {
		return operations.Run{}, false, err
	}
	return run, s.set(run, counts, ops, generation), nil
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

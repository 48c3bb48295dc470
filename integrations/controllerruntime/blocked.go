package controllerruntime

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/tools/record"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/operations/decorate"
	"github.com/itemops/itemops/operations/monitor"
)

// ConditionBlocked is the condition type [RunStatus.SetBlocked] keeps: True while an
// error of the store or of the Monitor keeps the run from moving (the Monitor cannot
// write what its polls found, read the run, or claim it), with the error as message;
// False, with reason [ReasonNotBlocked], once the Monitor's calls for the run succeed
// again. An object whose run was never blocked has no such condition.
const ConditionBlocked = "Blocked"

// The reasons of the condition [ConditionBlocked].
const (
	// ReasonStoreError says that a call of the Monitor to the store for the run failed:
	// a write (the operator may lack the update right on the store's objects) or a read.
	ReasonStoreError = "StoreError"
	// ReasonClaimError says that the Monitor could not claim the run (see
	// [operations.RunClaimer]): the store could not tell whether another Monitor holds it.
	ReasonClaimError = "ClaimError"
	// ReasonNotBlocked is the reason of the condition once it is False.
	ReasonNotBlocked = "NotBlocked"
)

// maxBlockedMessage bounds the message of the condition and the note of its Events, in
// bytes: the events.k8s.io API takes notes of at most 1 kB.
const maxBlockedMessage = 1024

// A BlockedError is what [Monitor.RunBlocked] returns: the error of the Monitor's last
// failed call to the store for a run, which keeps the run from moving. Owner is the run's
// owner, the zero Owner for a call that names no run (listing the runs of a pass, which
// blocks every run); Method is the store method that failed (as package
// operations/decorate names it: CommitPass, UpdateRun, PutOperations, GetRun, ClaimRun,
// ReadPass, ...). Err is the store's error: errors.Is and errors.As see through a
// BlockedError to it (apierrors.IsForbidden, for instance).
type BlockedError struct {
	Owner  operations.Owner
	Method string
	Err    error
}

// Error says which call of the Monitor failed, for which run, and the store's error.
func (e *BlockedError) Error() string {
	if e.Owner == (operations.Owner{}) {
		return fmt.Sprintf("the Monitor's %s failed: %v", e.Method, e.Err)
	}
	return fmt.Sprintf("the Monitor's %s of run %s failed: %v", e.Method, e.Owner, e.Err)
}

// Unwrap returns the store's error, for errors.Is and errors.As.
func (e *BlockedError) Unwrap() error { return e.Err }

// blocked records the errors of the Monitor's calls to its store, by run, for
// Monitor.RunBlocked. mu guards runs and all.
type blocked struct {
	mu   sync.Mutex
	runs map[blockedKey]*BlockedError
	all  *BlockedError // the error of listing runs, which blocks every run
}

// blockedKey names a run whatever its UID.
type blockedKey struct{ kind, name string }

func keyOfOwner(o operations.Owner) blockedKey { return blockedKey{string(o.Kind), o.Name} }

// benign reports whether err, of a call whose context is ctx, keeps no run from moving:
// the run is gone or ended, a write met another's (the Monitor reads the run again), or
// the call was cut short by its caller.
func benign(ctx context.Context, err error) bool {
	return errors.Is(err, operations.ErrNotFound) || errors.Is(err, operations.ErrConflict) ||
		errors.Is(err, operations.ErrRunEnded) || errors.Is(err, operations.ErrExists) || ctx.Err() != nil
}

// around is the decorator (see decorate.Store) of the Monitor's store: it records the
// error of each failed call for its run, and forgets it when a call of the same method,
// or a write, for the run succeeds, or when the run is gone. It asks a reconcile of the
// run's object when a run becomes blocked, its error changes, or it is no longer.
func (m *Monitor) around(ctx context.Context, c decorate.Call, call func(context.Context) error) error {
	err := call(ctx)
	if err != nil && ctx.Err() != nil {
		return err
	}
	if c.Owner == (operations.Owner{}) {
		if c.Method == "ReadPass" || c.Method == "ListRuns" {
			m.blocked.mu.Lock()
			if err == nil || benign(ctx, err) {
				m.blocked.all = nil
			} else {
				m.blocked.all = &BlockedError{Method: c.Method, Err: err}
			}
			m.blocked.mu.Unlock()
		}
		return err
	}
	k := keyOfOwner(c.Owner)
	m.blocked.mu.Lock()
	was := m.blocked.runs[k]
	now := was
	switch {
	case errors.Is(err, operations.ErrNotFound):
		now = nil
	case err != nil && !benign(ctx, err):
		now = &BlockedError{Owner: c.Owner, Method: c.Method, Err: err}
	case err == nil && was != nil && (c.Write || c.Method == was.Method):
		now = nil
	}
	if now == nil {
		delete(m.blocked.runs, k)
	} else {
		m.blocked.runs[k] = now
	}
	m.blocked.mu.Unlock()
	if (was == nil) != (now == nil) || (was != nil && now != nil && was.Error() != now.Error()) {
		m.enqueue(monitor.RunChange{Owner: c.Owner})
	}
	return err
}

// RunBlocked returns the error that keeps the run of o (of any UID) from moving, a
// *[BlockedError]: the error of the Monitor's last failed call to its store for the run
// (a write the store refused, a read, a claim), until a call of the same method, or a
// write, for the run succeeds; else the error of the Monitor's last listing of runs, when
// it failed. It returns nil when nothing blocks the run, or the Monitor has not worked on
// it. Errors that keep no run from moving are not recorded: a run gone or ended, a write
// that met another's (ErrConflict, which the Monitor reads the run again after), a call
// cut short by its context. The Monitor asks a reconcile of the run's object (through
// [Monitor.Source]) when the run becomes blocked, its error changes, or it is blocked no
// more; give the error to [RunStatus.SetBlocked] and [RecordBlocked].
func (m *Monitor) RunBlocked(o operations.Owner) error {
	m.blocked.mu.Lock()
	defer m.blocked.mu.Unlock()
	if e := m.blocked.runs[keyOfOwner(o)]; e != nil {
		return e
	}
	if m.blocked.all != nil {
		return m.blocked.all
	}
	return nil
}

// blockedCondition returns the reason and message of the condition ConditionBlocked for
// err, which is not nil.
func blockedCondition(err error) (reason, message string) {
	reason = ReasonStoreError
	var b *BlockedError
	if errors.As(err, &b) && b.Method == "ClaimRun" {
		reason = ReasonClaimError
	}
	return reason, bound(err.Error(), maxBlockedMessage)
}

// bound returns s cut to at most n bytes, at a rune's boundary, ending in "…" when cut.
func bound(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const ellipsis = "…"
	s = s[:n-len(ellipsis)]
	for len(s) > 0 && !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s + ellipsis
}

// SetBlocked sets the condition [ConditionBlocked] of s from err, what
// [Monitor.RunBlocked] returned for the run: True, with reason [ReasonClaimError] for a
// claim that failed and [ReasonStoreError] otherwise, and err's text as message (cut to
// 1,024 bytes, ending in "…"), when err is not nil; False, with reason
// [ReasonNotBlocked] and an empty message, when err is nil and s has the condition;
// nothing when err is nil and s has no such condition. generation is the object's
// metadata.generation; now is the condition's LastTransitionTime when its status
// changes (it is kept otherwise). SetBlocked reports whether s changed.
func (s *RunStatus) SetBlocked(err error, generation int64, now time.Time) bool {
	c := metav1.Condition{Type: ConditionBlocked, Status: metav1.ConditionFalse, ObservedGeneration: generation,
		Reason: ReasonNotBlocked, LastTransitionTime: metav1.NewTime(now)}
	if err != nil {
		c.Status = metav1.ConditionTrue
		c.Reason, c.Message = blockedCondition(err)
	} else if meta.FindStatusCondition(s.Conditions, ConditionBlocked) == nil {
		return false
	}
	var before RunStatus
	s.DeepCopyInto(&before)
	meta.SetStatusCondition(&s.Conditions, c)
	return !equalStatus(before, *s)
}

// RecordBlocked emits an Event on obj through rec when err, what [Monitor.RunBlocked]
// returned for the run, changes the condition [ConditionBlocked] that status, the
// object's status as read (before [RunStatus.SetBlocked]), shows: type Warning, with the
// condition's reason (ReasonStoreError or ReasonClaimError), action "Blocked" and the
// condition's message as note, when the run becomes blocked or its error changes; type
// Normal, reason [ReasonNotBlocked], action "Unblocked", when it is blocked no more. It
// emits nothing when the condition stays as it is, so a reconcile calls it every time.
// Call it before the new status is written: a status write that fails then repeats the
// Event on the next reconcile, which the Events API counts as one series. The Events
// name obj without its resourceVersion, as those of [RecordPhaseChanges] do.
//
// A manager gives rec with GetEventRecorder(name) in controller-runtime v0.24 and later;
// with the GetEventRecorderFor of older managers, use [RecordBlockedFor].
func RecordBlocked(rec events.EventRecorder, obj runtime.Object, status RunStatus, err error) {
	blockedEvent(status, err, func(typ, reason, action, note string) {
		rec.Eventf(withoutResourceVersion(obj), nil, typ, reason, action, "%s", note)
	})
}

// RecordBlockedFor emits the Events of [RecordBlocked] through rec, a recorder of the
// core Events API, such as GetEventRecorderFor(name) of a manager gives. Those Events
// have no action; their message is the note.
func RecordBlockedFor(rec record.EventRecorder, obj runtime.Object, status RunStatus, err error) {
	blockedEvent(status, err, func(typ, reason, _, note string) {
		rec.Event(withoutResourceVersion(obj), typ, reason, note)
	})
}

// blockedEvent calls emit with the Event that err makes of the condition ConditionBlocked
// of status, if any (see RecordBlocked).
func blockedEvent(status RunStatus, err error, emit func(typ, reason, action, note string)) {
	was := meta.FindStatusCondition(status.Conditions, ConditionBlocked)
	blockedBefore := was != nil && was.Status == metav1.ConditionTrue
	switch {
	case err != nil:
		reason, message := blockedCondition(err)
		if blockedBefore && was.Reason == reason && was.Message == message {
			return
		}
		emit("Warning", reason, "Blocked", message)
	case blockedBefore:
		emit("Normal", ReasonNotBlocked, "Unblocked", bound("the run moves again; it was blocked by: "+was.Message, maxBlockedMessage))
	}
}

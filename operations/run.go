package operations

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/itemops/itemops/internal/textlimit"
	"github.com/itemops/itemops/phase"
)

// A Run is the durable record of one backup or restore: where it is in its phase machine,
// how it got there, and what it counted on the way.
type Run struct {
	Owner Owner
	Phase phase.Phase
	// Profile is the variant of the phase machine the run follows; it cannot change after
	// the run is created. For an owner of a kind of one's own it is the profile
	// phase.Declare returned, which names the machine the kind follows.
	Profile phase.Profile
	// OperationTimeout bounds each of the run's operations, counted from the operation's
	// Created time. Zero means the Monitor's default.
	OperationTimeout time.Duration
	// ItemsTotal and ItemsDone count the run's items, for progress reports.
	ItemsTotal, ItemsDone int
	Errors, Warnings      int
	// FailedOperations counts the run's operations that failed and were counted into
	// Errors; the Monitor keeps it, so that each failure is counted once however many
	// Monitors see it.
	FailedOperations int
	// FailureReason says why a Failed run failed.
	FailureReason string
	// Created is when the run was recorded, Started when it entered InProgress, Completed
	// when it reached a terminal phase, Updated when its phase last changed. The zero
	// time means unset.
	Created, Started, Completed, Updated time.Time
	// History lists every phase change, oldest first. [Run.SetPhase] appends to it, and
	// [Run.RequestCancel] appends an entry that changes no phase
	// ([EventCancelRequested]).
	History []Transition
	// Cancel is the request to cancel the run, if one was made (see
	// [Run.RequestCancel]); its zero value means none. It is one-way: once set, no
	// update may change or clear it.
	Cancel CancelRequest
}

// A CancelRequest asks that a run be cancelled: its main run stopped by its controller,
// its unfinished operations cancelled by the Monitor, and the run moved to Failed.
type CancelRequest struct {
	// Reason says who asked and why; it becomes the run's FailureReason.
	Reason string
	// At is when the cancel was requested.
	At time.Time
}

// EventCancelRequested is the Event of the History entry that [Run.RequestCancel]
// appends: it records the request and changes no phase (From and To are the run's
// phase). It is not an event of the phase machines.
const EventCancelRequested phase.Event = "cancel-requested"

// CancelRequested reports whether a cancel of r was requested.
func (r Run) CancelRequested() bool { return r.Cancel.Reason != "" || !r.Cancel.At.IsZero() }

// RequestCancel records a request to cancel r in r itself, for reason (who asked and why)
// at time at, and appends it to r's History; it writes nothing to a store. A run in a
// terminal phase cannot be cancelled: RequestCancel returns an error wrapping
// [ErrRunEnded] and leaves r as it was. A run whose cancel was already requested keeps
// its first request, and RequestCancel returns nil. A reason longer than [MaxTextBytes]
// is refused with an error wrapping [ErrInvalid]. It is the change that the function
// [RequestCancel] stores; call it within an update function of UpdateRun to request a
// cancel in a write of one's own.
func (r *Run) RequestCancel(reason string, at time.Time) error {
	if phase.IsTerminal(r.Phase) || r.Phase == phase.Deleting {
		return fmt.Errorf("run %s is %s: %w", r.Owner, r.Phase, ErrRunEnded)
	}
	if r.CancelRequested() {
		return nil
	}
	if err := tooLong("cancel reason", reason, MaxTextBytes); err != nil {
		return fmt.Errorf("run %s: %w", r.Owner, err)
	}
	if reason == "" {
		reason = "cancel requested"
	}
	r.Cancel = CancelRequest{Reason: reason, At: at}
	r.History = append(r.History, Transition{From: r.Phase, To: r.Phase, Event: EventCancelRequested, Time: at, Reason: reason})
	return nil
}

// A Transition is one phase change of a run.
type Transition struct {
	From, To phase.Phase
	Event    phase.Event
	Time     time.Time
	Reason   string
}

// equal reports whether t and u record the same change. Times are compared with
// [time.Time.Equal], so the same instant read back in another location, or without its
// monotonic clock reading, is still equal.
func (t Transition) equal(u Transition) bool {
	return t.From == u.From && t.To == u.To && t.Event == u.Event && t.Reason == u.Reason && t.Time.Equal(u.Time)
}

// Clone returns a copy of r that shares no memory with it.
func (r Run) Clone() Run {
	r.History = slices.Clone(r.History)
	return r
}

// SetPhase moves r to phase to, appending one [Transition] per step of the way (see
// [phase.Path]); each carries reason (cut to [MaxTextBytes], visibly, when longer) and
// time at, which also becomes r.Updated. Entering
// InProgress sets r.Started and entering a terminal phase sets r.Completed, when they are
// unset. Moving to the current phase changes nothing. When to cannot be reached from the
// current phase by r's kind and profile, SetPhase returns the error of [phase.Path]
// (wrapping [phase.ErrInvalidTransition] or [phase.ErrUnknownPhase]) and leaves r as it was.
func (r *Run) SetPhase(to phase.Phase, reason string, at time.Time) error {
	events, err := phase.Path(r.Owner.Kind, r.Phase, to, r.Profile)
	if err != nil {
		return err
	}
	reason = textlimit.Fit(reason, MaxTextBytes)
	for _, e := range events {
		next, _ := e.Target()
		r.History = append(r.History, Transition{From: r.Phase, To: next, Event: e, Time: at, Reason: reason})
		r.Phase = next
		if next == phase.InProgress && r.Started.IsZero() {
			r.Started = at
		}
		if phase.IsTerminal(next) && r.Completed.IsZero() {
			r.Completed = at
		}
	}
	if len(events) > 0 {
		r.Updated = at
	}
	return nil
}

// Validate reports an error when r cannot be stored: an invalid owner, or an owner of a
// kind of one's own whose Profile does not declare it (see phase.Declare) (wrapping
// [ErrInvalid] and phase.ErrUnknownKind), a phase that is not one of its kind and profile (wrapping
// [phase.ErrUnknownPhase]), or a FailureReason, cancel reason or History reason longer
// than [MaxTextBytes] (wrapping [ErrInvalid]).
func (r Run) Validate() error {
	if err := r.validPhase(); err != nil {
		return err
	}
	return r.textTooLong(nil)
}

// validPhase checks r's owner, and its phase against its kind and profile.
func (r Run) validPhase() error {
	if err := r.Owner.Validate(); err != nil {
		return err
	}
	if err := phase.Validate(r.Owner.Kind, r.Phase, r.Profile); err != nil {
		if errors.Is(err, phase.ErrUnknownKind) {
			// A kind of one's own without the profile that declares it.
			return fmt.Errorf("run %s: %w: %w", r.Owner, ErrInvalid, err)
		}
		return fmt.Errorf("run %s: %w", r.Owner, err)
	}
	return nil
}

// textTooLong returns an error wrapping ErrInvalid when a text of r is longer than
// MaxTextBytes. When before is not nil, r updates it, and only the texts the update
// changes or adds are checked, so that a run stored before the limits existed can still
// be updated.
func (r Run) textTooLong(before *Run) error {
	var err error
	if before == nil || r.FailureReason != before.FailureReason {
		err = tooLong("failure reason", r.FailureReason, MaxTextBytes)
	}
	if err == nil && (before == nil || r.Cancel.Reason != before.Cancel.Reason) {
		err = tooLong("cancel reason", r.Cancel.Reason, MaxTextBytes)
	}
	i := 0
	if before != nil {
		i = min(len(before.History), len(r.History))
	}
	for ; err == nil && i < len(r.History); i++ {
		err = tooLong(fmt.Sprintf("reason of history entry %d", i), r.History[i].Reason, MaxTextBytes)
	}
	if err != nil {
		return fmt.Errorf("run %s: %w", r.Owner, err)
	}
	return nil
}

// A RunFilter selects runs. Its zero value selects all.
type RunFilter struct {
	Kind   phase.Kind    // empty: every kind
	Phases []phase.Phase // empty: every phase
}

// Match reports whether r passes f.
func (f RunFilter) Match(r Run) bool {
	if f.Kind != "" && r.Owner.Kind != f.Kind {
		return false
	}
	return len(f.Phases) == 0 || slices.Contains(f.Phases, r.Phase)
}

// An OperationFilter selects operations. Its zero value selects all.
type OperationFilter struct {
	Phases []OperationPhase // empty: every phase
}

// Match reports whether op passes f.
func (f OperationFilter) Match(op Operation) bool {
	return len(f.Phases) == 0 || slices.Contains(f.Phases, op.Status.Phase)
}

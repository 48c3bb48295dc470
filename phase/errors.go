package phase

import (
	"errors"
	"fmt"
)

// ErrInvalidTransition is returned, wrapped in a [*TransitionError], when an event or a
// phase change is not allowed from the current phase by the machine's kind and profile.
var ErrInvalidTransition = errors.New("invalid phase transition")

// ErrUnknownPhase is returned when a string is not one of the thirteen phases, or when a
// phase does not belong to the machine of a kind and profile (Queued for a restore, say).
var ErrUnknownPhase = errors.New("unknown phase")

// ErrUnknownKind is returned when a kind is neither [Backup] nor [Restore] nor a kind of
// one's own declared by its profile (see [Declare]), or when a kind's name is not valid.
var ErrUnknownKind = errors.New("unknown kind")

// A TransitionError records a transition that was refused: an event fired in a phase
// that does not accept it, or a change to a phase that cannot be reached.
// Err is [ErrInvalidTransition] unless documented otherwise.
type TransitionError struct {
	Kind  Kind
	From  Phase
	Event Event // the event fired; empty when a target phase was asked for
	To    Phase // the phase asked for; empty when an event was fired
	Err   error
}

// Error describes the refused transition.
func (e *TransitionError) Error() string {
	switch {
	case e.Event != "":
		return fmt.Sprintf("phase: %s in %s cannot take event %q: %v", e.Kind, e.From, e.Event, e.Err)
	case e.To != "":
		return fmt.Sprintf("phase: %s cannot go from %s to %s: %v", e.Kind, e.From, e.To, e.Err)
	}
	return fmt.Sprintf("phase: %s in %s: %v", e.Kind, e.From, e.Err)
}

// Unwrap returns the underlying error, so that [errors.Is] sees [ErrInvalidTransition].
func (e *TransitionError) Unwrap() error { return e.Err }

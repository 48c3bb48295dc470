package phase

import "fmt"

// A Phase is the status of a backup or restore, spelled exactly as Velero spells it, so a
// value read from a Velero object or written to one needs no conversion.
type Phase string

// The phases, in Velero's order. Which of them a machine uses depends on its [Kind] and
// profile; see the package documentation.
const (
	// New: the request exists and has not been processed.
	New Phase = "New"
	// Queued: a backup waits in the queue (profile [WithQueue]).
	Queued Phase = "Queued"
	// ReadyToStart: a backup left the queue and may start (profile [WithQueue]).
	ReadyToStart Phase = "ReadyToStart"
	// FailedValidation: the request was malformed; terminal.
	FailedValidation Phase = "FailedValidation"
	// InProgress: the main run is executing.
	InProgress Phase = "InProgress"
	// WaitingForPluginOperations: the main run ended without errors and plugin operations
	// are still running.
	WaitingForPluginOperations Phase = "WaitingForPluginOperations"
	// WaitingForPluginOperationsPartiallyFailed: as WaitingForPluginOperations, with at
	// least one error so far.
	WaitingForPluginOperationsPartiallyFailed Phase = "WaitingForPluginOperationsPartiallyFailed"
	// Finalizing: all operations ended without errors; post-operation work is being done.
	Finalizing Phase = "Finalizing"
	// FinalizingPartiallyFailed: as Finalizing, with at least one error.
	FinalizingPartiallyFailed Phase = "FinalizingPartiallyFailed"
	// Completed: finished without errors; terminal.
	Completed Phase = "Completed"
	// PartiallyFailed: finished with errors, partly usable; terminal.
	PartiallyFailed Phase = "PartiallyFailed"
	// Failed: a fatal error ended the run; terminal.
	Failed Phase = "Failed"
	// Deleting: a finished backup is being deleted; nothing follows it.
	Deleting Phase = "Deleting"
)

// allPhases lists every phase in Velero's order; index gives each one's position.
var allPhases = [...]Phase{
	New, Queued, ReadyToStart, FailedValidation, InProgress,
	WaitingForPluginOperations, WaitingForPluginOperationsPartiallyFailed,
	Finalizing, FinalizingPartiallyFailed, Completed, PartiallyFailed, Failed, Deleting,
}

const numPhases = len(allPhases)

// index returns p's position in allPhases, or -1 when p is not a phase.
func (p Phase) index() int {
	for i, q := range allPhases {
		if q == p {
			return i
		}
	}
	return -1
}

// Phases returns all thirteen phases in Velero's order. The caller owns the slice.
func Phases() []Phase {
	out := make([]Phase, numPhases)
	copy(out, allPhases[:])
	return out
}

// Parse returns the Phase spelled s. The match is exact, as Velero's is; any other string,
// the empty one included, gives an error wrapping [ErrUnknownPhase]. (Velero leaves a new
// object's phase empty: map "" to [New] before calling Parse if you read such objects.)
func Parse(s string) (Phase, error) {
	p := Phase(s)
	if p.index() < 0 {
		return "", fmt.Errorf("phase: %w %q", ErrUnknownPhase, s)
	}
	return p, nil
}

// Validate returns nil when p is a phase of the machine of kind with opts, and otherwise
// the error [NewMachine] would return: one wrapping [ErrUnknownKind] or [ErrUnknownPhase].
// It allocates nothing on success.
func Validate(kind Kind, p Phase, opts ...Option) error {
	d, err := lookup(kind, opts)
	if err != nil {
		return err
	}
	_, err = d.check(p)
	return err
}

// IsTerminal reports whether p ends a run: Completed, PartiallyFailed, Failed or
// FailedValidation. No transition leaves a terminal phase except a backup's deletion.
// Deleting is not terminal in this sense: it is not an outcome, and nothing follows it.
func IsTerminal(p Phase) bool {
	switch p {
	case Completed, PartiallyFailed, Failed, FailedValidation:
		return true
	}
	return false
}

// IsWaiting reports whether p is WaitingForPluginOperations or
// WaitingForPluginOperationsPartiallyFailed: the phases whose operations are polled.
func IsWaiting(p Phase) bool {
	return p == WaitingForPluginOperations || p == WaitingForPluginOperationsPartiallyFailed
}

// IsFinalizing reports whether p is Finalizing or FinalizingPartiallyFailed.
func IsFinalizing(p Phase) bool {
	return p == Finalizing || p == FinalizingPartiallyFailed
}

// IsPartiallyFailed reports whether p records that errors happened without a fatal one:
// WaitingForPluginOperationsPartiallyFailed, FinalizingPartiallyFailed or PartiallyFailed.
func IsPartiallyFailed(p Phase) bool {
	switch p {
	case WaitingForPluginOperationsPartiallyFailed, FinalizingPartiallyFailed, PartiallyFailed:
		return true
	}
	return false
}

// Restorable reports whether a backup in phase p can be restored from: only Completed and
// PartiallyFailed backups can, as in Velero.
func Restorable(p Phase) bool {
	return p == Completed || p == PartiallyFailed
}

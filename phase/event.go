package phase

// An Event moves a [Machine] from one phase to another. Each event leads to exactly one
// phase, whatever phase it is fired from, so an event names the outcome it records; the
// machine's kind and profile decide from which phases it is accepted.
type Event string

// The events, in the order of the phases they lead to.
const (
	EventQueue                   Event = "queue"                     // → Queued
	EventReady                   Event = "ready"                     // → ReadyToStart
	EventFailValidation          Event = "fail-validation"           // → FailedValidation
	EventStart                   Event = "start"                     // → InProgress
	EventWait                    Event = "wait"                      // → WaitingForPluginOperations
	EventWaitPartiallyFailed     Event = "wait-partially-failed"     // → WaitingForPluginOperationsPartiallyFailed
	EventFinalize                Event = "finalize"                  // → Finalizing
	EventFinalizePartiallyFailed Event = "finalize-partially-failed" // → FinalizingPartiallyFailed
	EventComplete                Event = "complete"                  // → Completed
	EventCompletePartiallyFailed Event = "complete-partially-failed" // → PartiallyFailed
	EventFail                    Event = "fail"                      // → Failed
	EventDelete                  Event = "delete"                    // → Deleting
)

// allEvents lists every event with the phase it leads to, in phase order.
var allEvents = [...]struct {
	event Event
	to    Phase
}{
	{EventQueue, Queued},
	{EventReady, ReadyToStart},
	{EventFailValidation, FailedValidation},
	{EventStart, InProgress},
	{EventWait, WaitingForPluginOperations},
	{EventWaitPartiallyFailed, WaitingForPluginOperationsPartiallyFailed},
	{EventFinalize, Finalizing},
	{EventFinalizePartiallyFailed, FinalizingPartiallyFailed},
	{EventComplete, Completed},
	{EventCompletePartiallyFailed, PartiallyFailed},
	{EventFail, Failed},
	{EventDelete, Deleting},
}

// Target returns the phase e leads to, and false when e is not an event of this package.
func (e Event) Target() (Phase, bool) {
	for _, d := range allEvents {
		if d.event == e {
			return d.to, true
		}
	}
	return "", false
}

// EventTo returns the event that leads to phase p, and false for New, the only phase no
// event leads to, and for strings that are not phases.
func EventTo(p Phase) (Event, bool) {
	for _, d := range allEvents {
		if d.to == p {
			return d.event, true
		}
	}
	return "", false
}

// Package phase is the state machine every backup and restore moves through, with the
// rules that decide where a run goes next.
//
// A [Machine] holds the [Phase] of one run of a [Kind] and accepts an [Event] only when
// the transitions of its profile allow it. The rules [AfterMainRun], [AfterPoll] and
// [OnRestart] say which phase comes next, so callers never re-derive them; [Path] checks
// that a phase change moves forward.
//
// # Phases and transitions
//
// The thirteen phases are spelled as Velero spells them. The default profile follows the
// design "Plugin Progress Monitoring":
//
//   - New → InProgress, or FailedValidation.
//   - InProgress → Failed on a fatal error; → WaitingForPluginOperations or
//     WaitingForPluginOperationsPartiallyFailed while plugin operations run; when none
//     run, backups → Finalizing or FinalizingPartiallyFailed, restores → Completed or
//     PartiallyFailed.
//   - WaitingForPluginOperations → WaitingForPluginOperationsPartiallyFailed on an error;
//     when all operations ended, backups → Finalizing, restores → Completed.
//   - WaitingForPluginOperationsPartiallyFailed → FinalizingPartiallyFailed (backups) or
//     PartiallyFailed (restores).
//   - Finalizing → Completed or PartiallyFailed; FinalizingPartiallyFailed → PartiallyFailed.
//   - Any phase before the terminal ones (New, Queued, ReadyToStart, InProgress, the
//     waiting and the finalizing phases) → Failed, so that a run can be cancelled, or
//     failed on a fatal error, wherever it is. The design fails a run only from
//     InProgress; the other edges are what a cancel request needs.
//   - Completed, PartiallyFailed, Failed and FailedValidation are terminal. A backup in a
//     terminal phase can move to Deleting, and nothing follows Deleting. A run never moves
//     back: the machines have no cycles.
//
// Two options change this. [WithQueue] puts backups through New → Queued → ReadyToStart
// → InProgress (FailedValidation stays reachable from New and ReadyToStart), as current
// Velero does. [WithRestoreFinalizing] sends restores through Finalizing and
// FinalizingPartiallyFailed, as Velero does since 1.12. Restores have no Queued,
// ReadyToStart or Deleting phases. docs/phases.md in the repository draws all four
// machines; [Mermaid] and [Graphviz] produce those drawings.
//
// # Kinds of one's own
//
// [Backup] and [Restore] are Velero's kinds. A program whose resource is neither (a
// DatabaseSnapshot, a Migration) gives it a [Kind] of its own name, and declares which of
// the two machines it follows with [Declare], which returns the [Profile] to pass with
// the kind: the machine is then that of its base, under its own name. The profile names
// the base in its Base field, so a run record that stores its profile (package
// operations does) carries its kind's declaration with it, and no table of kinds is kept
// anywhere. A kind of one's own passed without such a profile is refused with
// [ErrUnknownKind], as is a name that is not 1 to [MaxKindBytes] letters and digits.
// Such a kind may also name the phases it has, with [WithPhases]: its machine is then
// the base's transitions among them (a kind without Finalizing ends as soon as its
// operations do), and the profile carries the set.
//
// # Events
//
// Each [Event] leads to one phase wherever it is accepted ([EventStart] to InProgress,
// [EventFail] to Failed, and so on), so firing the event named for the next phase is
// always right: [EventTo] finds it. An event that the current phase does not accept is
// refused with a [*TransitionError] wrapping [ErrInvalidTransition], and the phase stays.
//
// # Caveats
//
// A Machine is built from a stored phase and never forced into another, so a machine
// cannot be made to break its rules. Velero leaves a brand-new object's phase empty; map
// "" to [New] before building a machine from such an object. A context that is done
// makes [Machine.Fire] return ctx.Err() and change nothing; it never wedges the machine.
package phase

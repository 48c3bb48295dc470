package phase

import "fmt"

// An Outcome is what the main run of a backup or restore produced, as [AfterMainRun]
// needs it: whether a fatal error ended it, how many errors it recorded, how many plugin
// operations are still running, and whether a cancel of the run was requested before it
// ended (operations.Run.CancelRequested). Negative counts are treated as zero.
type Outcome struct {
	Fatal     bool
	Errors    int
	Pending   int
	Cancelled bool
}

// AfterMainRun returns the phase a run in InProgress moves to when its main run ends,
// following the design case by case:
//
//   - a fatal error: Failed;
//   - a cancel requested, nothing pending: Failed. Velero has no Canceled phase for
//     backups and restores (nor for plugin operations, which end Failed with a
//     "Canceled" error), so a cancelled run fails;
//   - operations still pending, cancelled or not: WaitingForPluginOperations, or
//     WaitingForPluginOperationsPartiallyFailed when there were errors. A run whose
//     cancel was requested waits too, so that the Monitor (package operations/monitor)
//     cancels its operations through their plugins, then fails it: failing it at once
//     would leave them running;
//   - nothing pending, backups (and restores with [WithRestoreFinalizing]): Finalizing, or
//     FinalizingPartiallyFailed when there were errors;
//   - nothing pending, restores: Completed, or PartiallyFailed when there were errors.
//
// For a kind other than [Backup] and [Restore] that opts do not declare (see [Declare])
// it returns the empty Phase, which no [Machine] accepts.
func AfterMainRun(kind Kind, o Outcome, opts ...Option) Phase {
	d, err := lookup(kind, opts)
	if err != nil {
		return ""
	}
	errs := o.Errors > 0
	switch {
	case o.Fatal, o.Cancelled && o.Pending <= 0:
		return Failed
	case o.Pending > 0 && errs:
		return WaitingForPluginOperationsPartiallyFailed
	case o.Pending > 0:
		return WaitingForPluginOperations
	}
	return d.operationsEnded(errs)
}

// operationsEnded is the phase that follows the end of all operations.
func (d machineOf) operationsEnded(errs bool) Phase {
	finalizing := d.member[Finalizing.index()]
	switch {
	case finalizing && errs:
		return FinalizingPartiallyFailed
	case finalizing:
		return Finalizing
	case errs:
		return PartiallyFailed
	}
	return Completed
}

// AfterPoll returns the phase a waiting run moves to after a poll of its operations found
// newErrors new failures and left pending operations running:
//
//   - operations still pending: WaitingForPluginOperationsPartiallyFailed if the run was
//     already partially failed or the poll found new errors, else the current phase;
//   - nothing pending: FinalizingPartiallyFailed or PartiallyFailed (restores of the
//     default profile) when the run was partially failed or the poll found errors, else
//     Finalizing or Completed.
//
// The result may lie two transitions away (WaitingForPluginOperations →
// WaitingForPluginOperationsPartiallyFailed → FinalizingPartiallyFailed); [Path] gives
// the events. It fails with [ErrUnknownKind] or [ErrUnknownPhase] for a bad kind or
// phase, and with a [*TransitionError] wrapping [ErrInvalidTransition] when current is
// not a waiting phase: only waiting runs are polled.
func AfterPoll(kind Kind, current Phase, newErrors, pending int, opts ...Option) (Phase, error) {
	d, err := lookup(kind, opts)
	if err != nil {
		return "", err
	}
	if _, err := d.check(current); err != nil {
		return "", err
	}
	if !IsWaiting(current) {
		return "", &TransitionError{Kind: kind, From: current, Err: fmt.Errorf("%w: only waiting phases are polled", ErrInvalidTransition)}
	}
	errs := newErrors > 0 || current == WaitingForPluginOperationsPartiallyFailed
	switch {
	case pending > 0 && errs:
		return WaitingForPluginOperationsPartiallyFailed, nil
	case pending > 0:
		return current, nil
	}
	return d.operationsEnded(errs), nil
}

// OnRestart says what to do with a run found in phase p when the server starts, as
// Velero does: a run InProgress cannot be resumed, so it becomes Failed, with Velero's
// reason text (`found a backup with status "InProgress" during the server starting, mark
// it as "Failed"`) and changed true. Waiting and finalizing runs are resumed where they
// are: next is p, changed is false, and reason says the run is resumed, for logs. Every
// other phase, unknown kinds and unknown phases are left alone: p, "", false. A kind of
// one's own needs its profile among opts (see [Declare]); other options are ignored.
func OnRestart(kind Kind, p Phase, opts ...Option) (next Phase, reason string, changed bool) {
	if _, err := base(kind, ProfileOf(kind, opts...)); err != nil {
		return p, "", false
	}
	switch {
	case p == InProgress:
		return Failed, fmt.Sprintf("found %s with status %q during the server starting, mark it as %q", kind.noun(), InProgress, Failed), true
	case IsWaiting(p), IsFinalizing(p):
		return p, fmt.Sprintf("found %s with status %q during the server starting, resume it", kind.noun(), p), false
	}
	return p, "", false
}

// Path returns the shortest sequence of events that moves a machine of kind from phase
// from to phase to; ties go to the event whose phase comes first in [Phases]. It returns
// no events when from equals to. It fails with [ErrUnknownKind] or [ErrUnknownPhase] for
// a bad kind or a phase outside the profile, and with a [*TransitionError] wrapping
// [ErrInvalidTransition] when to cannot be reached from from: no path ever leads back.
// A store uses it to check a phase change it is asked to write.
func Path(kind Kind, from, to Phase, opts ...Option) ([]Event, error) {
	d, err := lookup(kind, opts)
	if err != nil {
		return nil, err
	}
	src, err := d.check(from)
	if err != nil {
		return nil, err
	}
	dst, err := d.check(to)
	if err != nil {
		return nil, err
	}
	if src == dst {
		return nil, nil
	}
	// Breadth-first search over at most thirteen phases; via[i] is the event that first
	// reached phase i, prev[i] the phase it came from.
	var (
		seen  [numPhases]bool
		prev  [numPhases]int
		via   [numPhases]Event
		queue = make([]int, 0, numPhases)
	)
	seen[src] = true
	queue = append(queue, src)
	for len(queue) > 0 && !seen[dst] {
		i := queue[0]
		queue = queue[1:]
		for j, e := range allEvents {
			next := d.next[i][j]
			if next == "" {
				continue
			}
			k := next.index()
			if !seen[k] {
				seen[k], prev[k], via[k] = true, i, e.event
				queue = append(queue, k)
			}
		}
	}
	if !seen[dst] {
		return nil, &TransitionError{Kind: kind, From: from, To: to, Err: ErrInvalidTransition}
	}
	var n int
	for k := dst; k != src; k = prev[k] {
		n++
	}
	path := make([]Event, n)
	for k := dst; k != src; k = prev[k] {
		n--
		path[n] = via[k]
	}
	return path, nil
}

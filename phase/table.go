package phase

import (
	"fmt"

	"github.com/looplab/fsm"
)

// A definition is the complete machine of one kind and profile, built once per process.
type definition struct {
	kind    Kind
	profile Profile
	// member[i] reports whether allPhases[i] belongs to the machine.
	member [numPhases]bool
	// next[i][j] is the phase event allEvents[j] leads to from allPhases[i], or "".
	next [numPhases][len(allEvents)]Phase
	// from[i] describes, for looplab/fsm, the transitions a machine starting in
	// allPhases[i] can still take: a run never moves back, so the transitions of phases
	// behind it are left out, and each machine's fsm is built smaller.
	from [numPhases][]fsm.EventDesc
}

// edge is one allowed transition.
type edge struct {
	from  Phase
	event Event
}

// Transitions shared by several definitions, in phase order.
var (
	// afterStartFinalizing is what InProgress and the phases after it allow when the run goes
	// through Finalizing (backups, and restores with WithRestoreFinalizing).
	afterStartFinalizing = []edge{
		{InProgress, EventWait},
		{InProgress, EventWaitPartiallyFailed},
		{InProgress, EventFinalize},
		{InProgress, EventFinalizePartiallyFailed},
		{InProgress, EventFail},
		{WaitingForPluginOperations, EventWaitPartiallyFailed},
		{WaitingForPluginOperations, EventFinalize},
		{WaitingForPluginOperationsPartiallyFailed, EventFinalizePartiallyFailed},
		{Finalizing, EventComplete},
		{Finalizing, EventCompletePartiallyFailed},
		{FinalizingPartiallyFailed, EventCompletePartiallyFailed},
	}
	// afterStartDirect is the same for restores of the default profile, which end as
	// soon as their operations do.
	afterStartDirect = []edge{
		{InProgress, EventWait},
		{InProgress, EventWaitPartiallyFailed},
		{InProgress, EventComplete},
		{InProgress, EventCompletePartiallyFailed},
		{InProgress, EventFail},
		{WaitingForPluginOperations, EventWaitPartiallyFailed},
		{WaitingForPluginOperations, EventComplete},
		{WaitingForPluginOperationsPartiallyFailed, EventCompletePartiallyFailed},
	}
	start = []edge{
		{New, EventFailValidation},
		{New, EventStart},
	}
	queuedStart = []edge{
		{New, EventQueue},
		{New, EventFailValidation},
		{Queued, EventReady},
		{ReadyToStart, EventFailValidation},
		{ReadyToStart, EventStart},
	}
	// cancellation lets a run that has not ended fail at once, wherever it is: a cancel
	// request, a lost main run, or a fatal error while its operations run or while it
	// finalizes. Each machine takes the part of it whose phases it has.
	cancellation = []edge{
		{New, EventFail},
		{WaitingForPluginOperations, EventFail},
		{WaitingForPluginOperationsPartiallyFailed, EventFail},
	}
	cancelFinalizing = []edge{
		{Finalizing, EventFail},
		{FinalizingPartiallyFailed, EventFail},
	}
	cancelQueued = []edge{
		{Queued, EventFail},
		{ReadyToStart, EventFail},
	}
	deletion = []edge{
		{FailedValidation, EventDelete},
		{Completed, EventDelete},
		{PartiallyFailed, EventDelete},
		{Failed, EventDelete},
	}
)

// definitions holds the four distinct machines: backup, backup with a queue, restore,
// and restore with finalizing.
var definitions = [4]*definition{
	newDefinition(Backup, Profile{}, start, afterStartFinalizing, cancellation, cancelFinalizing, deletion),
	newDefinition(Backup, Profile{Queue: true}, queuedStart, afterStartFinalizing, cancellation, cancelFinalizing, cancelQueued, deletion),
	newDefinition(Restore, Profile{}, start, afterStartDirect, cancellation),
	newDefinition(Restore, Profile{RestoreFinalizing: true}, start, afterStartFinalizing, cancellation, cancelFinalizing),
}

func newDefinition(kind Kind, p Profile, groups ...[]edge) *definition {
	d := &definition{kind: kind, profile: p}
	for _, g := range groups {
		for _, e := range g {
			to, ok := e.event.Target()
			if !ok {
				panic("phase: table names an unknown event " + string(e.event))
			}
			i, j := e.from.index(), to.index()
			d.next[i][eventIndex(e.event)] = to
			d.member[i], d.member[j] = true, true
		}
	}
	for s := range allPhases {
		if d.member[s] {
			d.from[s] = d.fsmEvents(d.reachable(s))
		}
	}
	return d
}

// reachable returns the phases a machine in phase index s can ever be in, s included.
func (d *definition) reachable(s int) [numPhases]bool {
	var seen [numPhases]bool
	stack := []int{s}
	seen[s] = true
	for len(stack) > 0 {
		i := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		for _, to := range d.next[i] {
			if k := to.index(); to != "" && !seen[k] {
				seen[k] = true
				stack = append(stack, k)
			}
		}
	}
	return seen
}

// fsmEvents describes for looplab/fsm the transitions whose source is in sources.
func (d *definition) fsmEvents(sources [numPhases]bool) []fsm.EventDesc {
	var out []fsm.EventDesc
	for j, e := range allEvents {
		var src []string
		for i, p := range allPhases {
			if sources[i] && d.next[i][j] != "" {
				src = append(src, string(p))
			}
		}
		if src != nil {
			out = append(out, fsm.EventDesc{Name: string(e.event), Src: src, Dst: string(e.to)})
		}
	}
	return out
}

func eventIndex(e Event) int {
	for j, d := range allEvents {
		if d.event == e {
			return j
		}
	}
	return -1
}

// A machineOf is the definition a kind follows, with the kind and the profile it was
// looked up with: a kind of one's own shares the definition of its base.
type machineOf struct {
	*definition
	kind    Kind
	profile Profile
}

// lookup returns the definition of kind with opts applied. It fails with an error
// wrapping ErrUnknownKind (see base).
func lookup(kind Kind, opts []Option) (machineOf, error) {
	p := ProfileOf(kind, opts...)
	b, err := base(kind, p)
	if err != nil {
		return machineOf{}, err
	}
	m := machineOf{kind: kind, profile: p}
	switch {
	case p.Phases != 0:
		if err := checkPhases(kind, p.Phases); err != nil {
			return machineOf{}, err
		}
		m.definition = subsetDefinition(p.Phases)
	case b == Backup && !p.Queue:
		m.definition = definitions[0]
	case b == Backup:
		m.definition = definitions[1]
	case !p.RestoreFinalizing:
		m.definition = definitions[2]
	default:
		m.definition = definitions[3]
	}
	return m, nil
}

// check returns p's index when p belongs to m, or an error wrapping ErrUnknownPhase.
func (m machineOf) check(p Phase) (int, error) {
	i := p.index()
	if i < 0 {
		return -1, fmt.Errorf("phase: %w %q", ErrUnknownPhase, p)
	}
	if !m.member[i] {
		return -1, fmt.Errorf("phase: %w: %s is not a phase of a %s machine (profile %s)", ErrUnknownPhase, p, m.kind, m.profile)
	}
	return i, nil
}

// phases returns d's phases in Velero's order.
func (d *definition) phases() []Phase {
	var out []Phase
	for i, p := range allPhases {
		if d.member[i] {
			out = append(out, p)
		}
	}
	return out
}

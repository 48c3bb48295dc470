package phase

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
)

// A Set is a set of phases, as [WithPhases] declares them for a kind of one's own.
// Its zero value is the empty set. Each phase is one bit, in the order of [Phases], so a
// Set can be stored as a number; in JSON it is the list of the phases' names.
type Set uint16

// unknownPhases is the bit WithPhases sets for a name that is not a phase, so that the
// set is refused wherever it is used, as is any set with a bit outside knownPhases (a
// damaged record's).
const (
	unknownPhases Set = 1 << 15
	knownPhases   Set = 1<<numPhases - 1
)

// SetOf returns the set of ps. A string that is not a phase makes a set that every
// function of this package refuses with an error wrapping [ErrUnknownPhase].
func SetOf(ps ...Phase) Set {
	var s Set
	for _, p := range ps {
		if i := p.index(); i >= 0 {
			s |= 1 << i
		} else {
			s |= unknownPhases
		}
	}
	return s
}

// Has reports whether p is in s.
func (s Set) Has(p Phase) bool {
	i := p.index()
	return i >= 0 && s&(1<<i) != 0
}

// Phases returns the phases of s in Velero's order.
func (s Set) Phases() []Phase {
	var out []Phase
	for i, p := range allPhases {
		if s&(1<<i) != 0 {
			out = append(out, p)
		}
	}
	return out
}

// String joins the names of the phases of s with "+", in Velero's order; a set holding
// something that is not a phase ends with "+?".
func (s Set) String() string {
	var b strings.Builder
	for _, p := range s.Phases() {
		if b.Len() > 0 {
			b.WriteByte('+')
		}
		b.WriteString(string(p))
	}
	if s&^knownPhases != 0 {
		b.WriteString("+?")
	}
	return b.String()
}

// MarshalJSON writes s as the list of its phases' names.
func (s Set) MarshalJSON() ([]byte, error) {
	if s&^knownPhases != 0 {
		return nil, fmt.Errorf("phase: %w in the set %s", ErrUnknownPhase, s)
	}
	names := s.Phases()
	if names == nil {
		names = []Phase{}
	}
	return json.Marshal(names)
}

// UnmarshalJSON reads a list of phase names. A name that is not a phase gives an error
// wrapping [ErrUnknownPhase].
func (s *Set) UnmarshalJSON(b []byte) error {
	var names []Phase
	if err := json.Unmarshal(b, &names); err != nil {
		return err
	}
	for _, p := range names {
		if p.index() < 0 {
			return fmt.Errorf("phase: %w %q", ErrUnknownPhase, p)
		}
	}
	*s = SetOf(names...)
	return nil
}

// phasesOption is the Option of WithPhases. It keeps the names as given, so that
// Declare can say which one is not a phase.
type phasesOption []Phase

func (o phasesOption) apply(to Profile) Profile {
	to.Phases = SetOf(o...)
	return to
}

// WithPhases returns the option that gives a kind of one's own only the phases ps of
// its base's machine, with the transitions of the base among them. Pass it to
// [Declare], which checks the set:
//
//	profile, err := phase.Declare("DatabaseSnapshot", phase.Backup, phase.WithPhases(
//		phase.New, phase.InProgress,
//		phase.WaitingForPluginOperations, phase.WaitingForPluginOperationsPartiallyFailed,
//		phase.Completed, phase.PartiallyFailed, phase.Failed,
//	))
//
// The set must hold New, InProgress, the two waiting phases, Completed, PartiallyFailed
// and Failed: every run starts, runs, waits for its operations, keeps their errors in
// its phase and ends. The others are the kind's to choose: Queued and ReadyToStart (both
// or neither: a queue before the start), FailedValidation (a terminal phase for a
// malformed request), Finalizing and FinalizingPartiallyFailed (both or neither:
// post-operation work before the terminal phase; without them a run ends as soon as its
// operations do, as a restore does), and Deleting (after a terminal phase). The phases
// replace [WithQueue] and [WithRestoreFinalizing]. Backup and Restore keep Velero's
// phases: Declare refuses WithPhases for them, and the other functions ignore it.
func WithPhases(ps ...Phase) Option { return phasesOption(slices.Clone(ps)) }

// The phases every machine has, and the optional ones that go in pairs.
var (
	requiredPhases = SetOf(New, InProgress, WaitingForPluginOperations, WaitingForPluginOperationsPartiallyFailed,
		Completed, PartiallyFailed, Failed)
	phasePairs = [...][2]Phase{{Queued, ReadyToStart}, {Finalizing, FinalizingPartiallyFailed}}
)

// checkPhases returns nil when s is a set of phases a machine can have (see WithPhases),
// or an error wrapping ErrUnknownPhase that says what is wrong with it.
func checkPhases(kind Kind, s Set) error {
	if s&^knownPhases != 0 {
		return fmt.Errorf("phase: %w among the phases of %s", ErrUnknownPhase, kind)
	}
	if missing := requiredPhases &^ s; missing != 0 {
		return fmt.Errorf("phase: %w: the phases of %s lack %s (every machine has %s)", ErrUnknownPhase, kind, missing, requiredPhases)
	}
	for _, pair := range phasePairs {
		if s.Has(pair[0]) != s.Has(pair[1]) {
			return fmt.Errorf("phase: %w: the phases of %s name one of %s and %s: name both or neither", ErrUnknownPhase, kind, pair[0], pair[1])
		}
	}
	return nil
}

// subsets holds the definition of each set of phases used so far (Set →
// *definition); there are at most 16 distinct ones.
var subsets sync.Map

// subsetDefinition returns the machine of the phases s (which checkPhases accepted): the
// transitions of every profile whose ends are both in s.
func subsetDefinition(s Set) *definition {
	if d, ok := subsets.Load(s); ok {
		return d.(*definition)
	}
	starts, after := start, afterStartDirect
	if s.Has(Queued) {
		starts = queuedStart
	}
	if s.Has(Finalizing) {
		after = afterStartFinalizing
	}
	var within []edge
	for _, g := range [][]edge{starts, after, cancellation, cancelFinalizing, cancelQueued, deletion} {
		for _, e := range g {
			to, _ := e.event.Target()
			if s.Has(e.from) && s.Has(to) {
				within = append(within, e)
			}
		}
	}
	d, _ := subsets.LoadOrStore(s, newDefinition("", Profile{Phases: s}, within))
	return d.(*definition)
}

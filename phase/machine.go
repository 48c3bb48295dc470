package phase

import (
	"context"
	"errors"
	"sync"

	"github.com/looplab/fsm"
)

// A Machine holds the phase of one backup or restore and moves it only along the
// transitions of its kind and profile. It is built on github.com/looplab/fsm, whose
// errors it translates: none of that package's types reach the caller. The fsm is built
// by the first [Machine.Fire], so a machine that is only inspected costs no more than
// the check of its start phase.
//
// A Machine is safe for concurrent use; concurrent calls to [Machine.Fire] are serialized,
// so of two events racing from the same phase exactly one can win.
type Machine struct {
	def machineOf
	// mu guards start and fsm, and serializes Fire: looplab/fsm releases its own event
	// lock before it is done reading the new state (to let callbacks fire events), so
	// two of its Event calls may race on it.
	mu    sync.Mutex
	start Phase    // the phase until fsm is built
	fsm   *fsm.FSM // nil until the first Fire
}

// NewMachine returns a machine of kind in phase start, with the transitions the options
// select. A phase loaded from storage is passed as start; there is no way to force a
// phase afterwards. It fails with [ErrUnknownKind] for a kind other than [Backup] and
// [Restore] that opts do not declare (see [Declare]), and with [ErrUnknownPhase] when
// start is not a phase of that kind and profile (Queued without [WithQueue], Deleting
// for a restore).
func NewMachine(kind Kind, start Phase, opts ...Option) (*Machine, error) {
	d, err := lookup(kind, opts)
	if err != nil {
		return nil, err
	}
	if _, err := d.check(start); err != nil {
		return nil, err
	}
	return &Machine{def: d, start: start}, nil
}

// Kind returns the machine's kind.
func (m *Machine) Kind() Kind { return m.def.kind }

// Profile returns the variants the machine follows, without those that do not concern
// its kind; for a kind of one's own, its Base too.
func (m *Machine) Profile() Profile { return m.def.profile }

// Phase returns the current phase.
func (m *Machine) Phase() Phase {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.phase()
}

// phase returns the current phase; m.mu is held.
func (m *Machine) phase() Phase {
	if m.fsm == nil {
		return m.start
	}
	return Phase(m.fsm.Current())
}

// Can reports whether e would be accepted in the current phase.
func (m *Machine) Can(e Event) bool {
	j := eventIndex(e)
	return j >= 0 && m.def.next[m.Phase().index()][j] != ""
}

// Events returns the events the current phase accepts, in the order of the phases they
// lead to ([Phases]).
func (m *Machine) Events() []Event {
	i := m.Phase().index()
	var out []Event
	for j, d := range allEvents {
		if m.def.next[i][j] != "" {
			out = append(out, d.event)
		}
	}
	return out
}

// Fire moves the machine along event e. When the current phase does not accept e (or e is
// not an event at all), it returns a [*TransitionError] wrapping [ErrInvalidTransition]
// and the phase is unchanged.
//
// If ctx is already done, Fire returns ctx.Err() and changes nothing; the machine stays
// usable. (The context is checked here and never handed to the underlying fsm, which
// wedges a machine whose event context is cancelled mid-transition.)
func (m *Machine) Fire(ctx context.Context, e Event) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	if m.fsm == nil {
		m.fsm = fsm.NewFSM(string(m.start), m.def.from[m.start.index()], nil)
	}
	err := m.fsm.Event(context.Background(), string(e))
	from := m.phase()
	m.mu.Unlock()
	if err == nil {
		return nil
	}
	te := &TransitionError{Kind: m.def.kind, From: from, Event: e, Err: ErrInvalidTransition}
	// looplab/fsm returns its error values unwrapped. An event its table lacks (the
	// machine holds only the transitions still ahead of it) is as invalid as one the
	// current phase refuses.
	switch err := err.(type) {
	case fsm.InvalidEventError, fsm.UnknownEventError:
	default:
		// No callbacks are registered and the context never ends, so the fsm has no
		// other way to fail; should it find one, report its text without its type.
		te.Err = errors.New("state machine: " + err.Error())
	}
	return te
}

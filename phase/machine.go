package phase

import (
	"context"
	"errors"
	"sync"

	"github.com/looplab/fsm"
)

// A Machine holds the phase of one backup or restore and moves it only along the
// transitions of its kind and profile. It is built on github.com/looplab/fsm, whose
// errors it translates: none of that package's types reach the caller.
//
// A Machine is safe for concurrent use; concurrent calls to [Machine.Fire] are serialized,
// so of two events racing from the same phase exactly one can win.
type Machine struct {
	def *definition
	fsm *fsm.FSM
	// fireMu serializes Fire: looplab/fsm releases its own event lock before it is done
	// reading the new state (to let callbacks fire events), so two of its Event calls
	// may race on it.
	fireMu sync.Mutex
}

// NewMachine returns a machine of kind in phase start, with the transitions the options
// select. A phase loaded from storage is passed as start; there is no way to force a
// phase afterwards. It fails with [ErrUnknownKind] for a kind other than [Backup] and
// [Restore], and with [ErrUnknownPhase] when start is not a phase of that kind and
// profile (Queued without [WithQueue], Deleting for a restore).
func NewMachine(kind Kind, start Phase, opts ...Option) (*Machine, error) {
	d, err := lookup(kind, opts)
	if err != nil {
		return nil, err
	}
	i, err := d.check(start)
	if err != nil {
		return nil, err
	}
	return &Machine{def: d, fsm: fsm.NewFSM(string(start), d.from[i], nil)}, nil
}

// Kind returns the machine's kind.
func (m *Machine) Kind() Kind { return m.def.kind }

// Profile returns the variants the machine follows, without those that do not concern
// its kind.
func (m *Machine) Profile() Profile { return m.def.profile }

// Phase returns the current phase.
func (m *Machine) Phase() Phase { return Phase(m.fsm.Current()) }

// Can reports whether e would be accepted in the current phase.
func (m *Machine) Can(e Event) bool { return m.fsm.Can(string(e)) }

// Events returns the events the current phase accepts, in the order of [Events].
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
	m.fireMu.Lock()
	err := m.fsm.Event(context.Background(), string(e))
	m.fireMu.Unlock()
	if err == nil {
		return nil
	}
	te := &TransitionError{Kind: m.def.kind, Event: e, Err: ErrInvalidTransition}
	// looplab/fsm returns its error values unwrapped. An event its table lacks (the
	// machine holds only the transitions still ahead of it) is as invalid as one the
	// current phase refuses.
	switch err := err.(type) {
	case fsm.InvalidEventError:
		te.From = Phase(err.State)
	case fsm.UnknownEventError:
		te.From = m.Phase()
	default:
		// No callbacks are registered and the context never ends, so the fsm has no
		// other way to fail; should it find one, report its text without its type.
		te.From = m.Phase()
		te.Err = errors.New("state machine: " + err.Error())
	}
	return te
}

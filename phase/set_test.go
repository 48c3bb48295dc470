package phase_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/itemops/itemops/phase"
)

// required are the phases every declared set holds.
var required = []phase.Phase{
	phase.New, phase.InProgress,
	phase.WaitingForPluginOperations, phase.WaitingForPluginOperationsPartiallyFailed,
	phase.Completed, phase.PartiallyFailed, phase.Failed,
}

// optional are the groups of phases a kind may add to the required ones.
var optional = [][]phase.Phase{
	{phase.Queued, phase.ReadyToStart},
	{phase.FailedValidation},
	{phase.Finalizing, phase.FinalizingPartiallyFailed},
	{phase.Deleting},
}

// Every set of phases a kind may name gives a machine of exactly those phases, in which
// every phase is reachable from New, and whose transitions are those of a machine of
// Backup or Restore.
func TestDeclaredPhasesMakeTheirMachine(t *testing.T) {
	for _, base := range []phase.Kind{phase.Backup, phase.Restore} {
		for mask := range 1 << len(optional) {
			named := append([]phase.Phase(nil), required...)
			for i, g := range optional {
				if mask&(1<<i) != 0 {
					named = append(named, g...)
				}
			}
			set := phase.SetOf(named...)
			t.Run(fmt.Sprintf("%s-like/%s", base, set), func(t *testing.T) {
				const kind phase.Kind = "Snapshot"
				profile, err := phase.Declare(kind, base, phase.WithPhases(named...))
				if err != nil {
					t.Fatalf("Declare(%s, %s, WithPhases(%s)) = %v, want no error", kind, base, set, err)
				}
				if d := cmp.Diff(phase.Profile{Base: base, Phases: set}, profile); d != "" {
					t.Fatalf("Declare returned a profile that differs (-want +got):\n%s", d)
				}
				for _, p := range phase.Phases() {
					err := phase.Validate(kind, p, profile)
					if set.Has(p) && err != nil {
						t.Errorf("Validate(%s) = %v, want nil: it is one of the kind's phases", p, err)
					}
					if !set.Has(p) && !errors.Is(err, phase.ErrUnknownPhase) {
						t.Errorf("Validate(%s) = %v, want ErrUnknownPhase: it is not one of the kind's phases", p, err)
					}
					if set.Has(p) {
						if _, err := phase.Path(kind, phase.New, p, profile); err != nil {
							t.Errorf("Path(New, %s) = %v, want a path: every phase is reachable", p, err)
						}
					}
				}
				// Each event the machine accepts in a phase is accepted there by one of
				// the machines of Backup and Restore, and leads to the same phase.
				for _, p := range set.Phases() {
					m, err := phase.NewMachine(kind, p, profile)
					if err != nil {
						t.Fatal(err)
					}
					for _, e := range m.Events() {
						if !acceptedByAVeleroMachine(p, e) {
							t.Errorf("in %s the machine accepts %s, which no machine of Backup or Restore does", p, e)
						}
					}
				}
			})
		}
	}
}

// acceptedByAVeleroMachine reports whether a machine of Backup or Restore, of any
// profile, accepts e in p.
func acceptedByAVeleroMachine(p phase.Phase, e phase.Event) bool {
	for _, kind := range []phase.Kind{phase.Backup, phase.Restore} {
		for _, opts := range [][]phase.Option{nil, {phase.WithQueue()}, {phase.WithRestoreFinalizing()}} {
			m, err := phase.NewMachine(kind, p, opts...)
			if err == nil && m.Can(e) {
				return true
			}
		}
	}
	return false
}

// The fewest phases: a run starts, waits for its operations and ends as soon as they
// do, with no queue, no validation phase, no finalizing and no deletion.
func TestFewestPhases(t *testing.T) {
	const kind phase.Kind = "Migration"
	profile, err := phase.Declare(kind, phase.Backup, phase.WithPhases(required...))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := profile.String(), "backup-like,phases=New+InProgress+WaitingForPluginOperations+WaitingForPluginOperationsPartiallyFailed+Completed+PartiallyFailed+Failed"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	if got := phase.AfterMainRun(kind, phase.Outcome{}, profile); got != phase.Completed {
		t.Errorf("AfterMainRun with nothing pending = %s, want Completed: the kind has no Finalizing", got)
	}
	if got := phase.AfterMainRun(kind, phase.Outcome{Errors: 1}, profile); got != phase.PartiallyFailed {
		t.Errorf("AfterMainRun with an error = %s, want PartiallyFailed", got)
	}
	next, err := phase.AfterPoll(kind, phase.WaitingForPluginOperations, 0, 0, profile)
	if err != nil || next != phase.Completed {
		t.Errorf("AfterPoll with nothing pending = %s, %v; want Completed", next, err)
	}
	events, err := phase.Path(kind, phase.New, phase.Completed, profile)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]phase.Event{phase.EventStart, phase.EventComplete}, events); d != "" {
		t.Errorf("Path(New, Completed) differs (-want +got):\n%s", d)
	}
	m, err := phase.NewMachine(kind, phase.Completed, profile)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Fire(context.Background(), phase.EventDelete); !errors.Is(err, phase.ErrInvalidTransition) {
		t.Errorf("Fire(delete) from Completed = %v, want ErrInvalidTransition: the kind has no Deleting", err)
	}
	if m.Profile() != profile {
		t.Errorf("Machine.Profile() = %v, want %v", m.Profile(), profile)
	}
}

// A kind that names every phase a backup has follows the backup's machine, event for
// event; a restore-like kind may add Deleting, which no restore has.
func TestDeclaredPhasesAsVeleroMachines(t *testing.T) {
	all := phase.Phases()
	profile, err := phase.Declare("Snapshot", phase.Backup, phase.WithPhases(all...))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range all {
		own, err := phase.NewMachine("Snapshot", p, profile)
		if err != nil {
			t.Fatal(err)
		}
		backup, err := phase.NewMachine(phase.Backup, p, phase.WithQueue())
		if err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(backup.Events(), own.Events()); d != "" {
			t.Errorf("in %s, the events differ from a queued backup's (-backup +own):\n%s", p, d)
		}
	}

	restoreLike, err := phase.Declare("Copy", phase.Restore, phase.WithPhases(append(required, phase.Deleting)...))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := phase.Path("Copy", phase.PartiallyFailed, phase.Deleting, restoreLike); err != nil {
		t.Errorf("Path(PartiallyFailed, Deleting) = %v, want a path", err)
	}
}

// Declare names what is wrong with a set of phases, and Backup and Restore keep theirs.
func TestDeclaredPhasesRefused(t *testing.T) {
	without := func(drop phase.Phase) []phase.Phase {
		var out []phase.Phase
		for _, p := range phase.Phases() {
			if p != drop {
				out = append(out, p)
			}
		}
		return out
	}
	for _, tc := range []struct {
		name string
		kind phase.Kind
		opts []phase.Option
		want string
	}{
		{"a required phase missing", "Snapshot", []phase.Option{phase.WithPhases(without(phase.PartiallyFailed)...)},
			"phase: unknown phase: the phases of Snapshot lack PartiallyFailed (every machine has New+InProgress+WaitingForPluginOperations+WaitingForPluginOperationsPartiallyFailed+Completed+PartiallyFailed+Failed)"},
		{"half of a pair", "Snapshot", []phase.Option{phase.WithPhases(without(phase.ReadyToStart)...)},
			"phase: unknown phase: the phases of Snapshot name one of Queued and ReadyToStart: name both or neither"},
		{"a name that is not a phase", "Snapshot", []phase.Option{phase.WithPhases(append(required, "Paused")...)},
			`phase: unknown phase "Paused" among the phases of Snapshot`},
		{"for Backup", phase.Backup, []phase.Option{phase.WithPhases(required...)},
			"phase: unknown phase: Backup keeps Velero's phases; WithPhases is for a kind of one's own"},
		{"with a queue", "Snapshot", []phase.Option{phase.WithQueue(), phase.WithPhases(required...)},
			"phase: unknown phase: the phases of Snapshot come with WithQueue or WithRestoreFinalizing; name Queued and ReadyToStart, or Finalizing and FinalizingPartiallyFailed, among the phases instead"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base := phase.Backup
			_, err := phase.Declare(tc.kind, base, tc.opts...)
			if !errors.Is(err, phase.ErrUnknownPhase) {
				t.Fatalf("Declare = %v, want an error wrapping ErrUnknownPhase", err)
			}
			if err.Error() != tc.want {
				t.Errorf("Declare's error = %q, want %q", err, tc.want)
			}
		})
	}

	// A profile whose phases were never declared, as a damaged record could hold it,
	// is refused wherever it is used, and never panics.
	bad := phase.Profile{Base: phase.Backup, Phases: phase.SetOf(phase.New, phase.Completed)}
	if _, err := phase.NewMachine("Snapshot", phase.New, bad); !errors.Is(err, phase.ErrUnknownPhase) {
		t.Errorf("NewMachine with undeclared phases = %v, want ErrUnknownPhase", err)
	}
	if got := phase.AfterMainRun("Snapshot", phase.Outcome{}, bad); got != "" {
		t.Errorf("AfterMainRun with undeclared phases = %q, want the empty phase", got)
	}
	// Bits that name no phase, beside every phase a machine needs.
	stray := phase.Profile{Base: phase.Backup, Phases: phase.SetOf(required...) | 1<<13}
	if _, err := phase.NewMachine("Snapshot", phase.New, stray); !errors.Is(err, phase.ErrUnknownPhase) {
		t.Errorf("NewMachine with a bit that names no phase = %v, want ErrUnknownPhase", err)
	}
	if got := stray.Phases.String(); got != phase.SetOf(required...).String()+"+?" {
		t.Errorf("String() of a set with a bit that names no phase = %q, want it to end with +?", got)
	}
	// Backup ignores the phases outside Declare, as it ignores the other variants that
	// do not concern it.
	if got := phase.ProfileOf(phase.Backup, phase.WithPhases(required...)); got != (phase.Profile{}) {
		t.Errorf("ProfileOf(Backup, WithPhases(...)) = %v, want the default profile", got)
	}
}

// A profile with phases goes through JSON as the names of its phases, and a name that is
// not a phase is refused on the way back.
func TestSetJSON(t *testing.T) {
	profile, err := phase.Declare("Snapshot", phase.Restore, phase.WithPhases(required...))
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(profile)
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"base":"Restore","phases":["New","InProgress","WaitingForPluginOperations","WaitingForPluginOperationsPartiallyFailed","Completed","PartiallyFailed","Failed"]}`
	if string(b) != want {
		t.Errorf("json.Marshal = %s, want %s", b, want)
	}
	var back phase.Profile
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if back != profile {
		t.Errorf("the profile read back is %v, want %v", back, profile)
	}
	if err := json.Unmarshal([]byte(`{"phases":["New","Paused"]}`), &back); !errors.Is(err, phase.ErrUnknownPhase) {
		t.Errorf("json.Unmarshal of an unknown phase = %v, want ErrUnknownPhase", err)
	}
	if b, err := json.Marshal(phase.Profile{}); err != nil || string(b) != "{}" {
		t.Errorf("json.Marshal of the default profile = %s, %v; want {}", b, err)
	}
}

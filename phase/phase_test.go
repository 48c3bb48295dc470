package phase_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/itemops/itemops/phase"
)

func TestParse(t *testing.T) {
	velero := []string{
		"New", "Queued", "ReadyToStart", "FailedValidation", "InProgress",
		"WaitingForPluginOperations", "WaitingForPluginOperationsPartiallyFailed",
		"Finalizing", "FinalizingPartiallyFailed", "Completed", "PartiallyFailed", "Failed", "Deleting",
	}
	var got []string
	for _, p := range phase.Phases() {
		got = append(got, string(p))
	}
	require.Equal(t, velero, got, "Phases() must list Velero's spellings in Velero's order")
	for _, s := range velero {
		p, err := phase.Parse(s)
		require.NoError(t, err)
		require.Equal(t, phase.Phase(s), p)
	}
	for _, s := range []string{"", "new", "Uploading", "UploadingPartiallyFailed", " New", "Completed\n"} {
		p, err := phase.Parse(s)
		require.ErrorIs(t, err, phase.ErrUnknownPhase, "%q", s)
		require.Empty(t, p)
	}
	phases := phase.Phases()
	phases[0] = "changed"
	require.Equal(t, phase.New, phase.Phases()[0], "Phases must return a copy")
}

func TestParseKind(t *testing.T) {
	for s, want := range map[string]phase.Kind{"Backup": phase.Backup, "backup": phase.Backup, "RESTORE": phase.Restore, "restore": phase.Restore} {
		got, err := phase.ParseKind(s)
		require.NoError(t, err)
		require.Equal(t, want, got)
	}
	for _, s := range []string{"", "schedule", "backups"} {
		_, err := phase.ParseKind(s)
		require.ErrorIs(t, err, phase.ErrUnknownKind, "%q", s)
	}
}

func TestPredicates(t *testing.T) {
	// Columns: IsTerminal, IsWaiting, IsFinalizing, IsPartiallyFailed, Restorable.
	want := map[phase.Phase][5]bool{
		phase.New:                        {},
		phase.Queued:                     {},
		phase.ReadyToStart:               {},
		phase.FailedValidation:           {true, false, false, false, false},
		phase.InProgress:                 {},
		phase.WaitingForPluginOperations: {false, true, false, false, false},
		phase.WaitingForPluginOperationsPartiallyFailed: {false, true, false, true, false},
		phase.Finalizing:                {false, false, true, false, false},
		phase.FinalizingPartiallyFailed: {false, false, true, true, false},
		phase.Completed:                 {true, false, false, false, true},
		phase.PartiallyFailed:           {true, false, false, true, true},
		phase.Failed:                    {true, false, false, false, false},
		phase.Deleting:                  {},
		"Uploading":                     {},
	}
	for p, w := range want {
		got := [5]bool{phase.IsTerminal(p), phase.IsWaiting(p), phase.IsFinalizing(p), phase.IsPartiallyFailed(p), phase.Restorable(p)}
		require.Equal(t, w, got, "%s", p)
	}
}

func TestEvents(t *testing.T) {
	targets := map[phase.Event]phase.Phase{
		phase.EventQueue:                   phase.Queued,
		phase.EventReady:                   phase.ReadyToStart,
		phase.EventFailValidation:          phase.FailedValidation,
		phase.EventStart:                   phase.InProgress,
		phase.EventWait:                    phase.WaitingForPluginOperations,
		phase.EventWaitPartiallyFailed:     phase.WaitingForPluginOperationsPartiallyFailed,
		phase.EventFinalize:                phase.Finalizing,
		phase.EventFinalizePartiallyFailed: phase.FinalizingPartiallyFailed,
		phase.EventComplete:                phase.Completed,
		phase.EventCompletePartiallyFailed: phase.PartiallyFailed,
		phase.EventFail:                    phase.Failed,
		phase.EventDelete:                  phase.Deleting,
	}
	require.Len(t, phase.Events(), len(targets))
	var order []phase.Phase // the events' phases, in the events' order
	for _, e := range phase.Events() {
		to, ok := e.Target()
		require.True(t, ok)
		require.Equal(t, targets[e], to, "%s", e)
		order = append(order, to)
		back, ok := phase.EventTo(to)
		require.True(t, ok)
		require.Equal(t, e, back)
	}
	// The order that Path, Machine.Events and the diagrams document: every phase but
	// New, which no event leads to, in the order of Phases.
	if d := cmp.Diff(phase.Phases()[1:], order); d != "" {
		t.Errorf("the events' phases (-want +got):\n%s", d)
	}
	_, ok := phase.Event("bogus").Target()
	require.False(t, ok)
	_, ok = phase.EventTo(phase.New)
	require.False(t, ok, "no event leads to New")
}

func TestProfileString(t *testing.T) {
	require.Equal(t, "default", phase.Profile{}.String())
	require.Equal(t, "queue", phase.Profile{Queue: true}.String())
	require.Equal(t, "restore-finalizing", phase.Profile{RestoreFinalizing: true}.String())
	require.Equal(t, "queue,restore-finalizing", phase.Profile{Queue: true, RestoreFinalizing: true}.String())
}

func TestTransitionErrorMessages(t *testing.T) {
	tests := []struct {
		err  *phase.TransitionError
		want string
	}{
		{&phase.TransitionError{Kind: phase.Backup, From: phase.Completed, Event: phase.EventStart, Err: phase.ErrInvalidTransition},
			`phase: Backup in Completed cannot take event "start": invalid phase transition`},
		{&phase.TransitionError{Kind: phase.Restore, From: phase.Failed, To: phase.Completed, Err: phase.ErrInvalidTransition},
			`phase: Restore cannot go from Failed to Completed: invalid phase transition`},
		{&phase.TransitionError{Kind: phase.Restore, From: phase.Failed, Err: phase.ErrInvalidTransition},
			`phase: Restore in Failed: invalid phase transition`},
	}
	for _, tc := range tests {
		require.EqualError(t, tc.err, tc.want)
	}
}

func TestValidate(t *testing.T) {
	require.NoError(t, phase.Validate(phase.Backup, phase.Deleting))
	require.NoError(t, phase.Validate(phase.Backup, phase.Queued, phase.WithQueue()))
	require.ErrorIs(t, phase.Validate(phase.Backup, phase.Queued), phase.ErrUnknownPhase)
	require.ErrorIs(t, phase.Validate(phase.Restore, phase.Deleting), phase.ErrUnknownPhase)
	require.ErrorIs(t, phase.Validate(phase.Restore, "Uploading"), phase.ErrUnknownPhase)
	require.ErrorIs(t, phase.Validate("Schedule", phase.New), phase.ErrUnknownKind)
	allocs := testing.AllocsPerRun(100, func() { _ = phase.Validate(phase.Restore, phase.Completed, phase.WithRestoreFinalizing()) })
	require.Zero(t, allocs)
}

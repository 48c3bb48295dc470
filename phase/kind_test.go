package phase_test

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/itemops/itemops/phase"
)

// A kind of one's own follows the machine of its base, under its own name.
func TestDeclaredKindFollowsItsBase(t *testing.T) {
	const snapshot phase.Kind = "DatabaseSnapshot"
	profile, err := phase.Declare(snapshot, phase.Backup, phase.WithQueue(), phase.WithRestoreFinalizing())
	require.NoError(t, err)
	require.Empty(t, cmp.Diff(phase.Profile{Queue: true, Base: phase.Backup}, profile))
	require.Equal(t, "backup-like,queue", profile.String())

	m, err := phase.NewMachine(snapshot, phase.New, profile)
	require.NoError(t, err)
	require.Equal(t, snapshot, m.Kind())
	require.Empty(t, cmp.Diff(profile, m.Profile()))
	ctx := context.Background()
	for _, e := range []phase.Event{phase.EventQueue, phase.EventReady, phase.EventStart, phase.EventFinalize, phase.EventComplete, phase.EventDelete} {
		require.NoError(t, m.Fire(ctx, e))
	}
	require.Equal(t, phase.Deleting, m.Phase())
	var te *phase.TransitionError
	require.ErrorAs(t, m.Fire(ctx, phase.EventStart), &te)
	require.Equal(t, snapshot, te.Kind)

	// The same machine as a backup's: the same events from every phase.
	b, err := phase.NewMachine(phase.Backup, phase.Queued, phase.WithQueue())
	require.NoError(t, err)
	s, err := phase.NewMachine(snapshot, phase.Queued, profile)
	require.NoError(t, err)
	require.Equal(t, b.Events(), s.Events())

	// A restore-like kind: no Deleting, no queue, and Finalizing when asked for.
	migration, err := phase.Declare("Migration", phase.Restore, phase.WithQueue())
	require.NoError(t, err)
	require.Empty(t, cmp.Diff(phase.Profile{Base: phase.Restore}, migration))
	require.ErrorIs(t, phase.Validate("Migration", phase.Deleting, migration), phase.ErrUnknownPhase)
	require.Equal(t, phase.Completed, phase.AfterMainRun("Migration", phase.Outcome{}, migration))
	require.Equal(t, phase.Finalizing, phase.AfterMainRun(snapshot, phase.Outcome{}, profile))
	next, err := phase.AfterPoll("Migration", phase.WaitingForPluginOperations, 1, 0, migration)
	require.NoError(t, err)
	require.Equal(t, phase.PartiallyFailed, next)
	events, err := phase.Path(snapshot, phase.InProgress, phase.Completed, profile)
	require.NoError(t, err)
	require.Equal(t, []phase.Event{phase.EventFinalize, phase.EventComplete}, events)

	// OnRestart names the kind as it is written.
	to, reason, changed := phase.OnRestart(snapshot, phase.InProgress, profile)
	require.True(t, changed)
	require.Equal(t, phase.Failed, to)
	require.Equal(t, `found a DatabaseSnapshot with status "InProgress" during the server starting, mark it as "Failed"`, reason)

	_, reason, _ = phase.OnRestart("AppBackup", phase.WaitingForPluginOperations, profile)
	require.Equal(t, `found an AppBackup with status "WaitingForPluginOperations" during the server starting, resume it`, reason)

	diagram, err := phase.Mermaid(snapshot, profile)
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(diagram, "---\ntitle: DatabaseSnapshot (backup-like,queue profile)\n"), diagram)

	var opt phase.Option = profile // boxed once, as a run's profile is by its caller
	allocs := testing.AllocsPerRun(100, func() { _ = phase.Validate(snapshot, phase.Completed, opt) })
	require.Zero(t, allocs)
}

// Without its profile a kind of one's own is unknown everywhere, and says how to declare it.
func TestUndeclaredKindIsUnknown(t *testing.T) {
	const snapshot phase.Kind = "DatabaseSnapshot"
	_, err := phase.NewMachine(snapshot, phase.New)
	require.ErrorIs(t, err, phase.ErrUnknownKind)
	require.ErrorContains(t, err, "phase.Declare")
	require.ErrorIs(t, phase.Validate(snapshot, phase.New, phase.WithQueue()), phase.ErrUnknownKind)
	require.Equal(t, phase.Phase(""), phase.AfterMainRun(snapshot, phase.Outcome{}))
	_, _, changed := phase.OnRestart(snapshot, phase.InProgress)
	require.False(t, changed)
	_, err = phase.ParseKind("DatabaseSnapshot")
	require.ErrorIs(t, err, phase.ErrUnknownKind)
	require.ErrorContains(t, err, "phase.Declare")
	_, err = phase.NewMachine(snapshot, phase.New, phase.Profile{Base: "Migration"})
	require.ErrorIs(t, err, phase.ErrUnknownKind)

	// Backup and Restore keep their own machines.
	for _, tc := range []struct{ kind, base phase.Kind }{{phase.Backup, phase.Restore}, {phase.Restore, phase.Backup}} {
		_, err := phase.NewMachine(tc.kind, phase.New, phase.Profile{Base: tc.base})
		require.ErrorIs(t, err, phase.ErrUnknownKind, "%s following %s", tc.kind, tc.base)
		_, err = phase.Declare(tc.kind, tc.base)
		require.ErrorIs(t, err, phase.ErrUnknownKind, "%s following %s", tc.kind, tc.base)
	}
	p, err := phase.Declare(phase.Restore, phase.Restore, phase.WithRestoreFinalizing())
	require.NoError(t, err)
	require.Empty(t, cmp.Diff(phase.Profile{RestoreFinalizing: true}, p))
	_, err = phase.NewMachine(phase.Backup, phase.New, phase.Profile{Base: phase.Backup})
	require.NoError(t, err)
}

func TestKindNames(t *testing.T) {
	long := phase.Kind("K" + strings.Repeat("a", phase.MaxKindBytes-1))
	for _, k := range []phase.Kind{phase.Backup, phase.Restore, "DatabaseSnapshot", "V1", "x", long} {
		require.NoError(t, k.Validate(), "%q", k)
		if k != phase.Backup && k != phase.Restore {
			_, err := phase.Declare(k, phase.Restore)
			require.NoError(t, err, "%q", k)
		}
	}
	for _, k := range []phase.Kind{"", long + "a", "1Snapshot", "Database-Snapshot", "Database Snapshot", "Snapshot\x00", "Snäpshot", "backup", "RESTORE"} {
		err := k.Validate()
		require.ErrorIs(t, err, phase.ErrUnknownKind, "%q", k)
		_, err = phase.Declare(k, phase.Backup)
		require.ErrorIs(t, err, phase.ErrUnknownKind, "%q", k)
		require.ErrorIs(t, phase.Validate(k, phase.New, phase.Profile{Base: phase.Backup}), phase.ErrUnknownKind, "%q", k)
	}
	_, err := phase.Declare("Migration", "Migration")
	require.ErrorIs(t, err, phase.ErrUnknownKind)
}

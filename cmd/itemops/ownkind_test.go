package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/phase"
	"github.com/itemops/itemops/storage/boltstore"
)

// TestOwnKinds inspects and cancels runs of kinds of one's own: inspect counts and shows
// them under their kind's name, with the machine they follow; cancel finds them by name,
// and asks for -kind when several kinds share the name.
func TestOwnKinds(t *testing.T) {
	path := filepath.Join(t.TempDir(), "store.db")
	s, err := boltstore.Open(path, nil)
	require.NoError(t, err)
	ctx := context.Background()
	created := at.Add(-10 * time.Minute)
	snapshot, err := phase.Declare("DatabaseSnapshot", phase.Backup)
	require.NoError(t, err)
	// A kind that names its phases: inspect names them in its profile.
	migration, err := phase.Declare("Migration", phase.Restore, phase.WithPhases(phase.New, phase.InProgress,
		phase.WaitingForPluginOperations, phase.WaitingForPluginOperationsPartiallyFailed,
		phase.Completed, phase.PartiallyFailed, phase.Failed))
	require.NoError(t, err)
	for _, r := range []struct {
		owner   operations.Owner
		profile phase.Profile
		to      phase.Phase
	}{
		{operations.Owner{Kind: phase.Backup, Name: "nightly"}, phase.Profile{}, phase.Completed},
		{operations.Owner{Kind: "DatabaseSnapshot", Name: "orders", UID: "uid-o"}, snapshot, phase.WaitingForPluginOperations},
		{operations.Owner{Kind: "Migration", Name: "orders"}, migration, phase.InProgress},
		{operations.Owner{Kind: "Migration", Name: "v2"}, migration, phase.WaitingForPluginOperations},
	} {
		run := operations.Run{Owner: r.owner, Phase: phase.New, Profile: r.profile, Created: created}
		require.NoError(t, run.SetPhase(r.to, "fixture", created.Add(time.Second)))
		require.NoError(t, s.CreateRun(ctx, run))
	}
	op := backupOps()[0]
	op.Owner = operations.Owner{Kind: "DatabaseSnapshot", Name: "orders"}
	require.NoError(t, s.PutOperations(ctx, op.Owner, []operations.Operation{op}))
	require.NoError(t, s.Close())

	fixNow(t)
	status, out, errOut := runCLI("inspect", path)
	require.Equal(t, 0, status, errOut)
	lines := strings.Split(out, "\n")
	require.Equal(t, "boltstore "+path+": 4 runs (1 Backup, 0 Restore, 1 DatabaseSnapshot, 2 Migration), 1 operation (1 InProgress)", lines[0])
	var rows []string
	for _, l := range lines[3:7] {
		rows = append(rows, strings.Join(strings.Fields(l)[:3], " "))
	}
	require.Equal(t, []string{
		"nightly Backup Completed",
		"orders DatabaseSnapshot WaitingForPluginOperations",
		"orders Migration InProgress",
		"v2 Migration WaitingForPluginOperations",
	}, rows)
	require.Contains(t, out, "\nDatabaseSnapshot orders: WaitingForPluginOperations (UID uid-o)\n  created 10m ago, profile backup-like,")
	require.Contains(t, out, "\nMigration v2: WaitingForPluginOperations\n  created 10m ago, profile restore-like,phases=New+InProgress+WaitingForPluginOperations+WaitingForPluginOperationsPartiallyFailed+Completed+PartiallyFailed+Failed, operation timeout")

	// Two kinds share the name orders.
	status, _, errOut = runCLI("cancel", path, "orders")
	require.Equal(t, 2, status, errOut)
	require.Contains(t, errOut, `runs of 2 kinds are named "orders" (DatabaseSnapshot, Migration): say which with -kind`)
	status, out, errOut = runCLI("cancel", "-kind", "DatabaseSnapshot", path, "orders")
	require.Equal(t, 0, status, errOut)
	require.Contains(t, out, "DatabaseSnapshot orders: cancel requested")
	status, out, errOut = runCLI("cancel", path, "v2")
	require.Equal(t, 0, status, errOut)
	require.Contains(t, out, "Migration v2: cancel requested")
	status, _, errOut = runCLI("cancel", "-kind", "Data-Snapshot", path, "orders")
	require.Equal(t, 2, status, errOut)
	require.Contains(t, errOut, `-kind "Data-Snapshot": want backup, restore, or the name of a kind`)

	// check accepts the store, and salvage copies every run of every kind.
	status, _, errOut = runCLI("check", path)
	require.Equal(t, 0, status, errOut)
	copied := filepath.Join(t.TempDir(), "copy.db")
	status, _, errOut = runCLI("salvage", path, copied)
	require.Equal(t, 0, status, errOut)
	_, before, _ := runCLI("inspect", path)
	status, after, errOut := runCLI("inspect", copied)
	require.Equal(t, 0, status, errOut)
	require.Equal(t, strings.ReplaceAll(before, path, copied), after)
}

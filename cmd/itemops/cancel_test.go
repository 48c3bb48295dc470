package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/itemops/itemops/internal/testutil/boltfault"
	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/phase"
	"github.com/itemops/itemops/storage/boltstore"
)

func TestCancel(t *testing.T) {
	path := filepath.Join(t.TempDir(), "store.db")
	s, err := boltstore.Open(path, nil)
	require.NoError(t, err)
	ctx := context.Background()
	t0 := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	waiting := operations.Run{Owner: operations.Owner{Kind: phase.Restore, Name: "r1"}, Phase: phase.New, Created: t0}
	require.NoError(t, waiting.SetPhase(phase.WaitingForPluginOperations, "main run ended", t0))
	done := operations.Run{Owner: operations.Owner{Kind: phase.Backup, Name: "b1"}, Phase: phase.New, Created: t0}
	require.NoError(t, done.SetPhase(phase.Completed, "finished", t0))
	require.NoError(t, s.CreateRun(ctx, waiting))
	require.NoError(t, s.CreateRun(ctx, done))
	require.NoError(t, s.Close())

	status, out, errOut := runCLI("cancel", "-reason", "jane: wrong namespace", path, "r1")
	require.Equal(t, 0, status, errOut)
	require.Contains(t, out, "Restore r1: cancel requested (jane: wrong namespace)")

	status, _, errOut = runCLI("cancel", path, "b1")
	require.Equal(t, 1, status)
	require.Contains(t, errOut, "run has ended")
	status, _, errOut = runCLI("cancel", path, "nope")
	require.Equal(t, 1, status)
	require.Contains(t, errOut, `no run "nope"`)

	// The request is stored, and inspect shows it with its reason and in the history.
	status, out, errOut = runCLI("inspect", "-run", "r1", path)
	require.Equal(t, 0, status, errOut)
	require.Contains(t, out, "cancel requested")
	require.Contains(t, out, "jane: wrong namespace")
	require.Contains(t, out, string(operations.EventCancelRequested))
}

// TestCommandsNeverCreateAStore runs every command that reads or changes a store on a
// path where there is none: each fails with status 1, saying the file does not exist,
// and leaves no file behind.
func TestCommandsNeverCreateAStore(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing.db")
	for _, args := range [][]string{
		{"cancel", missing, "r1"},
		{"check", missing},
		{"inspect", missing},
		{"inspect", "-run", "r1", missing},
		{"salvage", missing, filepath.Join(dir, "saved.db")},
		{"serve", "-addr", "127.0.0.1:0", missing},
		{"watch", missing, "r1"},
		{"watch", "bolt://" + missing, "r1"},
	} {
		status, out, errOut := runCLI(args...)
		require.Equal(t, 1, status, "%v: %s%s", args, out, errOut)
		require.Contains(t, errOut, "no such file or directory", "%v", args)
		require.Equal(t, 1, strings.Count(errOut, "\n"), "%v: one error line, got %q", args, errOut)
		entries, err := os.ReadDir(dir)
		require.NoError(t, err)
		require.Empty(t, entries, "%v left a file behind", args)
	}
}

// TestCommandsNeverWriteANonStore runs every command that reads or changes a store on
// files that exist and are not stores: an empty file, a bbolt file without buckets or
// of another program, and text. Each fails with status 1 and one error line, and leaves
// the file byte for byte as it was.
func TestCommandsNeverWriteANonStore(t *testing.T) {
	files, err := boltfault.NotStores()
	require.NoError(t, err)
	for name, content := range files {
		for _, args := range [][]string{
			{"cancel", "FILE", "r1"},
			{"demo", "-db", "FILE", "-items", "10", "-operations", "2"},
			{"check", "FILE"},
			{"inspect", "FILE"},
			{"salvage", "FILE", "NEW"},
			{"serve", "-addr", "127.0.0.1:0", "FILE"},
		} {
			t.Run(name+"/"+args[0], func(t *testing.T) {
				dir := t.TempDir()
				path := filepath.Join(dir, "file")
				require.NoError(t, os.WriteFile(path, content, 0o600))
				args := slices.Clone(args)
				for i, a := range args {
					args[i] = strings.NewReplacer("FILE", path, "NEW", filepath.Join(dir, "new")).Replace(a)
				}
				status, out, errOut := runCLI(args...)
				require.Equal(t, 1, status, "%s%s", out, errOut)
				require.Equal(t, 1, strings.Count(errOut, "\n"), "one error line, got %q", errOut)
				after, err := os.ReadFile(path)
				require.NoError(t, err)
				require.True(t, bytes.Equal(content, after), "%s changed the file", args[0])
				require.NoFileExists(t, filepath.Join(dir, "new"))
			})
		}
	}
}

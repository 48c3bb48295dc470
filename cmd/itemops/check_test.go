package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/phase"
	"github.com/itemops/itemops/storage/boltstore"
)

// damagedStores writes a store of 30 runs and returns the paths of a sound copy, a copy
// cut to half its size, and a copy whose page holding the records of one run has its
// header overwritten.
func damagedStores(t *testing.T) (sound, truncated, flipped string) {
	t.Helper()
	dir := t.TempDir()
	sound = filepath.Join(dir, "sound.db")
	s, err := boltstore.Open(sound, &boltstore.Options{NoSync: true})
	require.NoError(t, err)
	ctx := context.Background()
	t0 := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	for i := 0; i < 30; i++ {
		o := operations.Owner{Kind: phase.Restore, Name: fmt.Sprintf("restore-%02d", i)}
		r := operations.Run{Owner: o, Phase: phase.New, Created: t0}
		require.NoError(t, r.SetPhase(phase.WaitingForPluginOperations, "started", t0))
		var ops []operations.Operation
		for j := 0; j < 20; j++ {
			ops = append(ops, operations.Operation{Owner: o, Action: "example.io/mover", ID: fmt.Sprintf("op-%02d", j),
				Status: operations.Status{Phase: operations.OperationInProgress, Description: fmt.Sprintf("marker-%02d-%02d", i, j), Created: t0}})
		}
		require.NoError(t, s.CreateRunWithOperations(ctx, r, ops))
	}
	require.NoError(t, s.Close())
	good, err := os.ReadFile(sound)
	require.NoError(t, err)

	truncated = filepath.Join(dir, "truncated.db")
	require.NoError(t, os.WriteFile(truncated, good[:len(good)/2], 0o600))

	bad := bytes.Clone(good)
	at := bytes.Index(bad, []byte("marker-15-07"))
	require.Positive(t, at)
	page := at / 4096 * 4096
	copy(bad[page:page+16], bytes.Repeat([]byte{0xa5}, 16))
	flipped = filepath.Join(dir, "flipped.db")
	require.NoError(t, os.WriteFile(flipped, bad, 0o600))
	return sound, truncated, flipped
}

func runCLI(args ...string) (status int, stdout, stderr string) {
	var out, errOut bytes.Buffer
	status = run(args, &out, &errOut)
	return status, out.String(), errOut.String()
}

func TestCheck(t *testing.T) {
	sound, truncated, flipped := damagedStores(t)
	status, out, errOut := runCLI("check", sound)
	require.Equal(t, 0, status, "check of a sound store: %s", errOut)
	require.Contains(t, out, "sound; 30 runs, 600 operations")

	for _, path := range []string{truncated, flipped} {
		before, err := os.ReadFile(path)
		require.NoError(t, err)
		status, out, errOut := runCLI("check", path)
		require.Equal(t, 1, status, "check of %s: %s%s", path, out, errOut)
		require.Empty(t, out)
		require.Equal(t, 1, strings.Count(errOut, "\n"), "one error line, got %q", errOut)
		require.Contains(t, errOut, "damaged")
		after, err := os.ReadFile(path)
		require.NoError(t, err)
		require.True(t, bytes.Equal(before, after), "check changed %s", path)
	}
}

// inspect and demo on a damaged store print one error line, exit with status 1, and
// leave the file as it was.
func TestDamagedStoreGivesOneErrorLine(t *testing.T) {
	_, truncated, flipped := damagedStores(t)
	for _, path := range []string{truncated, flipped} {
		for _, args := range [][]string{{"inspect", path}, {"demo", "-db", path, "-items", "10", "-operations", "2"}} {
			before, err := os.ReadFile(path)
			require.NoError(t, err)
			status, _, errOut := runCLI(args...)
			require.Equal(t, 1, status, "%v: %s", args, errOut)
			require.Equal(t, 1, strings.Count(errOut, "\n"), "%v: one error line, got %q", args, errOut)
			require.Contains(t, errOut, "damaged", "%v", args)
			after, err := os.ReadFile(path)
			require.NoError(t, err)
			require.True(t, bytes.Equal(before, after), "%v changed the file", args)
		}
	}
}

func TestSalvage(t *testing.T) {
	_, _, flipped := damagedStores(t)
	to := filepath.Join(t.TempDir(), "saved.db")
	status, out, errOut := runCLI("salvage", flipped, to)
	require.Equal(t, 1, status, "salvage reports what it lost: %s%s", out, errOut)
	require.Contains(t, out, "lost: ")
	require.Contains(t, errOut, "could not be read")

	// What was saved is a sound store holding the runs that could be read, with all
	// their operations.
	status, checked, errOut := runCLI("check", to)
	require.Equal(t, 0, status, "check of the salvaged store: %s", errOut)
	s, err := boltstore.Open(to, nil)
	require.NoError(t, err)
	defer s.Close()
	runs, err := s.ListRuns(context.Background(), operations.RunFilter{})
	require.NoError(t, err)
	require.NotEmpty(t, runs, "nothing was saved")
	require.Less(t, len(runs), 31)
	for _, r := range runs {
		ops, err := s.ListOperations(context.Background(), r.Owner, operations.OperationFilter{})
		require.NoError(t, err)
		if len(ops) != 20 && !strings.Contains(out, r.Owner.String()) {
			t.Errorf("run %s was saved with %d of its 20 operations, and the loss is not listed", r.Owner, len(ops))
		}
	}
	t.Logf("%s%s", out, checked)

	// salvage never writes over an existing file.
	status, _, errOut = runCLI("salvage", flipped, to)
	require.Equal(t, 1, status)
	require.Contains(t, errOut, "exists")
}

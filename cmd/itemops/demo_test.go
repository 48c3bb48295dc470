package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/operations/monitor"
	"github.com/itemops/itemops/operations/opsfile"
	"github.com/itemops/itemops/phase"
	"github.com/itemops/itemops/restoreorder"
	"github.com/itemops/itemops/storage/boltstore"
)

// openStore opens the store file at path for the rest of the test.
func openStore(t *testing.T, path string) *boltstore.Store {
	t.Helper()
	s, err := boltstore.Open(path, nil)
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	return s
}

// phasesOf returns the phase of every run in s, by name.
func phasesOf(t *testing.T, s operations.Store) map[string]phase.Phase {
	t.Helper()
	runs, err := s.ListRuns(context.Background(), operations.RunFilter{})
	require.NoError(t, err)
	out := map[string]phase.Phase{}
	for _, r := range runs {
		out[r.Owner.Name] = r.Phase
	}
	return out
}

// pathOf returns the phases a run went through.
func pathOf(r operations.Run) []phase.Phase {
	p := []phase.Phase{phase.New}
	for _, tr := range r.History {
		p = append(p, tr.To)
	}
	return p
}

// A demo run in the process, with plain output: a backup and a restore of a small
// application reach Completed through the phases of the design, every operation
// completes, and the bucket holds the backup's tarball, as restoreorder reads it, and
// both itemoperations files, as the codec reads them.
func TestDemo(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := filepath.Join(t.TempDir(), "demo.db")
	code, stdout, stderr := runCmd("demo", "-db", db, "-items", "40", "-operations", "3", "-speed", "20")
	require.Equal(t, 0, code, "stderr: %s\nstdout: %s", stderr, stdout)
	require.Empty(t, stderr)
	require.NotContains(t, stdout, "\x1b[", "no escape codes when the output is not a terminal")
	for _, want := range []string{
		"recovered: nothing",
		"round 1: a backup of the application, then a restore of it",
		"backup-1.1  New → InProgress  (backup started)",
		"backup-1.1  InProgress → WaitingForPluginOperations  (main run ended: 40 items backed up, 3 operations started)",
		"backup-1.1  ✓ upload shop/data-0: Completed",
		"backup-1.1  WaitingForPluginOperations → Finalizing  (all operations ended)",
		"backup-1.1  Finalizing → Completed  (finalized)",
		"restore-1.1: pass one collected 40 items from backup-1.1 in priority order (namespaces, storageclasses.storage.k8s.io, persistentvolumes, … first)",
		"restore-1.1 InProgress → WaitingForPluginOperations  (main run ended: 39 of 40 items restored, 1 skipped, 3 operations started)",
		"restore-1.1 ✓ download shop/data-0: Completed",
		"restore-1.1 WaitingForPluginOperations → Completed  (all operations ended)",
		"\nSummary\n",
		"inspect the store:  " + selfCommand() + " inspect " + db,
	} {
		require.Contains(t, stdout, want)
	}
	require.Less(t, strings.Index(stdout, "Finalizing → Completed"), strings.Index(stdout, "restore-1.1 New → InProgress"), "the restore starts once the backup is done")

	s := openStore(t, db)
	runs, err := s.ListRuns(ctx, operations.RunFilter{})
	require.NoError(t, err)
	require.Len(t, runs, 2)
	wantPaths := map[string][]phase.Phase{
		"backup-1.1":  {phase.New, phase.InProgress, phase.WaitingForPluginOperations, phase.Finalizing, phase.Completed},
		"restore-1.1": {phase.New, phase.InProgress, phase.WaitingForPluginOperations, phase.Completed},
	}
	wantItems := map[string][2]int{"backup-1.1": {40, 40}, "restore-1.1": {39, 39}}
	b := bucket{strings.TrimSuffix(db, ".db") + "-bucket"}
	for _, r := range runs {
		if diff := cmp.Diff(wantPaths[r.Owner.Name], pathOf(r)); diff != "" {
			t.Errorf("%s: phases (-want +got):\n%s", r.Owner.Name, diff)
		}
		require.Equal(t, wantItems[r.Owner.Name], [2]int{r.ItemsDone, r.ItemsTotal}, "%s: items done and total", r.Owner.Name)
		require.Zero(t, r.Errors)
		ops, err := s.ListOperations(ctx, r.Owner, operations.OperationFilter{})
		require.NoError(t, err)
		require.Len(t, ops, 3)
		for _, op := range ops {
			require.Equal(t, operations.OperationCompleted, op.Status.Phase, "%s", op.ID)
			require.Equal(t, op.Status.NTotal, op.Status.NCompleted)
			require.Equal(t, moverName, op.Action)
		}

		f, err := os.Open(b.operationsFile(r.Owner))
		require.NoError(t, err, "the bucket holds the run's itemoperations file")
		decoded, err := opsfile.Decode(f, opsfile.ExpectKind(r.Owner.Kind))
		f.Close()
		require.NoError(t, err)
		require.Len(t, decoded, len(ops))
		for i := range ops {
			require.Equal(t, ops[i].ID, decoded[i].ID)
			require.Equal(t, ops[i].Status.Phase, decoded[i].Status.Phase)
			require.Equal(t, ops[i].PostOperationItems, decoded[i].PostOperationItems)
		}
	}

	// The tarball is one restoreorder reads, and the finalizer backed up the claims again.
	f, err := os.Open(b.tarball("backup-1.1"))
	require.NoError(t, err)
	defer f.Close()
	src, err := restoreorder.FromTarGz(f)
	require.NoError(t, err)
	c, err := restoreorder.Collect(ctx, src, restoreorder.DefaultPriorities(), restoreorder.Filter{})
	require.NoError(t, err)
	require.Equal(t, 40, c.Total())
	claims := 0
	for it := range c.Items() {
		data, err := restoreorder.ReadItem(ctx, src, it.Path)
		require.NoError(t, err)
		var u unstructured.Unstructured
		require.NoError(t, json.Unmarshal(data, &u.Object))
		if it.Resource == "persistentvolumeclaims" {
			claims++
			require.Equal(t, "true", u.GetAnnotations()["demo.itemops.io/data-uploaded"], "%s was backed up again by the finalizer", it.Name)
		}
		if it.TargetNamespace != "" && it.Resource != "namespaces" {
			require.Equal(t, "backup-1.1", u.GetLabels()["demo.itemops.io/backup"], "%s %s was labeled by the v1 plugin", it.Resource, it.Name)
		}
	}
	require.Equal(t, 3, claims)
	require.NoError(t, s.Close())

	// A second demo on the same store finds nothing to recover and runs round 2.
	code, stdout, stderr = runCmd("demo", "-db", db, "-items", "40", "-operations", "3", "-speed", "20")
	require.Equal(t, 0, code, "stderr: %s", stderr)
	require.Contains(t, stdout, "recovered: nothing")
	require.Contains(t, stdout, "round 2: a backup")
	s = openStore(t, db)
	require.Equal(t, map[string]phase.Phase{
		"backup-1.1": phase.Completed, "restore-1.1": phase.Completed,
		"backup-2.1": phase.Completed, "restore-2.1": phase.Completed,
	}, phasesOf(t, s))
}

// With -fail-rate 1 every operation fails or stalls until it times out: the backup goes
// through the partially failed phases, and so does the restore.
func TestDemoFailRate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := filepath.Join(t.TempDir(), "demo.db")
	code, stdout, stderr := runCmd("demo", "-db", db, "-items", "40", "-operations", "4", "-speed", "20", "-fail-rate", "1")
	require.Equal(t, 0, code, "stderr: %s\nstdout: %s", stderr, stdout)
	require.Contains(t, stdout, "FinalizingPartiallyFailed → PartiallyFailed")
	s := openStore(t, db)
	runs, err := s.ListRuns(ctx, operations.RunFilter{})
	require.NoError(t, err)
	require.Len(t, runs, 2)
	reasons := map[string]int{}
	for _, r := range runs {
		require.Equal(t, phase.PartiallyFailed, r.Phase, "%s", r.Owner.Name)
		require.Contains(t, pathOf(r), phase.WaitingForPluginOperationsPartiallyFailed, "%s", r.Owner.Name)
		require.Equal(t, 4, r.Errors, "%s: each failed operation counts as an error", r.Owner.Name)
		ops, err := s.ListOperations(ctx, r.Owner, operations.OperationFilter{})
		require.NoError(t, err)
		for _, op := range ops {
			require.Equal(t, operations.OperationFailed, op.Status.Phase)
			reasons[op.Status.Error]++
		}
	}
	require.Positive(t, reasons[monitor.TimeoutMessage], "some operations stalled and timed out: %v", reasons)
	require.Positive(t, reasons["connection to the object store reset (failure injected by -fail-rate)"], "some failed: %v", reasons)
}

func TestDemoUsageErrors(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"too few items", []string{"-items", "5", "-operations", "6"}, "-items must be at least 16 for 6 operations"},
		{"negative operations", []string{"-operations", "-1"}, "-operations must not be negative"},
		{"no speed", []string{"-speed", "0"}, "-speed must be above 0"},
		{"a fail rate above one", []string{"-fail-rate", "1.5"}, "-fail-rate must be between 0 and 1"},
		{"a negative crash", []string{"-crash-after", "-1s"}, "-crash-after must not be negative"},
		{"a stray argument", []string{"now"}, "unexpected arguments"},
		{"an unknown flag", []string{"-fast"}, "flag provided but not defined: -fast"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := runCmd(append([]string{"demo"}, tc.args...)...)
			require.Equal(t, 2, code)
			require.Empty(t, stdout)
			require.Contains(t, stderr, tc.want)
		})
	}
	code, _, stderr := runCmd("demo", "-h")
	require.Equal(t, 0, code)
	require.Contains(t, stderr, "-crash-after")
}

// A demo on a store another process has open stops at once, saying so.
func TestDemoLockedStore(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "demo.db")
	openStore(t, db)
	code, stdout, stderr := runCmd("demo", "-db", db)
	require.Equal(t, 1, code)
	require.Empty(t, stdout)
	require.Contains(t, stderr, "file is locked by another store")
	require.Contains(t, stderr, "is another demo running on it?")
}

func TestRunNames(t *testing.T) {
	tests := []struct {
		owner          operations.Owner
		round, attempt int
		ok             bool
	}{
		{operations.Owner{Kind: phase.Backup, Name: "backup-3.2"}, 3, 2, true},
		{operations.Owner{Kind: phase.Restore, Name: "restore-12.1"}, 12, 1, true},
		{operations.Owner{Kind: phase.Restore, Name: "backup-1.1"}, 0, 0, false},
		{operations.Owner{Kind: phase.Backup, Name: "backup-1"}, 0, 0, false},
		{operations.Owner{Kind: phase.Backup, Name: "backup-0.1"}, 0, 0, false},
		{operations.Owner{Kind: phase.Backup, Name: "backup-1.x"}, 0, 0, false},
		{operations.Owner{Kind: phase.Backup, Name: "nightly"}, 0, 0, false},
	}
	for _, tc := range tests {
		round, attempt, ok := parseRunName(tc.owner)
		require.Equal(t, []any{tc.round, tc.attempt, tc.ok}, []any{round, attempt, ok}, "%s", tc.owner.Name)
		if tc.ok {
			require.Equal(t, tc.owner.Name, runName(tc.owner.Kind, round, attempt))
		}
	}
}

// The terminal display draws bars for the runs under way and redraws them in place, and
// writes the events above them.
func TestDisplayTerminal(t *testing.T) {
	ctx := context.Background()
	s := openStore(t, filepath.Join(t.TempDir(), "display.db"))
	o := operations.Owner{Kind: phase.Backup, Name: "backup-1.1"}
	r := operations.Run{Owner: o, Phase: phase.New, Created: t0}
	require.NoError(t, r.SetPhase(phase.WaitingForPluginOperations, "main run ended", t0.Add(time.Second)))
	require.NoError(t, s.CreateRun(ctx, r))
	j := job{verb: "upload", seq: 1, size: 4 << 30, start: t0, dur: 4 * time.Second, fate: fateOK}
	op := operations.Operation{Owner: o, Action: moverName, ID: j.id(),
		Resource: operations.ResourceIdentifier{Resource: "persistentvolumeclaims", Namespace: "shop", Name: "data-0"},
		Status: operations.Status{Phase: operations.OperationInProgress, NCompleted: 1 << 30, NTotal: 4 << 30, OperationUnits: "Bytes",
			Description: "uploading", Created: t0, Started: t0, Updated: t0.Add(time.Second)}}
	require.NoError(t, s.PutOperations(ctx, o, []operations.Operation{op}))

	t.Setenv("NO_COLOR", "") // colors on, whatever the environment says
	var out bytes.Buffer
	d := newDisplay(&out, true, func() int { return 120 }, s)
	d.watch(ctx, o)
	d.refresh(ctx)
	first := out.String()
	require.Contains(t, first, ansiHideCursor)
	require.Contains(t, first, "backup-1.1  WaitingForPluginOperations  0 of 1 operation ended\n")
	require.Contains(t, first, "  upload   shop/data-0            █████░░░░░░░░░░░░░░░  25%  1.0 GiB / 4.0 GiB  1.0 GiB/s  uploading\n")
	require.NotContains(t, first, "\x1b[2A", "nothing to clear yet")

	op.Status.Phase, op.Status.NCompleted, op.Status.Updated = operations.OperationCompleted, 4<<30, t0.Add(4*time.Second)
	require.NoError(t, s.PutOperations(ctx, o, []operations.Operation{op}))
	_, err := s.UpdateRun(ctx, o, func(r *operations.Run) error {
		return r.SetPhase(phase.Finalizing, "all operations ended", t0.Add(4*time.Second))
	})
	require.NoError(t, err)
	out.Reset()
	d.refresh(ctx)
	second := out.String()
	require.True(t, strings.HasPrefix(second, "\r\x1b[2A"+ansiClearDown), "the two lines of bars are cleared first: %q", second)
	require.Contains(t, second, "backup-1.1  \x1b[32m✓\x1b[0m upload shop/data-0: Completed, 4.0 GiB in 4.00s\n")
	require.Contains(t, second, "backup-1.1  WaitingForPluginOperations → \x1b[36mFinalizing\x1b[0m  (all operations ended)\n")
	require.Contains(t, second, "backup-1.1  Finalizing  1 of 1 operation ended\n")
	require.Less(t, strings.Index(second, "✓"), strings.Index(second, "→"), "the operation's end comes before the phase change it caused")

	out.Reset()
	d.stop(ctx)
	require.Equal(t, "\r\x1b[1A"+ansiClearDown+ansiShowCursor, out.String(), "stop removes the bars and shows the cursor")
	d.printf("after stop")
	require.Contains(t, out.String(), "after stop\n")
	require.NotContains(t, out.String(), "Finalizing  1 of 1", "nothing is drawn after stop")
}

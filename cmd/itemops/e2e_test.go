package main

import (
	"bytes"
	"context"
	"errors"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/itemops/itemops/internal/testutil/racebuild"
	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/operations/monitor"
	"github.com/itemops/itemops/phase"
	"github.com/itemops/itemops/storage/boltstore"
)

// buildCommand builds the command into a temporary directory and returns its path.
func buildCommand(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "itemops")
	args := append([]string{"build", "-o", bin}, racebuild.Flags()...)
	out, err := exec.Command("go", append(args, ".")...).CombinedOutput()
	require.NoError(t, err, "go build: %s", out)
	return bin
}

// result is how a process of the command ended.
type result struct {
	code           int
	stdout, stderr string
}

// runBinary runs the command and waits for it to end, within a minute.
func runBinary(t *testing.T, bin string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = racebuild.Environ()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	res := result{stdout: stdout.String(), stderr: stderr.String()}
	var exit *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exit):
		res.code = exit.ExitCode() // -1 when a signal ended it
		if res.code == 0 {
			res.code = -1
		}
	default:
		t.Fatalf("run %v: %v", args, err)
	}
	require.NoError(t, ctx.Err(), "the command did not end within a minute:\n%s", res.stdout)
	return res
}

// storeState is what a store file holds: each run, and each run's operations by ID.
type storeState struct {
	runs map[string]operations.Run
	ops  map[string]map[string]operations.Operation
}

// readStore reads a store file that no process has open.
func readStore(t *testing.T, path string) storeState {
	t.Helper()
	ctx := context.Background()
	s, err := boltstore.Open(path, nil)
	require.NoError(t, err)
	defer s.Close()
	runs, err := s.ListRuns(ctx, operations.RunFilter{})
	require.NoError(t, err)
	st := storeState{runs: map[string]operations.Run{}, ops: map[string]map[string]operations.Operation{}}
	for _, r := range runs {
		st.runs[r.Owner.Name] = r
		ops, err := s.ListOperations(ctx, r.Owner, operations.OperationFilter{})
		require.NoError(t, err)
		st.ops[r.Owner.Name] = map[string]operations.Operation{}
		for _, op := range ops {
			st.ops[r.Owner.Name][op.ID] = op
		}
	}
	return st
}

// checkFinished checks a store after a demo that ended well: every run is terminal, the
// round ended with a completed backup and a completed restore, and, with no failures
// injected, every operation of a run that was monitored to its end completed.
func checkFinished(t *testing.T, st storeState) {
	t.Helper()
	var backups, restores []operations.Run
	for _, r := range st.runs {
		require.True(t, phase.IsTerminal(r.Phase), "%s is %s, not terminal", r.Owner.Name, r.Phase)
		if r.Owner.Kind == phase.Backup {
			backups = append(backups, r)
		} else {
			restores = append(restores, r)
		}
		if r.Phase == phase.Completed {
			for id, op := range st.ops[r.Owner.Name] {
				require.Equal(t, operations.OperationCompleted, op.Status.Phase, "%s: operation %s", r.Owner.Name, id)
			}
		}
	}
	byName := func(a, b operations.Run) int { return compareNames(a.Owner.Name, b.Owner.Name) }
	slices.SortFunc(backups, byName)
	slices.SortFunc(restores, byName)
	require.NotEmpty(t, backups)
	require.NotEmpty(t, restores)
	require.Equal(t, phase.Completed, backups[len(backups)-1].Phase, "the last backup completed")
	require.Equal(t, phase.Completed, restores[len(restores)-1].Phase, "the last restore completed")
}

// compareNames orders the demo's run names by round, then attempt.
func compareNames(a, b string) int {
	ra, aa, _ := parseRunName(operations.Owner{Kind: phase.Backup, Name: a})
	if ra == 0 {
		ra, aa, _ = parseRunName(operations.Owner{Kind: phase.Restore, Name: a})
	}
	rb, ab, _ := parseRunName(operations.Owner{Kind: phase.Backup, Name: b})
	if rb == 0 {
		rb, ab, _ = parseRunName(operations.Owner{Kind: phase.Restore, Name: b})
	}
	if ra != rb {
		return ra - rb
	}
	return aa - ab
}

// TestEndToEnd builds the command and runs the demo as a user would: once to its end,
// and twice killed mid-run by -crash-after, then run again on the same store to recover
// and finish. After a crash, runs that were InProgress become Failed and are tried again,
// waiting runs are resumed to their end, and no operation recorded before the crash is
// lost. It also runs the commands the demo's closing hints print, as printed.
func TestEndToEnd(t *testing.T) {
	bin := buildCommand(t)

	t.Run("the demo's hints run as printed", func(t *testing.T) {
		t.Parallel()
		testHintsRunAsPrinted(t, bin)
	})

	t.Run("to its end", func(t *testing.T) {
		t.Parallel()
		db := filepath.Join(t.TempDir(), "itemops.db")
		res := runBinary(t, bin, "demo", "-db", db, "-items", "40", "-operations", "3", "-speed", "4")
		require.Equal(t, 0, res.code, "stderr: %s\nstdout: %s", res.stderr, res.stdout)
		require.Contains(t, res.stdout, "Summary")
		st := readStore(t, db)
		checkFinished(t, st)
		require.Len(t, st.runs, 2)
		require.Equal(t, phase.Completed, st.runs["backup-1.1"].Phase)
		require.Equal(t, phase.Completed, st.runs["restore-1.1"].Phase)
		require.Len(t, st.ops["backup-1.1"], 3)
		require.Len(t, st.ops["restore-1.1"], 3)
	})

	tests := []struct {
		name string
		args []string
		// want is the phase the backup must be in when the process is killed, when the
		// timing allows only one: a main run of 400 items at 500 a second outlasts the
		// 550ms before the crash on any machine, since items are never handled faster.
		want phase.Phase
	}{
		{name: "crash in the backup's main run", args: []string{"-items", "400", "-operations", "3", "-speed", "2", "-crash-after", "550ms"}, want: phase.InProgress},
		// A main run of 40 items at 500 a second normally ends long before the crash,
		// and the operations, taking 0.75s to 1.75s, have not: the backup is waiting.
		{name: "crash while the backup waits for its operations", args: []string{"-items", "40", "-operations", "3", "-speed", "2", "-crash-after", "500ms"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			db := filepath.Join(t.TempDir(), "itemops.db")
			res := runBinary(t, bin, append([]string{"demo", "-db", db}, tc.args...)...)
			require.NotEqual(t, 0, res.code, "the demo was to crash; stdout:\n%s", res.stdout)
			require.Contains(t, res.stderr, "crashing on purpose, "+tc.args[len(tc.args)-1]+" after the start")

			crashed := readStore(t, db)
			b, ok := crashed.runs["backup-1.1"]
			require.True(t, ok, "the backup was created before the crash")
			if tc.want != "" {
				require.Equal(t, tc.want, b.Phase)
			}
			unfinished := 0
			for _, r := range crashed.runs {
				if !phase.IsTerminal(r.Phase) {
					unfinished++
				}
			}
			require.Positive(t, unfinished, "the crash came mid-run")
			t.Logf("at the crash: backup-1.1 %s with %d operations, %d runs", b.Phase, len(crashed.ops["backup-1.1"]), len(crashed.runs))

			res = runBinary(t, bin, "demo", "-db", db, "-items", "40", "-operations", "3", "-speed", "4")
			require.Equal(t, 0, res.code, "stderr: %s\nstdout: %s", res.stderr, res.stdout)
			after := readStore(t, db)
			checkFinished(t, after)
			for name, r := range crashed.runs {
				got, ok := after.runs[name]
				require.True(t, ok, "run %s was lost", name)
				switch {
				case r.Phase == phase.InProgress:
					require.Equal(t, phase.Failed, got.Phase, "%s was InProgress at the crash", name)
					require.Contains(t, res.stdout, "recovered "+name+": it was InProgress when its process stopped, so it is now Failed")
					require.Equal(t, `found a `+map[phase.Kind]string{phase.Backup: "backup", phase.Restore: "restore"}[r.Owner.Kind]+
						` with status "InProgress" during the server starting, mark it as "Failed"`, got.FailureReason)
				case phase.IsWaiting(r.Phase) || phase.IsFinalizing(r.Phase):
					require.Equal(t, phase.Completed, got.Phase, "%s was resumed", name)
					require.Contains(t, res.stdout, "recovered "+name+": resuming it in "+string(r.Phase))
				default:
					require.Equal(t, r.Phase, got.Phase, "%s had ended before the crash", name)
				}
				require.Len(t, after.ops[name], len(crashed.ops[name]), "%s: no operation lost, none added", name)
				for id, op := range crashed.ops[name] {
					later, ok := after.ops[name][id]
					require.True(t, ok, "%s: operation %s was lost", name, id)
					if got.Phase == phase.Failed && r.Phase == phase.InProgress {
						// Recover cancelled what was unfinished, so that nothing is left
						// running for a failed run; what had ended stays as it was.
						if op.Status.Phase.Finished() {
							require.Equal(t, op.Status, later.Status, "%s: operation %s had ended", name, id)
						} else {
							require.Equal(t, operations.OperationFailed, later.Status.Phase, "%s: operation %s left %s under a failed run", name, id, later.Status.Phase)
							require.True(t, strings.HasPrefix(later.Status.Error, monitor.CanceledPrefix), "%s: operation %s: %q", name, id, later.Status.Error)
						}
					}
				}
			}
			if b.Phase == phase.InProgress {
				require.Equal(t, phase.Completed, after.runs["backup-1.2"].Phase, "the failed backup was tried again")
				require.Contains(t, res.stdout, "restore of backup-1.2 started")
			}
		})
	}
}

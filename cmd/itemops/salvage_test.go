package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/stretchr/testify/require"

	"github.com/itemops/itemops/internal/testutil/boltfault"
	"github.com/itemops/itemops/internal/testutil/racebuild"
	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/phase"
	"github.com/itemops/itemops/storage/boltstore"
)

// changedStore writes the store file b with the byte at the offset of s, within a leaf
// page in use, plus delta XORed with 0x5a, and returns its path.
func changedStore(t *testing.T, b []byte, s string, delta int) string {
	t.Helper()
	b = bytes.Clone(b)
	b[inLeaf(t, b, s)+delta] ^= 0x5a
	path := filepath.Join(t.TempDir(), "damaged.db")
	require.NoError(t, os.WriteFile(path, b, 0o600))
	return path
}

// opsIn returns the IDs of the operations of run o in the store at path.
func opsIn(t *testing.T, path string, o operations.Owner) []string {
	t.Helper()
	s, err := boltstore.Open(path, &boltstore.Options{ReadOnly: true})
	require.NoError(t, err)
	defer s.Close()
	ops, err := s.ListOperations(context.Background(), o, operations.OperationFilter{})
	require.NoError(t, err)
	var ids []string
	for _, op := range ops {
		ids = append(ids, op.ID)
	}
	return ids
}

// linesWith returns the lines of out that start with prefix.
func linesWith(out, prefix string) []string {
	var lines []string
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, prefix) {
			lines = append(lines, l)
		}
	}
	return lines
}

// TestSalvageNamesEachLostOperation changes a byte of the record of one operation of a
// run of six: salvage saves the run with the five others and names the one lost.
func TestSalvageNamesEachLostOperation(t *testing.T) {
	path := changedStore(t, demoLikeStore(t), "\x10restore-1.1-op-3", 4)
	to := filepath.Join(t.TempDir(), "saved.db")
	status, out, errOut := runCLI("salvage", path, to)
	require.Equal(t, 1, status, "%s%s", out, errOut)
	require.Contains(t, out, "saved 2 runs and 11 operations")
	require.Equal(t, []string{`lost: Restore/restore-1.1 operation "restore-1.1-op-3": its record is lost (gone, or left out as damaged): only its ID index entry remains`}, linesWith(out, "lost: "))
	require.NotEmpty(t, linesWith(out, "damaged: "))
	require.Contains(t, errOut, "1 records could not be read")
	o := operations.Owner{Kind: phase.Restore, Name: "restore-1.1"}
	require.Equal(t, []string{"restore-1.1-op-0", "restore-1.1-op-1", "restore-1.1-op-2", "restore-1.1-op-4", "restore-1.1-op-5"}, opsIn(t, to, o))
	require.Len(t, opsIn(t, to, operations.Owner{Kind: phase.Backup, Name: "backup-k.1"}), 6)
}

// TestSalvageDamagedIndexKey changes each byte, in turn, of the index keys of the
// store (phase index entries of both runs, ID index entries of an operation of each):
// salvage saves every run and every operation, loses none, and names the damaged entry
// as it read it.
func TestSalvageDamagedIndexKey(t *testing.T) {
	good := demoLikeStore(t)
	for _, key := range []string{
		"pBWaitingForPluginOperations\x00backup-k.1",
		"pRCompleted\x00restore-1.1",
		"oB\x0abackup-k.1ibackup-k.1-op-2",
		"oR\x0brestore-1.1irestore-1.1-op-3",
	} {
		at := inLeaf(t, good, key)
		for d := range len(key) {
			b := bytes.Clone(good)
			b[at+d] ^= 0x5a
			path := filepath.Join(t.TempDir(), "damaged.db")
			require.NoError(t, os.WriteFile(path, b, 0o600))
			to := filepath.Join(t.TempDir(), "saved.db")
			status, out, errOut := runCLI("salvage", path, to)
			require.Equal(t, 1, status, "%q byte %d: %s%s", key, d, out, errOut)
			require.Contains(t, out, "saved 2 runs and 12 operations", "%q byte %d", key, d)
			require.Empty(t, linesWith(out, "lost: "), "%q byte %d", key, d)
			changed := []byte(key)
			changed[d] ^= 0x5a
			require.Contains(t, strings.Join(linesWith(out, "damaged: "), "\n"), clean(fmt.Sprintf("(key %q)", changed)), "%q byte %d: the entry, as read", key, d)
			require.Len(t, opsIn(t, to, operations.Owner{Kind: phase.Restore, Name: "restore-1.1"}), 6)
		}
	}
}

// TestSalvageJSON runs salvage with and without -json on damaged stores: the JSON
// parses, and says what the lines say.
func TestSalvageJSON(t *testing.T) {
	good := demoLikeStore(t)
	for _, path := range []string{
		changedStore(t, good, "\x10restore-1.1-op-3", 4),
		changedStore(t, good, "irestore-1.1-op-3", 3),
		changedStore(t, good, "rBbackup-k.1", 5),
	} {
		dir := t.TempDir()
		status, text, errText := runCLI("salvage", path, filepath.Join(dir, "text.db"))
		jstatus, js, errJSON := runCLI("salvage", "-json", path, filepath.Join(dir, "json.db"))
		require.Equal(t, status, jstatus)
		require.Equal(t, strings.ReplaceAll(errText, "text.db", "json.db"), errJSON)
		var sum salvageSummary
		dec := json.NewDecoder(strings.NewReader(js))
		dec.DisallowUnknownFields()
		require.NoError(t, dec.Decode(&sum), "%s", js)
		require.NotNil(t, sum.Lost)
		require.NotNil(t, sum.Damage)
		lines := []string{fmt.Sprintf("%s: saved %d runs and %d operations from %s", filepath.Join(dir, "text.db"), sum.Saved.Runs, sum.Saved.Operations, sum.From)}
		for _, d := range sum.Damage {
			lines = append(lines, "damaged: "+clean(d))
		}
		require.NotNil(t, sum.Rebuilt)
		for _, r := range sum.Rebuilt {
			lines = append(lines, fmt.Sprintf("rebuilt: %s: its record was lost; saved as Failed with %d operations", clean(r.Run), r.Operations))
		}
		for _, l := range sum.Lost {
			what := l.Run
			if l.Operation != "" {
				what += fmt.Sprintf(" operation %q", l.Operation)
			}
			lines = append(lines, "lost: "+clean(what+": "+l.Why))
		}
		if diff := cmp.Diff(strings.Split(strings.TrimSuffix(text, "\n"), "\n"), lines); diff != "" {
			t.Errorf("the lines (-) and the JSON (+) differ:\n%s", diff)
		}
	}
}

// TestSalvageKilledLeavesNoNew kills salvage (kill -9) at moments spread over its run,
// on a store large enough to take a while: afterwards NEW either does not exist or is
// the whole salvaged store, never a part of it.
func TestSalvageKilledLeavesNoNew(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the command and runs it many times")
	}
	bin := buildCommand(t)
	src := filepath.Join(t.TempDir(), "big.db")
	s, err := boltstore.Open(src, &boltstore.Options{NoSync: true})
	require.NoError(t, err)
	ctx := context.Background()
	t0 := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	const runs = 400
	for i := range runs {
		o := operations.Owner{Kind: phase.Backup, Name: fmt.Sprintf("backup-%04d", i)}
		r := operations.Run{Owner: o, Phase: phase.New, Created: t0}
		require.NoError(t, r.SetPhase(phase.WaitingForPluginOperations, "main run ended", t0))
		var ops []operations.Operation
		for j := range 10 {
			ops = append(ops, operations.Operation{Owner: o, Action: "example.io/mover", ID: fmt.Sprintf("op-%02d", j),
				Status: operations.Status{Phase: operations.OperationInProgress, Created: t0}})
		}
		require.NoError(t, s.CreateRunWithOperations(ctx, r, ops))
	}
	require.NoError(t, s.Close())

	// How long a whole salvage takes, to spread the kills over it.
	start := time.Now()
	res := runBinary(t, bin, "salvage", src, filepath.Join(t.TempDir(), "whole.db"))
	took := time.Since(start)
	require.Equal(t, 0, res.code, "%s%s", res.stdout, res.stderr)

	const kills = 24
	whole := 0
	defer func() { t.Logf("a salvage took %s; %d of %d kills came after NEW was whole", took, whole, kills) }()
	for k := range kills {
		dir := t.TempDir()
		to := filepath.Join(dir, "saved.db")
		cmd := exec.Command(bin, "salvage", src, to)
		cmd.Env = racebuild.Environ()
		require.NoError(t, cmd.Start())
		time.Sleep(took * time.Duration(k) / kills)
		require.NoError(t, cmd.Process.Kill())
		_ = cmd.Wait()
		if _, err := os.Lstat(to); err != nil {
			require.True(t, os.IsNotExist(err), "%v", err)
			continue
		}
		status, out, errOut := runCLI("check", to)
		require.Equal(t, 0, status, "kill %d of %d: NEW exists and is not whole: %s", k, kills, errOut)
		require.Contains(t, out, fmt.Sprintf("sound; %d runs, %d operations", runs, runs*10), "kill %d of %d", k, kills)
		whole++
	}
}

// TestSalvageCutStore cuts a store file at each tenth of the pages it uses, from 1/10
// to 9/10: salvage saves every operation whose record's leaf page remains whole, as it
// was, with its run as it was when the run's record (or its copy in the phase index)
// remains whole too, and otherwise under a run rebuilt as Failed, which it names on a
// rebuilt: line and in -json's "rebuilt"; and the saved store is sound. Which page holds a record
// is found apart from salvage, by the record's bytes in a leaf page that bbolt reads
// (inLeaf).
func TestSalvageCutStore(t *testing.T) {
	sound, _, _ := damagedStores(t)
	b, err := os.ReadFile(sound)
	require.NoError(t, err)
	orig := map[string]operations.Operation{} // by run name and ID
	origRuns := map[string]operations.Run{}   // by name
	for _, r := range storeRecords(t, sound) {
		origRuns[r.run.Owner.Name] = r.run
		for _, op := range r.ops {
			orig[r.run.Owner.Name+"/"+op.ID] = op
		}
	}
	const pageSize = boltfault.PageSize
	pages := boltfault.LastMeta(b).Pages
	b = b[:pages*pageSize]
	// The page of each run's record (the lower of its record's and its copy's) and of
	// each operation's record.
	var texts []string
	for i := range 30 {
		name := fmt.Sprintf("restore-%02d", i)
		texts = append(texts, "rR"+name, "WaitingForPluginOperations\x00"+name)
		for j := range 20 {
			texts = append(texts, fmt.Sprintf("marker-%02d-%02d", i, j))
		}
	}
	at, err := boltfault.InUse(b, texts...)
	require.NoError(t, err)
	var runPage [30]int
	var opPage [30][20]int
	for i := range 30 {
		row := at[i*22 : (i+1)*22]
		runPage[i] = min(row[0], row[1]) / pageSize
		for j := range 20 {
			opPage[i][j] = row[2+j] / pageSize
		}
	}
	for k := 1; k <= 9; k++ {
		cut := len(b) * k / 10
		whole := cut / pageSize
		want := map[string]bool{}
		for i := range 30 {
			for j := range 20 {
				if opPage[i][j] < whole {
					want[fmt.Sprintf("restore-%02d/op-%02d", i, j)] = true
				}
			}
		}
		dir := t.TempDir()
		path, to := filepath.Join(dir, "cut.db"), filepath.Join(dir, "saved.db")
		require.NoError(t, os.WriteFile(path, b[:cut], 0o600))
		status, out, errOut := runCLI("salvage", path, to)
		require.Equal(t, 1, status, "%s%s", out, errOut)
		require.Contains(t, errOut, "cut short")
		jstatus, js, _ := runCLI("salvage", "-json", path, filepath.Join(dir, "json.db"))
		require.Equal(t, 1, jstatus)
		var sum salvageSummary
		require.NoError(t, json.Unmarshal([]byte(js), &sum), "%s", js)
		status, _, errOut = runCLI("check", to)
		require.Equal(t, 0, status, "check of the salvaged store: %s", errOut)

		got := map[string]bool{}
		var rebuilt []salvageRebuilt
		var lines []string
		for _, r := range storeRecords(t, to) {
			i, err := strconv.Atoi(strings.TrimPrefix(r.run.Owner.Name, "restore-"))
			require.NoError(t, err)
			for _, op := range r.ops {
				key := r.run.Owner.Name + "/" + op.ID
				if diff := cmp.Diff(orig[key], op); diff != "" {
					t.Fatalf("cut at %d/10: %s was saved other than it was (-original +saved):\n%s", k, key, diff)
				}
				got[key] = true
			}
			// A run whose record or copy remains whole is saved as it was; one whose record
			// is past the cut may be too, from a stale copy on a page that, without the
			// freelist, salvage cannot tell from one in use.
			if r.run.Phase != phase.Failed {
				if diff := cmp.Diff(origRuns[r.run.Owner.Name], r.run); diff != "" {
					t.Fatalf("cut at %d/10: %s was saved other than it was (-original +saved):\n%s", k, r.run.Owner, diff)
				}
				continue
			}
			require.GreaterOrEqual(t, runPage[i], whole, "cut at %d/10: %s was rebuilt, though its record remains", k, r.run.Owner)
			require.Equal(t, fmt.Sprintf("salvage: the run's record was lost; its phase, counts and history are unknown; %d of its operations were saved", len(r.ops)), r.run.FailureReason)
			rebuilt = append(rebuilt, salvageRebuilt{Run: "Restore/" + r.run.Owner.Name, Operations: len(r.ops)})
			lines = append(lines, fmt.Sprintf("rebuilt: Restore/%s: its record was lost; saved as Failed with %d operations", r.run.Owner.Name, len(r.ops)))
		}
		for op := range want {
			require.True(t, got[op], "cut at %d/10 (%d of %d pages whole): %s, whose page remains, was not saved", k, whole, pages, op)
		}
		if diff := cmp.Diff(rebuilt, sum.Rebuilt, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("cut at %d/10: the runs rebuilt (-in the store +in -json):\n%s", k, diff)
		}
		if diff := cmp.Diff(lines, linesWith(out, "rebuilt: ")); diff != "" {
			t.Errorf("cut at %d/10: the rebuilt: lines (-want +got):\n%s", k, diff)
		}
		t.Logf("cut at %d/10 (%d of %d pages whole): saved %d operations (%d on whole pages) and rebuilt %d runs", k, whole, pages, len(got), len(want), len(rebuilt))
	}
}

// storeRecords reads every run of the sound store at path, with its operations.
func storeRecords(t *testing.T, path string) []readRun {
	t.Helper()
	s, err := boltstore.Open(path, &boltstore.Options{ReadOnly: true})
	require.NoError(t, err)
	defer s.Close()
	got := readAll(context.Background(), s)
	require.Empty(t, got.lost)
	return got.runs
}

package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/itemops/itemops/internal/testutil/boltfault"
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

// demoLikeStore writes a store like the demo's after one round (a backup and a restore,
// 6 operations each, the restore moved on by the last transaction) and returns its
// bytes and page size.
func demoLikeStore(t *testing.T) []byte {
	t.Helper()
	path := filepath.Join(t.TempDir(), "demo.db")
	s, err := boltstore.Open(path, &boltstore.Options{NoSync: true})
	require.NoError(t, err)
	ctx := context.Background()
	t0 := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, o := range []operations.Owner{{Kind: phase.Backup, Name: "backup-k.1"}, {Kind: phase.Restore, Name: "restore-1.1"}} {
		r := operations.Run{Owner: o, Phase: phase.New, Created: t0}
		require.NoError(t, r.SetPhase(phase.InProgress, "started", t0))
		require.NoError(t, r.SetPhase(phase.WaitingForPluginOperations, "main run ended", t0))
		var ops []operations.Operation
		for j := 0; j < 6; j++ {
			ops = append(ops, operations.Operation{Owner: o, Action: "demo.itemops.io/mover", ID: fmt.Sprintf("%s-op-%d", o.Name, j),
				Status: operations.Status{Phase: operations.OperationInProgress, NTotal: 100, Created: t0}})
		}
		require.NoError(t, s.CreateRunWithOperations(ctx, r, ops))
	}
	_, err = s.UpdateRun(ctx, operations.Owner{Kind: phase.Restore, Name: "restore-1.1"}, func(r *operations.Run) error {
		return r.SetPhase(phase.Completed, "operations ended", t0.Add(time.Minute))
	})
	require.NoError(t, err)
	require.NoError(t, s.Close())
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return b
}

// TestCheckAndSalvageSeeChangedBytes changes one byte (XOR 0x5a) of a demo-like store
// at places whose damage bbolt itself reads without an error: a leaf entry's position
// field (two operations vanish), a run key (the backup is renamed, its operations
// orphaned), the freelist (the next write fails) and the magic of the meta page of the
// last transaction (the file silently rolls back). check must fail, saying the file is
// damaged, and salvage must exit 1.
func TestCheckAndSalvageSeeChangedBytes(t *testing.T) {
	good := demoLikeStore(t)
	const pageSize = boltfault.PageSize
	ne := binary.NativeEndian
	meta := boltfault.LastMeta(good)
	last, freelist := meta.Page, meta.Freelist
	require.Greater(t, int(ne.Uint16(good[freelist*pageSize+10:])), 0, "the freelist holds no page numbers")
	runKey := inLeaf(t, good, "rBbackup-k.1")
	leaf := inLeaf(t, good, "restore-1.1-op-3") / pageSize * pageSize

	for _, c := range []struct {
		name string
		at   int
	}{
		{"a leaf entry's position field", leaf + 16 + 16*3 + 4},
		{"a run key", runKey + len("rBbackup-")},
		{"a page number in the freelist", freelist*pageSize + 16},
		{"the magic of the last meta page", last*pageSize + 16},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := bytes.Clone(good)
			b[c.at] ^= 0x5a
			path := filepath.Join(t.TempDir(), "damaged.db")
			require.NoError(t, os.WriteFile(path, b, 0o600))
			status, out, errOut := runCLI("check", path)
			require.Equal(t, 1, status, "check: %s%s", out, errOut)
			require.Contains(t, errOut, "damaged")
			status, out, errOut = runCLI("salvage", path, filepath.Join(t.TempDir(), "saved.db"))
			require.Equal(t, 1, status, "salvage: %s%s", out, errOut)
			t.Logf("check: %ssalvage: %s%s", errOut, out, errOut)
		})
	}
}

// inLeaf returns the offset of s in the store file b, within a leaf page in use (free
// pages hold stale copies).
func inLeaf(t *testing.T, b []byte, s string) int {
	t.Helper()
	at, err := boltfault.InUse(b, s)
	require.NoError(t, err)
	return at[0]
}

// TestDamageMessages runs the commands whose messages about damaged stores misled: each
// fails with status 1 and one line that says the file is damaged, and never blames gzip
// data, a nil pointer or a foreign file.
func TestDamageMessages(t *testing.T) {
	good := demoLikeStore(t)
	const pageSize = boltfault.PageSize
	meta := boltfault.LastMeta(good)
	root := meta.Root
	write := func(t *testing.T, b []byte) string {
		path := filepath.Join(t.TempDir(), "damaged.db")
		require.NoError(t, os.WriteFile(path, b, 0o600))
		return path
	}
	zeroed := bytes.Clone(good)
	clear(zeroed[:pageSize])
	rootPos := bytes.Clone(good)
	rootPos[root*pageSize+16+4] ^= 0x5a
	for _, c := range []struct {
		name string
		b    []byte
		args func(path string) []string
		want string
	}{
		{"inspect, the first 4 KiB zeroed", zeroed, func(p string) []string { return []string{"inspect", p} }, "meta page 0"},
		{"check, the first 4 KiB zeroed", zeroed, func(p string) []string { return []string{"check", p} }, "meta page 0"},
		{"demo, cut at 8209 bytes", good[:8209], func(p string) []string { return []string{"demo", "-db", p, "-items", "10", "-operations", "2"} }, "cut short"},
		{"cancel, cut at 8209 bytes", good[:8209], func(p string) []string { return []string{"cancel", p, "restore-1.1"} }, "cut short"},
		{"salvage, the root page damaged", rootPos, func(p string) []string { return []string{"salvage", p, p + ".saved"} }, fmt.Sprintf("page %d", root)},
	} {
		t.Run(c.name, func(t *testing.T) {
			status, out, errOut := runCLI(c.args(write(t, c.b))...)
			require.Equal(t, 1, status, "%s%s", out, errOut)
			require.Equal(t, 1, strings.Count(errOut, "\n"), "one error line, got %q", errOut)
			require.Contains(t, errOut, "damaged")
			require.Contains(t, errOut, c.want)
			for _, wrong := range []string{"gzip", "nil pointer", "not an itemops"} {
				require.NotContains(t, errOut, wrong)
			}
		})
	}
}

// TestSalvageReadsPastPageCycle points the first child of a branch page back at the
// page itself: bbolt's reads would follow that cycle until the stack overflows. salvage
// reads the file page by page, each page once, so it reports the page reached twice and
// saves every run and operation: the pages the cycle cut off from the root are in use
// and not free, and it reads them too.
func TestSalvageReadsPastPageCycle(t *testing.T) {
	sound, _, _ := damagedStores(t)
	cycle := filepath.Join(t.TempDir(), "cycle.db")
	b, err := os.ReadFile(sound)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(cycle, b, 0o600))
	branch, err := boltfault.LoopBranch(cycle)
	require.NoError(t, err)

	to := filepath.Join(t.TempDir(), "saved.db")
	status, out, errOut := runCLI("salvage", cycle, to)
	require.Equal(t, 1, status, "salvage of a file whose pages form a cycle: %s%s", out, errOut)
	require.Contains(t, errOut, fmt.Sprintf("page %d is reached twice", branch))
	require.Contains(t, out, "saved 30 runs and 600 operations")
	require.NotContains(t, out, "lost:")
	status, out, errOut = runCLI("check", to)
	require.Equal(t, 0, status, "check of the salvaged store: %s", errOut)
	require.Contains(t, out, "sound; 30 runs, 600 operations")
}

package boltstore_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/itemops/itemops/internal/testutil/boltfault"
	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/phase"
	"github.com/itemops/itemops/storage/boltstore"
)

// records is what a store holds: each run, and each of its operations by ID.
type records struct {
	runs map[operations.Owner]operations.Run
	ops  map[operations.Owner]map[string]operations.Operation
}

// recordsOf reads every record of the sound store file b through Open.
func recordsOf(t testing.TB, b []byte) records { return readRecords(t, b, true) }

// readRecords reads every record of the store file b through Open, with its check when
// check is set.
func readRecords(t testing.TB, b []byte, check bool) records {
	t.Helper()
	path := filepath.Join(t.TempDir(), "sound.db")
	require.NoError(t, os.WriteFile(path, b, 0o600))
	s, err := boltstore.Open(path, &boltstore.Options{ReadOnly: true, SkipCheck: !check})
	require.NoError(t, err)
	defer s.Close()
	ctx := context.Background()
	runs, err := s.ListRuns(ctx, operations.RunFilter{})
	require.NoError(t, err)
	rec := records{runs: map[operations.Owner]operations.Run{}, ops: map[operations.Owner]map[string]operations.Operation{}}
	for _, r := range runs {
		o := operations.Owner{Kind: r.Owner.Kind, Name: r.Owner.Name}
		rec.runs[o] = r
		ops, err := s.ListOperations(ctx, r.Owner, operations.OperationFilter{})
		require.NoError(t, err)
		rec.ops[o] = map[string]operations.Operation{}
		for _, op := range ops {
			rec.ops[o][op.ID] = op
		}
	}
	return rec
}

// salvageBytes runs Salvage on a file of the bytes b.
func salvageBytes(t testing.TB, b []byte) (*boltstore.Salvaged, error) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "damaged.db")
	require.NoError(t, os.WriteFile(path, b, 0o600))
	return boltstore.Salvage(context.Background(), path)
}

// savedOf returns what got saved, as records, failing when a run or operation differs
// from its original in orig or was never there: salvage may lose records, never change
// them. A rebuilt run (see SalvagedRun) must be Failed with the reason that says so.
func savedOf(t testing.TB, got *boltstore.Salvaged, orig records) records {
	t.Helper()
	saved := records{runs: map[operations.Owner]operations.Run{}, ops: map[operations.Owner]map[string]operations.Operation{}}
	for _, r := range got.Runs {
		o := operations.Owner{Kind: r.Run.Owner.Kind, Name: r.Run.Owner.Name}
		if r.Rebuilt {
			reason := fmt.Sprintf("salvage: the run's record was lost; its phase, counts and history are unknown; %d of its operations were saved", len(r.Operations))
			_, known := orig.runs[o]
			if !known || r.Run.Phase != phase.Failed || r.Run.FailureReason != reason || len(r.Operations) == 0 {
				t.Fatalf("run %s was rebuilt as %s (%q) with %d operations; want a run of the store, Failed (%q)", o, r.Run.Phase, r.Run.FailureReason, len(r.Operations), reason)
			}
			if err := r.Run.Validate(); err != nil {
				t.Fatalf("run %s was rebuilt invalid: %v", o, err)
			}
		} else if diff := cmp.Diff(orig.runs[o], r.Run); diff != "" {
			t.Fatalf("run %s was saved other than it was (-original +saved):\n%s", o, diff)
		}
		saved.runs[o] = r.Run
		saved.ops[o] = map[string]operations.Operation{}
		for _, op := range r.Operations {
			if diff := cmp.Diff(orig.ops[o][op.ID], op); diff != "" {
				t.Fatalf("operation %q of %s was saved other than it was (-original +saved):\n%s", op.ID, o, diff)
			}
			saved.ops[o][op.ID] = op
		}
	}
	return saved
}

// lostIDs returns the IDs of the operations got names as lost, by run.
func lostIDs(got *boltstore.Salvaged) map[operations.Owner][]string {
	lost := map[operations.Owner][]string{}
	for _, l := range got.Lost {
		if l.ID != "" {
			lost[l.Owner] = append(lost[l.Owner], l.ID)
		}
	}
	return lost
}

// TestSalvageSoundFile salvages a sound store: every record, nothing lost, no damage.
func TestSalvageSoundFile(t *testing.T) {
	b := storeOf(t, 12, 40, true)
	orig := recordsOf(t, b)
	got, err := salvageBytes(t, b)
	require.NoError(t, err)
	require.Empty(t, got.Damage)
	require.Empty(t, got.Lost)
	saved := savedOf(t, got, orig)
	require.Len(t, saved.runs, len(orig.runs))
	for o, ops := range orig.ops {
		require.Len(t, saved.ops[o], len(ops), "operations of %s", o)
	}
	// Listed as the Store lists them.
	for i := 1; i < len(got.Runs); i++ {
		require.Less(t, got.Runs[i-1].Run.Owner.Name, got.Runs[i].Run.Owner.Name)
	}
}

// inUse returns the offset, in the store file b, of s within a leaf page that bbolt
// reads for the last transaction (free pages hold stale copies).
func inUse(t testing.TB, b []byte, s string) int {
	t.Helper()
	at, err := boltfault.InUse(b, s)
	require.NoError(t, err)
	return at[0]
}

// TestSalvageOneBadOperationRecord changes each byte, in turn, of the record of one
// operation of a run of six: the five others are saved, and the one is named lost, by
// its run and ID.
func TestSalvageOneBadOperationRecord(t *testing.T) {
	b := storeOf(t, 3, 6, false)
	orig := recordsOf(t, b)
	o := operations.Owner{Kind: "Backup", Name: "backup-01"}
	// The record of op-003 holds its ID after its UID, action and resource.
	rec := inUse(t, b, "\x05uid-1\x10example.io/mover\x00\x04pods\x02ns\x08pod-01-3\x06op-003")
	for at := rec; at < rec+40; at++ {
		d := bytes.Clone(b)
		d[at] ^= 0x5a
		got, err := salvageBytes(t, d)
		require.NoError(t, err, "byte %d", at-rec)
		saved := savedOf(t, got, orig)
		require.Len(t, saved.ops[o], 5, "byte %d: the five other operations of %s are saved", at-rec, o)
		require.NotContains(t, saved.ops[o], "op-003")
		require.Equal(t, map[operations.Owner][]string{o: {"op-003"}}, lostIDs(got), "byte %d: the one lost is named", at-rec)
		require.NotEmpty(t, got.Damage)
		for other := range orig.runs {
			if other != o {
				require.Len(t, saved.ops[other], 6, "byte %d: %s", at-rec, other)
			}
		}
	}
}

// TestSalvageDamagedIndexKey changes each byte of an ID index key and of a phase index
// key: every operation and run is saved, nothing is named lost, and the damage is
// reported.
func TestSalvageDamagedIndexKey(t *testing.T) {
	b := storeOf(t, 3, 6, false)
	orig := recordsOf(t, b)
	for _, key := range []string{
		"\x09backup-01iop-003",                    // the ID index entry of op-003
		"WaitingForPluginOperations\x00backup-01", // the phase index entry of backup-01
	} {
		at := inUse(t, b, key)
		for i := range len(key) {
			d := bytes.Clone(b)
			d[at+i] ^= 0x5a
			got, err := salvageBytes(t, d)
			require.NoError(t, err)
			saved := savedOf(t, got, orig)
			require.Len(t, saved.runs, 3, "%q byte %d", key, i)
			for o := range orig.runs {
				require.Len(t, saved.ops[o], 6, "%q byte %d: %s", key, i, o)
			}
			require.Empty(t, got.Lost, "%q byte %d", key, i)
			require.NotEmpty(t, got.Damage, "%q byte %d", key, i)
		}
	}
}

// TestSalvageEveryChangedByte changes each byte that bbolt reads for the last
// transaction of a store, in turn: Salvage fails, or saves records each as it was, and
// every operation it does not save it names lost or, when it cannot name it, it reports
// damage. A file with no damage reported and nothing lost is saved whole.
func TestSalvageEveryChangedByte(t *testing.T) {
	b := liveStoreFile(t)
	orig := recordsOf(t, b)
	// A damaged meta page of the last transaction rolls it back, for bbolt and Salvage
	// alike: the records are then those of the transaction before, as bbolt reads them.
	last := boltfault.LastMeta(b).Page
	rolledBack := bytes.Clone(b)
	rolledBack[last*4096+16] ^= 0x5a
	before := readRecords(t, rolledBack, false)
	live := liveBytes(t, b)
	step := 1
	if testing.Short() {
		step = 37 // in -short mode; CI's long run takes every byte
	}
	for i := 0; i < len(live); i += step {
		lb := live[i]
		d := bytes.Clone(b)
		d[lb.off] ^= 0x5a
		got, err := salvageBytes(t, d)
		if err != nil {
			require.True(t, errors.Is(err, boltstore.ErrCorrupt) || errors.Is(err, boltstore.ErrNotStore), "byte %d (%s): %v", lb.off, lb.what, err)
			continue
		}
		want := orig
		if lb.off/4096 == last {
			want = before
		}
		saved := savedOf(t, got, want)
		lost := lostIDs(got)
		for o, ops := range want.ops {
			for id := range ops {
				if _, ok := saved.ops[o][id]; !ok && !contains(lost[o], id) && len(got.Damage) == 0 {
					t.Fatalf("byte %d (%s): operation %q of %s is neither saved nor named lost, and no damage is reported", lb.off, lb.what, id, o)
				}
			}
		}
	}
}

// btoi is 1 for true and 0 for false.
func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// TestSalvageEveryCut cuts a store file at each tenth of it from 1/10 to 9/10, and at
// every page boundary and mid-page between (every 13th in -short mode), and salvages
// it: every operation whose record's leaf page remains whole is saved, with its run
// when the run's record, or its copy in the phase index, remains, and under a rebuilt
// run (Failed, with the reason) when neither does; and nothing saved differs from the
// original. Which page holds a record is found apart from Salvage: bbolt tells the leaf
// pages in use, and the record's bytes are found in one.
func TestSalvageEveryCut(t *testing.T) {
	const runs, perRun = 30, 20
	b := storeOf(t, runs, perRun, true)
	orig := recordsOf(t, b)
	const pageSize = 4096
	pages := boltfault.LastMeta(b).Pages
	b = b[:pages*pageSize] // what bbolt uses; the rest is room to grow
	// pageOf[o][id] is the page of each operation's record; runPage[o] the lowest page
	// holding the run's record or its copy.
	type place struct {
		o  operations.Owner
		id string // "" for the run's record or its copy
	}
	var places []place
	var texts []string
	for o, ops := range orig.ops {
		places = append(places, place{o, ""}, place{o, ""})
		texts = append(texts, "rB"+o.Name, string(orig.runs[o].Phase)+"\x00"+o.Name)
		for id, op := range ops {
			// The record of an operation holds its ID after its resource's name, which
			// storeOf makes unique.
			places = append(places, place{o, id})
			texts = append(texts, fmt.Sprintf("%c%s%c%s", len(op.Resource.Name), op.Resource.Name, len(id), id))
		}
	}
	at, err := boltfault.InUse(b, texts...)
	require.NoError(t, err)
	pageOf := map[operations.Owner]map[string]int{}
	runPage := map[operations.Owner]int{}
	for i, p := range places {
		if pageOf[p.o] == nil {
			pageOf[p.o], runPage[p.o] = map[string]int{}, pages
		}
		if p.id == "" {
			runPage[p.o] = min(runPage[p.o], at[i]/pageSize)
		} else {
			pageOf[p.o][p.id] = at[i] / pageSize
		}
	}
	var cuts []int
	for k := 1; k <= 9; k++ {
		cuts = append(cuts, len(b)*k/10)
	}
	step := 1
	if testing.Short() {
		step = 13 // every 13th page boundary; CI's long run takes them all
	}
	for p := pages / 10; p <= pages*9/10; p += step {
		cuts = append(cuts, p*pageSize, p*pageSize+pageSize/2)
	}
	// storeOf rewrote each run's op-000 Completed after writing it InProgress. Without
	// the freelist, which a cut usually takes, salvage cannot tell the page that held
	// the first copy from a page in use, and says so in a finding of Damage; it may then
	// save that older copy when the newer one is past the cut. Only those records may
	// differ, and only with that finding.
	older := recordsOf(t, b)
	for o := range older.ops {
		op := older.ops[o]["op-000"]
		op.Status.Phase = operations.OperationInProgress
		older.ops[o]["op-000"] = op
	}
	for _, cut := range cuts {
		got, err := salvageBytes(t, b[:cut])
		require.NoError(t, err, "cut at %d", cut)
		expect := orig
		if slices.ContainsFunc(got.Damage, func(d string) bool { return strings.HasPrefix(d, "without the freelist") }) {
			expect = newestOrOlder(orig, older, got)
		}
		saved := savedOf(t, got, expect)
		whole := cut / pageSize // the pages that remain whole
		want := 0
		for o, ops := range orig.ops {
			for id := range ops {
				if pageOf[o][id] < whole {
					want++
					if _, ok := saved.ops[o][id]; !ok {
						t.Fatalf("cut at %d (%d whole pages): operation %q of %s, on page %d, was not saved", cut, whole, id, o, pageOf[o][id])
					}
				}
			}
		}
		n, rebuilt := 0, 0
		for _, r := range got.Runs {
			o := operations.Owner{Kind: r.Run.Owner.Kind, Name: r.Run.Owner.Name}
			n += len(r.Operations)
			// A run whose record is past the cut may still be read from a stale copy on a
			// page that, without the freelist, cannot be told from one in use.
			require.False(t, r.Rebuilt && runPage[o] < whole, "cut at %d: %s was rebuilt, though its record remains", cut, o)
			rebuilt += btoi(r.Rebuilt)
		}
		require.GreaterOrEqual(t, n, want)
		require.NotEmpty(t, got.Damage, "cut at %d", cut)
		t.Logf("cut at %d bytes (%d of %d pages whole): saved %d runs (%d rebuilt) and %d of %d operations (%d on whole pages), %d named lost", cut, whole, pages, len(saved.runs), rebuilt, n, runs*perRun, want, len(got.Lost))
	}
}

// newestOrOlder returns orig with each operation that got saved as it is in older
// (and not as in orig) taken from older: the records that salvage may read from a
// stale copy.
func newestOrOlder(orig, older records, got *boltstore.Salvaged) records {
	want := records{runs: orig.runs, ops: map[operations.Owner]map[string]operations.Operation{}}
	for o, ops := range orig.ops {
		want.ops[o] = maps.Clone(ops)
	}
	for _, r := range got.Runs {
		o := operations.Owner{Kind: r.Run.Owner.Kind, Name: r.Run.Owner.Name}
		for _, op := range r.Operations {
			if old, ok := older.ops[o][op.ID]; ok && cmp.Equal(old, op) && !cmp.Equal(orig.ops[o][op.ID], op) {
				want.ops[o][op.ID] = old
			}
		}
	}
	return want
}

// FuzzSalvage damages a real store file at fuzzed offsets, cuts it at a fuzzed size,
// and salvages it: never a panic; an error is ErrCorrupt, ErrNotStore or
// ErrSchemaVersion; and what is saved is what the file held (a run rebuilt from its
// operations is Failed, with the reason that says so), unless the damage is in a meta
// page, which rolls the last transaction back.
func FuzzSalvage(f *testing.F) {
	good := liveStoreFile(f)
	orig := recordsOf(f, good)
	f.Add(uint32(len(good)/2), uint32(0), []byte{})
	f.Add(uint32(len(good)), uint32(len(good)/2), bytes.Repeat([]byte{0xa5}, 64))
	f.Add(uint32(len(good)), uint32(3*4096), make([]byte, 4096))
	f.Add(uint32(len(good)), uint32(2*4096+16), []byte{0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, size, at uint32, patch []byte) {
		b := bytes.Clone(good)
		if int(size) < len(b) {
			b = b[:size]
		}
		if int(at) < len(b) {
			copy(b[at:], patch)
		}
		got, err := salvageBytes(t, b)
		if err != nil {
			if !errors.Is(err, boltstore.ErrCorrupt) && !errors.Is(err, boltstore.ErrNotStore) && !errors.Is(err, boltstore.ErrSchemaVersion) {
				t.Fatalf("Salvage = %v, want ErrCorrupt, ErrNotStore or ErrSchemaVersion", err)
			}
			return
		}
		// A damaged meta page rolls the last transaction back; and without the freelist
		// (cut off, or damaged), a page the last transactions freed cannot be told from a
		// page in use, so a record may come back as it was before them (see Salvage).
		if int(at) < 2*4096 && len(patch) > 0 || unproven(got) {
			return
		}
		savedOf(t, got, orig)
	})
}

// unproven reports whether got says it read pages it could not prove in use.
func unproven(got *boltstore.Salvaged) bool {
	for _, d := range got.Damage {
		if strings.HasPrefix(d, "without the freelist") {
			return true
		}
	}
	return false
}

// TestSalvageCancelled salvages with a done context: Salvage fails with its error.
func TestSalvageCancelled(t *testing.T) {
	path := filepath.Join(t.TempDir(), "store.db")
	require.NoError(t, os.WriteFile(path, storeOf(t, 3, 6, false), 0o600))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := boltstore.Salvage(ctx, path)
	require.ErrorIs(t, err, context.Canceled)
}

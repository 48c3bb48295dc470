package boltstore_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"

	"github.com/itemops/itemops/internal/testutil/boltfault"
	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/phase"
	"github.com/itemops/itemops/storage/boltstore"
)

// storeFile writes a store of a few hundred records, closes it, and returns its bytes.
func storeFile(t testing.TB) []byte { return storeOf(t, 12, 40, false) }

// storeOf writes a store of runs waiting backups of perRun operations each, closes it,
// and returns its bytes. Each operation's resource has a name of its own, so that the
// bytes of its record are found in the file once. When complete is set, each run's first operation is then
// written again Completed, so that the file's freelist holds pages.
func storeOf(t testing.TB, runs, perRun int, complete bool) []byte {
	t.Helper()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "store.db")
	s, err := boltstore.Open(path, &boltstore.Options{NoSync: true})
	require.NoError(t, err)
	t0 := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	for i := 0; i < runs; i++ {
		o := operations.Owner{Kind: phase.Backup, Name: fmt.Sprintf("backup-%02d", i), UID: fmt.Sprint("uid-", i)}
		r := operations.Run{Owner: o, Phase: phase.New, Created: t0}
		require.NoError(t, r.SetPhase(phase.WaitingForPluginOperations, "main run ended", t0))
		var ops []operations.Operation
		for j := 0; j < perRun; j++ {
			ops = append(ops, operations.Operation{Owner: o, Action: "example.io/mover", ID: fmt.Sprintf("op-%03d", j),
				Resource: operations.ResourceIdentifier{Resource: "pods", Namespace: "ns", Name: fmt.Sprintf("pod-%02d-%d", i, j)},
				Status:   operations.Status{Phase: operations.OperationInProgress, NTotal: 100, Description: "moving data along", Created: t0}})
		}
		require.NoError(t, s.CreateRunWithOperations(ctx, r, ops))
		if complete {
			ops[0].Status.Phase = operations.OperationCompleted
			require.NoError(t, s.PutOperations(ctx, o, ops[:1]))
		}
	}
	require.NoError(t, s.Close())
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return b
}

// damages are the ways a disk can hurt a store file, each a function of the file's
// bytes and a random source.
var damages = []struct {
	name string
	do   func(b []byte, rnd *rand.Rand) []byte
}{
	{"truncated to half", func(b []byte, _ *rand.Rand) []byte { return b[:len(b)/2] }},
	{"64 bytes overwritten mid-file", func(b []byte, rnd *rand.Rand) []byte {
		for i := len(b)/2 - 32; i < len(b)/2+32; i++ {
			b[i] = byte(rnd.Uint32())
		}
		return b
	}},
	{"a page zeroed", func(b []byte, rnd *rand.Rand) []byte {
		p := 2 + rnd.IntN(len(b)/4096-2)
		clear(b[p*4096 : (p+1)*4096])
		return b
	}},
	{"bytes flipped at random", func(b []byte, rnd *rand.Rand) []byte {
		for range 16 {
			b[rnd.IntN(len(b))] ^= byte(1 + rnd.IntN(255))
		}
		return b
	}},
}

// useDamaged opens a damaged file with opts and uses it as a program would: list, read,
// write.
// It must never panic; once a call has reported damage, no call writes to the file.
func useDamaged(t *testing.T, path string, opts *boltstore.Options) {
	t.Helper()
	ctx := context.Background()
	s, err := boltstore.Open(path, noSync(opts))
	if err != nil {
		require.Truef(t, errors.Is(err, boltstore.ErrCorrupt) || errors.Is(err, boltstore.ErrNotStore),
			"Open of a damaged file: %v, want ErrCorrupt or ErrNotStore", err)
		t.Logf("Open: %v", err)
		return
	}
	defer s.Close()
	seen := false // damage reported
	var before []byte
	note := func(err error) {
		if err != nil && errors.Is(err, operations.ErrCorrupt) && !seen {
			seen = true
			before, err = os.ReadFile(path)
			require.NoError(t, err)
		}
	}
	runs, err := s.ListRuns(ctx, operations.RunFilter{})
	note(err)
	waiting, err := s.ListRuns(ctx, operations.RunFilter{Phases: []phase.Phase{phase.WaitingForPluginOperations}})
	note(err)
	for i := 0; i < 12; i++ {
		o := operations.Owner{Kind: phase.Backup, Name: fmt.Sprintf("backup-%02d", i)}
		_, err := s.GetRun(ctx, o)
		note(err)
		ops, err := s.ListOperations(ctx, o, operations.OperationFilter{Phases: []operations.OperationPhase{operations.OperationInProgress}})
		note(err)
		if len(ops) > 0 {
			ops[0].Status.NCompleted++
			err := s.PutOperations(ctx, o, ops[:1])
			if seen {
				require.ErrorIs(t, err, operations.ErrCorrupt, "a write after damage was reported")
			}
			note(err)
		}
		_, err = s.UpdateRun(ctx, o, func(r *operations.Run) error { r.Warnings++; return nil })
		if seen {
			require.ErrorIs(t, err, operations.ErrCorrupt, "a write after damage was reported")
		}
		note(err)
	}
	t.Logf("opened; %d runs listed, %d waiting; damage reported: %v", len(runs), len(waiting), seen)
	if seen {
		after, err := os.ReadFile(path)
		require.NoError(t, err)
		require.True(t, bytes.Equal(before, after), "the file changed after damage was reported")
	}
}

// TestDamagedFilesNeverPanic applies each damage, with eight seeds, to both base files,
// and reads and uses the result as FuzzDamagedFile does.
func TestDamagedFilesNeverPanic(t *testing.T) {
	t.Parallel()
	for _, base := range baseFiles(t) {
		for _, d := range damages {
			for seed := uint64(0); seed < 8; seed++ {
				t.Run(fmt.Sprintf("%s/%s/%d", base.name, d.name, seed), func(t *testing.T) {
					useDamagedBytes(t, d.do(bytes.Clone(base.b), rand.New(rand.NewPCG(seed, 1))))
				})
			}
		}
	}
}

// baseFiles returns the sound files that the damage tests damage: a store of this
// build's schema, and the file of schema 1 in testdata, which Open migrates.
func baseFiles(t testing.TB) []struct {
	name string
	b    []byte
} {
	schema1, err := os.ReadFile(filepath.Join("testdata", "schema1.db"))
	require.NoError(t, err)
	return []struct {
		name string
		b    []byte
	}{{"schema 2", storeFile(t)}, {"schema 1", schema1}}
}

// noSync returns opts with NoSync set, for the tests that use thousands of damaged
// copies of a file: what they test is what reads and writes find, not what reaches the
// disk, and a sync per write made them take many times longer on a slow disk.
func noSync(opts *boltstore.Options) *boltstore.Options {
	o := boltstore.Options{}
	if opts != nil {
		o = *opts
	}
	o.NoSync = true
	return &o
}

// useDamagedBytes writes b, a damaged store file, twice: it reads one copy through a
// read-only Store opened with its check, as itemops inspect does (readDamaged), and uses the
// other (useDamaged). Two copies, because a Store that met damage at Open keeps the
// file's lock for the rest of the process. When the check found damage, the second
// Open checks too: without the check, a file whose pages form a cycle would make bbolt
// loop forever (see Store.Check).
func useDamagedBytes(t *testing.T, b []byte) {
	dir := t.TempDir()
	ro, rw := filepath.Join(dir, "read-only.db"), filepath.Join(dir, "damaged.db")
	require.NoError(t, os.WriteFile(ro, b, 0o600))
	require.NoError(t, os.WriteFile(rw, b, 0o600))
	checked := readDamaged(t, ro)
	useDamaged(t, rw, &boltstore.Options{SkipCheck: !checked})
}

// readDamaged opens the damaged file at path read-only, with its check, and reads all it
// can: Open fails with a typed error or reads succeed or fail without a panic, a write
// fails, and the file is not changed. It reports whether Open found damage.
func readDamaged(t *testing.T, path string) (damaged bool) {
	t.Helper()
	ctx := context.Background()
	before, err := os.ReadFile(path)
	require.NoError(t, err)
	s, err := boltstore.Open(path, &boltstore.Options{ReadOnly: true})
	if err != nil {
		require.Truef(t, errors.Is(err, boltstore.ErrCorrupt) || errors.Is(err, boltstore.ErrNotStore) || errors.Is(err, boltstore.ErrSchemaVersion),
			"read-only Open of a damaged file: %v, want ErrCorrupt, ErrNotStore or ErrSchemaVersion", err)
		damaged = errors.Is(err, boltstore.ErrCorrupt)
	} else {
		runs, _ := s.ListRuns(ctx, operations.RunFilter{})
		for _, r := range runs {
			_, _ = s.ListOperations(ctx, r.Owner, operations.OperationFilter{})
		}
		if len(runs) > 0 {
			_, err := s.UpdateRun(ctx, runs[0].Owner, func(r *operations.Run) error { r.Warnings++; return nil })
			require.Truef(t, errors.Is(err, boltstore.ErrReadOnly) || errors.Is(err, boltstore.ErrCorrupt),
				"a write to a read-only Store: %v, want ErrReadOnly, or ErrCorrupt where reading the run met damage", err)
		}
		require.NoError(t, s.Close())
	}
	after, err := os.ReadFile(path)
	require.NoError(t, err)
	require.True(t, bytes.Equal(before, after), "a read-only Store changed the file")
	return damaged
}

// FuzzDamagedFile damages a real store file, of this build's schema or of schema 1, at
// fuzzed offsets, then reads a copy read-only and uses another: never a panic, never a
// write after damage was seen, and no change at all through the read-only Store.
func FuzzDamagedFile(f *testing.F) {
	bases := baseFiles(f)
	for _, schema1 := range []bool{false, true} {
		good := bases[0].b
		if schema1 {
			good = bases[1].b
		}
		f.Add(schema1, uint32(len(good)/2), uint32(0), []byte{}) // truncated to half
		f.Add(schema1, uint32(len(good)), uint32(len(good)/2), bytes.Repeat([]byte{0xa5}, 64))
		f.Add(schema1, uint32(len(good)), uint32(3*4096), make([]byte, 4096)) // a page zeroed
		f.Add(schema1, uint32(len(good)), uint32(4096+16), []byte{0xff, 0xff, 0xff, 0xff})
	}
	f.Fuzz(func(t *testing.T, schema1 bool, size, at uint32, patch []byte) {
		b := bytes.Clone(bases[0].b)
		if schema1 {
			b = bytes.Clone(bases[1].b)
		}
		if int(size) < len(b) {
			b = b[:size]
		}
		if int(at) < len(b) {
			copy(b[at:], patch)
		}
		useDamagedBytes(t, b)
	})
}

// TestCheckRefusesPageCycle points the first child of a branch page back at the page
// itself. bbolt's cursors would descend into that cycle forever; Open, which checks the file, fails
// with ErrCorrupt before any cursor reads the file.
func TestCheckRefusesPageCycle(t *testing.T) {
	b := storeFile(t)
	path := filepath.Join(t.TempDir(), "cycle.db")
	require.NoError(t, os.WriteFile(path, b, 0o600))
	branch, err := boltfault.LoopBranch(path)
	require.NoError(t, err)
	b, err = os.ReadFile(path)
	require.NoError(t, err)
	_, err = boltstore.Open(path, &boltstore.Options{})
	require.ErrorIs(t, err, boltstore.ErrCorrupt)
	require.ErrorIs(t, err, boltstore.ErrPageReachedTwice)
	require.ErrorContains(t, err, fmt.Sprintf("page %d is reached twice", branch))
	after, err := os.ReadFile(path)
	require.NoError(t, err)
	require.True(t, bytes.Equal(b, after), "Open changed a damaged file")
}

// liveStoreFile writes a small store whose kv bucket spans a branch page and several
// leaf pages, with a freelist that holds pages, closes it and returns its bytes.
func liveStoreFile(t testing.TB) []byte { return storeOf(t, 2, 16, true) }

// A liveByte is the offset of a byte that bbolt reads for the file's last transaction,
// and what holds it.
type liveByte struct {
	off  int
	what string
}

// liveBytes lists the bytes of the store file b that bbolt reads for its last
// transaction: the page header and meta fields of both meta pages; the header and page
// numbers of the freelist; the header, elements, keys and values of every branch and
// leaf page in use. It reads the pages' kinds through bbolt and parses their elements
// here, apart from the code of the check that the test holds to account.
func liveBytes(t testing.TB, b []byte) []liveByte {
	t.Helper()
	path := filepath.Join(t.TempDir(), "live.db")
	require.NoError(t, os.WriteFile(path, b, 0o600))
	db, err := bolt.Open(path, 0o600, nil) // writable: read-only, tx.Page fails (free pages not loaded)
	require.NoError(t, err)
	defer db.Close()
	pageSize := db.Info().PageSize
	var live []liveByte
	add := func(from, to int, what string) {
		for off := from; off < to; off++ {
			live = append(live, liveByte{off, what})
		}
	}
	ne := binary.NativeEndian
	require.NoError(t, db.View(func(tx *bolt.Tx) error {
		for id := 0; ; {
			info, err := tx.Page(id)
			if err != nil || info == nil {
				return err
			}
			start := id * pageSize
			what := fmt.Sprintf("%s page %d", info.Type, id)
			switch info.Type {
			case "meta":
				add(start, start+16+64, what)
			case "freelist":
				n := info.Count
				if n == 0xFFFF {
					n = 1 + int(ne.Uint64(b[start+16:]))
				}
				add(start, start+16+8*n, what)
			case "branch", "leaf":
				end := start + 16 + 16*info.Count
				if info.Count > 0 {
					last := start + 16 + 16*(info.Count-1)
					if info.Type == "branch" {
						end = last + int(ne.Uint32(b[last:])) + int(ne.Uint32(b[last+4:]))
					} else {
						end = last + int(ne.Uint32(b[last+4:])) + int(ne.Uint32(b[last+8:])) + int(ne.Uint32(b[last+12:]))
					}
				}
				add(start, end, what)
			}
			if info.Type == "free" {
				id++
			} else {
				id += 1 + info.OverflowCount
			}
		}
	}))
	return live
}

// changeDetected writes b with the byte at off XORed with x to a file of its own, and
// reports whether a read-only Open, which checks the file as itemops check does, fails. A file of
// its own each time: a Store that met damage at Open keeps the file's lock.
func changeDetected(t testing.TB, dir string, b []byte, off int, x byte) (bool, error) {
	t.Helper()
	b[off] ^= x
	defer func() { b[off] ^= x }()
	path := filepath.Join(dir, fmt.Sprintf("changed-%d-%02x.db", off, x))
	require.NoError(t, os.WriteFile(path, b, 0o600))
	defer os.Remove(path)
	s, err := boltstore.Open(path, &boltstore.Options{ReadOnly: true})
	if err != nil {
		require.Truef(t, errors.Is(err, boltstore.ErrCorrupt) || errors.Is(err, boltstore.ErrNotStore) || errors.Is(err, boltstore.ErrSchemaVersion),
			"a changed byte at %d: %v, want ErrCorrupt, ErrNotStore or ErrSchemaVersion", off, err)
		return true, err
	}
	require.NoError(t, s.Close())
	return false, nil
}

// TestCheckFindsEveryChangedLiveByte changes every byte of a store that bbolt reads
// for its last transaction, one at a time, with two XOR masks (0x5a, which changes
// four bits, and 0x01, a single bit), and asserts that a read-only Open with
// Check, as itemops check does, reports every one. In -short mode it tries every
// 17th byte.
func TestCheckFindsEveryChangedLiveByte(t *testing.T) {
	t.Parallel()
	b := liveStoreFile(t)
	live := liveBytes(t, b)
	stride := 1
	if testing.Short() {
		stride = 17
	}
	dir := t.TempDir()
	tried, missed := 0, 0
	kinds := map[string]int{}
	for i := 0; i < len(live); i += stride {
		for _, x := range []byte{0x5a, 0x01} {
			tried++
			found, _ := changeDetected(t, dir, b, live[i].off, x)
			if !found {
				missed++
				t.Errorf("byte %d of %s XOR %#02x: check reports the file sound", live[i].off, live[i].what, x)
			}
		}
		kinds[strings.Fields(live[i].what)[0]]++
	}
	t.Logf("changed %d live bytes (of %d in a file of %d bytes; by page kind %v) one at a time, with 2 masks: %d changes tried, %d reported", (len(live)+stride-1)/stride, len(live), len(b), kinds, tried, tried-missed)
}

// TestCheckFindsCutElementCount sets the element count of every branch and leaf page
// of a store to each smaller value, down to none, and asserts that check reports each.
// A count cut to none leaves no element whose position could be wrong; the dropped
// elements are still in the page, after its end.
func TestCheckFindsCutElementCount(t *testing.T) {
	b := liveStoreFile(t)
	dir := t.TempDir()
	pages := 0
	for _, lb := range liveBytes(t, b) {
		kind := strings.Fields(lb.what)[0]
		if (kind != "branch" && kind != "leaf") || lb.off%4096 != 0 {
			continue // not the first byte of a branch or leaf page
		}
		pages++
		at := lb.off + 10 // the page header's count
		count := binary.NativeEndian.Uint16(b[at:])
		for cut := uint16(0); cut < count; cut++ {
			binary.NativeEndian.PutUint16(b[at:], cut)
			// changeDetected XORs a byte; a mask of 0 writes the cut count as it is.
			found, err := changeDetected(t, dir, b, at, 0)
			if !found {
				t.Errorf("%s with %d of its %d elements: check reports the file sound", lb.what, cut, count)
			} else {
				require.ErrorIs(t, err, boltstore.ErrCorrupt)
			}
		}
		binary.NativeEndian.PutUint16(b[at:], count)
	}
	require.Greater(t, pages, 3, "branch and leaf pages tried")
}

// FuzzChangedLiveByte XORs one byte of the live data of a store (see liveBytes) with a
// fuzzed mask; check must report it. It also XORs one byte of the Monitor's store
// with the same mask, and uses the file as a controller and its Monitor do: each call
// must return what it returns on the sound file, or damage must be reported and nothing
// more written (see useDamagedAsMonitor). It does so twice: a live byte (see liveBytes)
// with the default options, which check the file at Open, and a byte of the kv
// bucket's leaf pages (see kvLeafBytes) with Options.SkipCheck, which leaves it to the
// checks of every read.
func FuzzChangedLiveByte(f *testing.F) {
	b := liveStoreFile(f)
	live := liveBytes(f, b)
	mb, sound := soundMonitorSteps(f, monitorRuns)
	monitorLive, kvBytes := liveBytes(f, mb), kvLeafBytes(f, mb)
	f.Add(uint32(0), byte(0x5a))
	f.Add(uint32(len(live)/2), byte(0x80))
	f.Add(uint32(len(live)-1), byte(0x01))
	f.Fuzz(func(t *testing.T, i uint32, x byte) {
		if x == 0 {
			t.Skip("a mask of 0 changes nothing")
		}
		lb := live[int(i%uint32(len(live)))]
		if found, _ := changeDetected(t, t.TempDir(), b, lb.off, x); !found {
			t.Errorf("byte %d of %s XOR %#02x: check reports the file sound", lb.off, lb.what, x)
		}
		for _, c := range []struct {
			bytes []liveByte
			opts  *boltstore.Options
		}{{monitorLive, nil}, {kvBytes, &boltstore.Options{SkipCheck: true}}} {
			lb := c.bytes[int(i%uint32(len(c.bytes)))]
			changed := bytes.Clone(mb)
			changed[lb.off] ^= x
			useDamagedAsMonitor(t, t.TempDir(), fmt.Sprintf("byte %d of %s XOR %#02x", lb.off, lb.what, x), changed, c.opts, monitorRuns, sound)
		}
	})
}

package boltstore_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/itemops/itemops/clock/clocktest"
	"github.com/itemops/itemops/internal/testutil/boltfault"
	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/operations/monitor"
	"github.com/itemops/itemops/phase"
	"github.com/itemops/itemops/storage/boltstore"
)

// doneTracker reports every operation it is asked about completed.
type doneTracker struct{}

func (doneTracker) Progress(context.Context, operations.Operation) (operations.Progress, error) {
	return operations.Progress{Completed: true, NCompleted: 10, NTotal: 10, OperationUnits: "Bytes"}, nil
}

func (doneTracker) Cancel(context.Context, operations.Operation) error { return nil }

var (
	damageT0   = time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	doneTracks = operations.ResolverFunc(func(string) (operations.Tracker, error) { return doneTracker{}, nil })
)

// A fixtureRun is a run of the store writeMonitorStore writes: its owner, its phase,
// and the phases of its operations, whose IDs are op-1, op-2 and so on.
type fixtureRun struct {
	o      operations.Owner
	phase  phase.Phase
	phases []operations.OperationPhase
}

// monitorRuns are the runs of the store the Monitor damage tests damage: waiting runs of
// both kinds with unfinished and finished operations (so the run, phase index, metadata,
// unfinished, finished and ID index keys all occur), and a run that has ended.
var monitorRuns = []fixtureRun{
	{operations.Owner{Kind: phase.Backup, Name: "b-1", UID: "u1"}, phase.WaitingForPluginOperations,
		[]operations.OperationPhase{operations.OperationInProgress, operations.OperationInProgress, operations.OperationInProgress}},
	{operations.Owner{Kind: phase.Backup, Name: "b-2", UID: "u2"}, phase.WaitingForPluginOperations,
		[]operations.OperationPhase{operations.OperationCompleted, operations.OperationNew, operations.OperationInProgress}},
	{operations.Owner{Kind: phase.Restore, Name: "r-1", UID: "u3"}, phase.WaitingForPluginOperations,
		[]operations.OperationPhase{operations.OperationInProgress, operations.OperationFailed}},
	{operations.Owner{Kind: phase.Backup, Name: "b-0", UID: "u0"}, phase.Completed,
		[]operations.OperationPhase{operations.OperationCompleted}},
}

// writeMonitorStore writes runs to a new store at path, opened with the default
// options, and closes it.
func writeMonitorStore(t testing.TB, path string, runs []fixtureRun) {
	t.Helper()
	ctx := context.Background()
	s, err := boltstore.Open(path, nil)
	require.NoError(t, err)
	for _, fr := range runs {
		r := operations.Run{Owner: fr.o, Phase: phase.New, Created: damageT0}
		require.NoError(t, r.SetPhase(phase.InProgress, "started", damageT0))
		require.NoError(t, r.SetPhase(phase.WaitingForPluginOperations, "main run ended", damageT0))
		if fr.phase == phase.Completed {
			require.NoError(t, r.SetPhase(phase.Finalizing, "operations ended", damageT0))
			require.NoError(t, r.SetPhase(phase.Completed, "finalized", damageT0))
		}
		var ops []operations.Operation
		for i, p := range fr.phases {
			op := operations.Operation{Owner: fr.o, Action: "example.io/mover", ID: fmt.Sprint("op-", i+1),
				Resource: operations.ResourceIdentifier{Resource: "pods", Namespace: "ns", Name: fmt.Sprint("pod-", i+1)},
				Status:   operations.Status{Phase: p, NTotal: 10, Created: damageT0}}
			if p == operations.OperationFailed {
				op.Status.Error = "plugin said no"
			}
			ops = append(ops, op)
		}
		require.NoError(t, s.CreateRunWithOperations(ctx, r, ops))
	}
	require.NoError(t, s.Close())
}

// A step is what one call of useAsMonitor returned.
type step struct {
	call  string
	write bool
	value any
	err   error
}

// useAsMonitor does with s what a controller and its Monitor do: it lists and reads
// every run and operation, makes one Monitor pass that completes every operation, reads
// everything again, and then writes each run once more. It returns what each call
// returned. When failed is not nil, it is called once, just after the first call that
// fails, before the next call.
func useAsMonitor(t testing.TB, s *boltstore.Store, runs []fixtureRun, failed func()) []step {
	t.Helper()
	ctx := context.Background()
	var steps []step
	add := func(call string, write bool, value any, err error) {
		if err != nil && failed != nil {
			failed()
			failed = nil
		}
		steps = append(steps, step{call, write, value, err})
	}
	reads := func(when string) {
		all, err := s.ListRuns(ctx, operations.RunFilter{})
		add(when+": ListRuns", false, all, err)
		waiting, err := s.ListRuns(ctx, operations.RunFilter{Phases: []phase.Phase{phase.WaitingForPluginOperations}})
		add(when+": ListRuns waiting", false, waiting, err)
		for _, fr := range runs {
			r, err := s.GetRun(ctx, fr.o)
			add(fmt.Sprintf("%s: GetRun %s", when, fr.o), false, r, err)
			ops, err := s.ListOperations(ctx, fr.o, operations.OperationFilter{})
			add(fmt.Sprintf("%s: ListOperations %s", when, fr.o), false, ops, err)
			ops, err = s.ListOperations(ctx, fr.o, operations.OperationFilter{Phases: []operations.OperationPhase{operations.OperationNew, operations.OperationInProgress}})
			add(fmt.Sprintf("%s: ListOperations %s unfinished", when, fr.o), false, ops, err)
			for i := range fr.phases {
				id := fmt.Sprint("op-", i+1)
				op, err := s.GetOperation(ctx, fr.o, id)
				add(fmt.Sprintf("%s: GetOperation %s %s", when, fr.o, id), false, op, err)
			}
		}
	}
	reads("before")
	m := monitor.New(s, doneTracks, monitor.WithClock(clocktest.NewClock(damageT0.Add(time.Minute))))
	stats, err := m.RunOnce(ctx)
	stats.Err = nil // compared through err
	add("RunOnce", true, stats, err)
	reads("after")
	for _, fr := range runs {
		r, err := s.UpdateRun(ctx, fr.o, func(r *operations.Run) error { r.Warnings++; return nil })
		add(fmt.Sprintf("UpdateRun %s", fr.o), true, r, err)
	}
	return steps
}

// useDamagedAsMonitor writes b, a damaged store file, opens it with opts and uses it as
// useAsMonitor does, then closes it. It asserts that each call returns what the same
// call returned on the sound store (sound), until a call fails with an error wrapping
// ErrCorrupt; that every write after it fails with ErrCorrupt too; and
// that the file after Close is as it was just after that call (or, when Open fails, as
// it was written). It reports whether damage was met.
func useDamagedAsMonitor(t testing.TB, dir, what string, b []byte, opts *boltstore.Options, runs []fixtureRun, sound []step) (damaged bool) {
	t.Helper()
	path := filepath.Join(dir, "damaged.db")
	require.NoError(t, os.WriteFile(path, b, 0o600))
	defer os.Remove(path)
	s, err := boltstore.Open(path, noSync(opts))
	if err != nil {
		// A changed byte of the meta bucket's format or version makes the file another
		// file, or a store of another schema (see the package documentation, "Damage").
		require.Truef(t, errors.Is(err, boltstore.ErrCorrupt) || errors.Is(err, boltstore.ErrNotStore) || errors.Is(err, boltstore.ErrSchemaVersion),
			"%s: Open: %v, want ErrCorrupt, ErrNotStore or ErrSchemaVersion", what, err)
		after, rerr := os.ReadFile(path)
		require.NoError(t, rerr)
		require.Truef(t, bytes.Equal(b, after), "%s: a failed Open changed the file", what)
		return true
	}
	var atDamage []byte
	got := useAsMonitor(t, s, runs, func() {
		atDamage, err = os.ReadFile(path)
		require.NoError(t, err)
	})
	require.NoError(t, s.Close())
	require.Len(t, got, len(sound))
	first := -1
	for i, g := range got {
		switch {
		case first >= 0:
			if g.write {
				require.ErrorIsf(t, g.err, operations.ErrCorrupt, "%s: %s, after %s met damage", what, g.call, got[first].call)
			}
		case g.err != nil:
			require.ErrorIsf(t, g.err, operations.ErrCorrupt, "%s: %s", what, g.call)
			first = i
		default:
			require.NoErrorf(t, sound[i].err, "%s: %s on the sound store", what, g.call)
			if diff := cmp.Diff(sound[i].value, g.value); diff != "" {
				t.Fatalf("%s: %s returned other than on the sound store, and no error (-sound +damaged):\n%s", what, g.call, diff)
			}
		}
	}
	if first < 0 {
		return false
	}
	final, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Truef(t, bytes.Equal(atDamage, final), "%s: the file changed after %s met damage", what, got[first].call)
	return true
}

// soundMonitorSteps writes the store of runs, uses a copy of it as useAsMonitor does,
// and returns the file's bytes as written and the steps.
func soundMonitorSteps(t testing.TB, runs []fixtureRun) ([]byte, []step) {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "store.db")
	writeMonitorStore(t, path, runs)
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	s, err := boltstore.Open(path, nil)
	require.NoError(t, err)
	steps := useAsMonitor(t, s, runs, nil)
	require.NoError(t, s.Close())
	for _, st := range steps {
		require.NoErrorf(t, st.err, "%s on the sound store", st.call)
	}
	return b, steps
}

// kvLeafBytes returns the offsets in the store file b of the bytes of the kv bucket's
// leaf pages after their headers: their elements, keys and values (see liveBytes). The
// kv bucket's leaf pages are every leaf page in use but the root bucket's, which holds
// the meta bucket inline.
func kvLeafBytes(t testing.TB, b []byte) []liveByte {
	t.Helper()
	root := fmt.Sprintf("leaf page %d", boltfault.LastMeta(b).Root)
	var out []liveByte
	for _, lb := range liveBytes(t, b) {
		if strings.HasPrefix(lb.what, "leaf page ") && lb.what != root && lb.off%boltfault.PageSize >= 16 {
			out = append(out, lb)
		}
	}
	return out
}

// changedStore writes the store of runs to a new file, sets the byte at offset off from
// the first occurrence of find in the file to to, and returns the file's path and
// bytes.
func changedStore(t *testing.T, runs []fixtureRun, find string, off int, to byte) (string, []byte) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "store.db")
	writeMonitorStore(t, path, runs)
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	at := bytes.Index(b, []byte(find))
	require.Positivef(t, at, "%q in the file", find)
	b[at+off] = to
	require.NoError(t, os.WriteFile(path, b, 0o600))
	return path, b
}

// TestMonitorStopsAtChangedIDKey changes one byte of the ID index key of a waiting
// backup's second operation, so that the key falls out of order among the run's keys,
// opens the file without the check at Open (Options.SkipCheck, which would refuse it),
// and makes one Monitor pass with a plugin that reports every operation completed.
// bbolt's search then misses keys beside the changed one; the pass must fail with ErrCorrupt, not mark the run Completed over
// operations it could not read, and leave the file as it was.
func TestMonitorStopsAtChangedIDKey(t *testing.T) {
	runs := monitorRuns[:1]
	// The key is "o", the kind, the name's length and the name, "i" and the ID: the
	// kind, B, becomes a byte below "o".
	path, b := changedStore(t, runs, "oB\x03b-1iop-2", 1, 0x18)
	ctx := context.Background()
	_, err := boltstore.Open(path, nil)
	require.ErrorIs(t, err, operations.ErrCorrupt, "Open with the default options, which check the file")
	s, err := boltstore.Open(path, &boltstore.Options{SkipCheck: true})
	require.NoError(t, err)
	defer s.Close()
	m := monitor.New(s, doneTracks, monitor.WithClock(clocktest.NewClock(damageT0)))
	_, err = m.RunOnce(ctx)
	require.ErrorIs(t, err, operations.ErrCorrupt, "a pass over a store whose ID index key is out of order")
	if r, err := s.GetRun(ctx, runs[0].o); err == nil {
		require.Equal(t, phase.WaitingForPluginOperations, r.Phase, "the run's phase after the pass")
	}
	_, err = s.UpdateRun(ctx, runs[0].o, func(r *operations.Run) error { r.Warnings++; return nil })
	require.ErrorIs(t, err, operations.ErrCorrupt, "a write after the pass met damage")
	require.NoError(t, s.Close())
	after, err := os.ReadFile(path)
	require.NoError(t, err)
	require.True(t, bytes.Equal(b, after), "the file changed")
}

// TestMonitorOnEveryChangedKVByte changes every byte of the kv bucket's leaf pages
// after their headers (their elements, keys and values), one at a time, with three XOR
// masks (0x5a, 0x01 and 0x60), opens the file without the check at Open
// (Options.SkipCheck), so that what is tried is the checks of every read, and uses it
// as a controller and its Monitor do (see changeEachByte): each call returns what it
// returns on the sound store, or damage is reported and nothing more is written. With
// the mask 0x60, a changed byte of a leaf element's offset can send a search away from
// the entry it looks for, which the read must then report rather than miss.
func TestMonitorOnEveryChangedKVByte(t *testing.T) {
	t.Parallel()
	b, sound := soundMonitorSteps(t, monitorRuns)
	changes := kvLeafBytes(t, b)
	require.Greater(t, len(changes), 2000, "bytes of the kv bucket's leaf pages")
	tried, damaged := changeEachByte(t, b, changes, []byte{0x5a, 0x01, 0x60}, &boltstore.Options{SkipCheck: true}, sound)
	t.Logf("%d changes of the %d bytes of the kv bucket's leaf pages after their headers: %d reported as damage, %d read as on the sound store", tried, len(changes), damaged, tried-damaged)
}

// TestMonitorRunStopsOnDamage changes a byte of an operation's record, opens the file
// without the check at Open, and the first pass of Monitor.Run finds it damaged: Run
// must report that pass to the observer and return an error wrapping ErrCorrupt,
// rather than try again each interval until its context ends.
func TestMonitorRunStopsOnDamage(t *testing.T) {
	runs := monitorRuns[:1]
	path, _ := changedStore(t, runs, "pod-2", 4, '7')                   // op-2's resource name
	s, err := boltstore.Open(path, &boltstore.Options{SkipCheck: true}) // the check would refuse it
	require.NoError(t, err)
	defer s.Close()
	var passes []monitor.PassStats
	m := monitor.New(s, doneTracks, monitor.WithClock(clocktest.NewClock(damageT0)),
		monitor.WithObserver(monitor.Observer{Pass: func(ps monitor.PassStats) { passes = append(passes, ps) }}))
	// The timeout only ends a Run that does not stop by itself, which fails the test.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err = m.Run(ctx)
	require.ErrorIs(t, err, operations.ErrCorrupt)
	require.NotErrorIs(t, err, context.DeadlineExceeded)
	require.Len(t, passes, 1, "passes reported to the observer")
	require.ErrorIs(t, passes[0].Err, operations.ErrCorrupt, "the error of the pass reported to the observer")
}

// TestDefaultOpenOnEveryChangedLiveByte changes every byte that bbolt reads for the last
// transaction of a Monitor's store (both meta pages, the freelist, every branch and leaf
// page in use: see liveBytes), one at a time, with two XOR masks (0x5a and 0x01), opens
// the file with the default options and uses it as a controller and its Monitor do
// (see changeEachByte): each call returns what it returns on the sound store, or damage
// is reported and nothing more is written. A change that leaves the file readable but
// different (a page header's count, a branch key, a meta page) must be found by the
// check that Open makes by default.
func TestDefaultOpenOnEveryChangedLiveByte(t *testing.T) {
	t.Parallel()
	b, sound := soundMonitorSteps(t, monitorRuns)
	changes := liveBytes(t, b)
	tried, damaged := changeEachByte(t, b, changes, []byte{0x5a, 0x01}, nil, sound)
	t.Logf("%d changes of the %d live bytes: %d reported as damage, %d read as on the sound store", tried, len(changes), damaged, tried-damaged)
}

// changeEachByte changes each byte of b that changes names, one at a time, with each
// XOR mask of masks, and uses the file, opened with opts, as useDamagedAsMonitor
// does, against the steps of the sound store. In -short mode it changes every 61st
// byte. It returns how many changes it tried and how many of them met damage.
func changeEachByte(t *testing.T, b []byte, changes []liveByte, masks []byte, opts *boltstore.Options, sound []step) (tried, damaged int) {
	t.Helper()
	stride := 1
	if testing.Short() {
		stride = 61
	}
	dir := t.TempDir()
	for i := 0; i < len(changes); i += stride {
		for _, x := range masks {
			lb := changes[i]
			b[lb.off] ^= x
			tried++
			if useDamagedAsMonitor(t, dir, fmt.Sprintf("byte %d of %s XOR %#02x", lb.off, lb.what, x), b, opts, monitorRuns, sound) {
				damaged++
			}
			b[lb.off] ^= x
		}
	}
	return tried, damaged
}

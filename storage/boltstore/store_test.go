package boltstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/phase"
	"github.com/itemops/itemops/storage/kv"
	"github.com/itemops/itemops/storage/kv/kvtest"
	"github.com/itemops/itemops/storage/storetest"
)

var t0 = time.Date(2022, 12, 14, 12, 0, 0, 0, time.UTC)

// checkInvariants checks the file's pages and bbolt's invariants.
func checkInvariants(s *Store) error { return s.Check(context.Background()) }

// openTest opens a store in a new file of t's temporary directory. At cleanup it checks the
// file's invariants, then closes it.
func openTest(t *testing.T) (*Store, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "store.db")
	s, err := Open(path, nil)
	require.NoError(t, err, "Open")
	t.Cleanup(func() {
		if err := checkInvariants(s); err != nil && !errors.Is(err, ErrClosed) {
			t.Errorf("invariants at cleanup: %v", err)
		}
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s, path
}

func backup(name string) operations.Owner {
	return operations.Owner{Kind: phase.Backup, Name: name, UID: "uid-" + name}
}

func restore(name string) operations.Owner {
	return operations.Owner{Kind: phase.Restore, Name: name, UID: "uid-" + name}
}

func newRun(o operations.Owner, p phase.Phase) operations.Run {
	return operations.Run{Owner: o, Phase: p, Created: t0, OperationTimeout: 4 * time.Hour}
}

func newOp(o operations.Owner, id string, p operations.OperationPhase) operations.Operation {
	return operations.Operation{
		Owner:    o,
		Action:   "velero.io/csi-pvc-backupper",
		Resource: operations.ResourceIdentifier{Resource: "persistentvolumeclaims", Namespace: "app", Name: "data-" + id},
		ID:       id,
		Status:   operations.Status{Phase: p, NTotal: 100, OperationUnits: "Bytes", Created: t0},
	}
}

func TestOpenCreatesFileWithMode0600(t *testing.T) {
	_, path := openTest(t)
	info, err := os.Stat(path)
	require.NoError(t, err)
	if got := info.Mode().Perm(); got != 0o600 {
		t.Errorf("file mode = %v, want -rw-------", info.Mode())
	}
	// The store is built beside path and linked into place; nothing else is left.
	entries, err := os.ReadDir(filepath.Dir(path))
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if diff := cmp.Diff([]string{filepath.Base(path)}, names); diff != "" {
		t.Errorf("directory after Open (-want +got):\n%s", diff)
	}
}

func TestOpenFileHook(t *testing.T) {
	injected := errors.New("injected open failure")
	tests := []struct {
		name     string
		mode     os.FileMode
		fail     bool
		wantPerm os.FileMode
	}{
		{name: "zero mode defaults to 0600", wantPerm: 0o600},
		{name: "explicit mode is passed", mode: 0o640, wantPerm: 0o640},
		{name: "hook failure is returned", fail: true, wantPerm: 0o600},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var gotPerm os.FileMode
			var gotFlag int
			opts := &Options{Mode: tc.mode, OpenFile: func(name string, flag int, perm os.FileMode) (*os.File, error) {
				gotPerm, gotFlag = perm, flag
				if tc.fail {
					return nil, injected
				}
				return os.OpenFile(name, flag, perm)
			}}
			s, err := Open(filepath.Join(t.TempDir(), "db"), opts)
			if tc.fail {
				require.ErrorIs(t, err, injected)
			} else {
				require.NoError(t, err)
				require.NoError(t, s.Close())
			}
			if gotPerm != tc.wantPerm {
				t.Errorf("OpenFile perm = %v, want %v", gotPerm, tc.wantPerm)
			}
			if gotFlag&os.O_RDWR == 0 || gotFlag&os.O_CREATE == 0 {
				t.Errorf("OpenFile flag = %#x, want O_RDWR|O_CREATE", gotFlag)
			}
		})
	}
}

func TestReopenKeepsEverything(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "store.db")
	s, err := Open(path, nil)
	require.NoError(t, err)

	b1, r1 := backup("b1"), restore("r1")
	require.NoError(t, s.CreateRun(ctx, newRun(b1, phase.New)))
	require.NoError(t, s.CreateRun(ctx, newRun(r1, phase.New)))
	wantRun, err := s.UpdateRun(ctx, b1, func(r *operations.Run) error {
		r.Errors = 2
		return r.SetPhase(phase.WaitingForPluginOperations, "started", t0.Add(time.Minute))
	})
	require.NoError(t, err)
	ops := []operations.Operation{newOp(b1, "op-1", operations.OperationInProgress), newOp(b1, "op-2", operations.OperationCompleted)}
	ops[0].PostOperationItems = []operations.ResourceIdentifier{{Group: "snapshot.storage.k8s.io", Resource: "volumesnapshots", Namespace: "app", Name: "snap"}}
	require.NoError(t, s.PutOperations(ctx, b1, ops))
	require.NoError(t, s.Close())

	s, err = Open(path, nil)
	require.NoError(t, err, "reopen")
	t.Cleanup(func() { s.Close() })
	require.NoError(t, checkInvariants(s))

	gotRun, err := s.GetRun(ctx, b1)
	require.NoError(t, err)
	if diff := cmp.Diff(wantRun, gotRun); diff != "" {
		t.Errorf("GetRun after reopen (-want +got):\n%s", diff)
	}
	gotOps, err := s.ListOperations(ctx, b1, operations.OperationFilter{})
	require.NoError(t, err)
	if diff := cmp.Diff(ops, gotOps); diff != "" {
		t.Errorf("ListOperations after reopen (-want +got):\n%s", diff)
	}
	runs, err := s.ListRuns(ctx, operations.RunFilter{Phases: []phase.Phase{phase.New}})
	require.NoError(t, err)
	if diff := cmp.Diff([]operations.Run{newRun(r1, phase.New)}, runs); diff != "" {
		t.Errorf("ListRuns(New) after reopen (-want +got):\n%s", diff)
	}
	// Sequence numbers continue: a new ID put after reopening comes after the old ones.
	require.NoError(t, s.PutOperations(ctx, b1, []operations.Operation{newOp(b1, "op-0", operations.OperationNew)}))
	gotOps, err = s.ListOperations(ctx, b1, operations.OperationFilter{})
	require.NoError(t, err)
	var ids []string
	for _, op := range gotOps {
		ids = append(ids, op.ID)
	}
	if diff := cmp.Diff([]string{"op-1", "op-2", "op-0"}, ids); diff != "" {
		t.Errorf("IDs after reopen and put (-want +got):\n%s", diff)
	}
}

func TestSecondOpenFailsWithErrLocked(t *testing.T) {
	tests := []struct {
		name    string
		timeout time.Duration
	}{
		{name: "short timeout", timeout: 50 * time.Millisecond},
		{name: "negative timeout means one attempt", timeout: -1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "store.db")
			first, err := Open(path, nil)
			require.NoError(t, err)
			second, err := Open(path, &Options{Timeout: tc.timeout})
			require.ErrorIs(t, err, ErrLocked)
			require.Nil(t, second)
			require.NoError(t, first.Close())
			// Once the first store is closed, the file can be opened again.
			third, err := Open(path, &Options{Timeout: tc.timeout})
			require.NoError(t, err, "Open after Close")
			require.NoError(t, third.Close())
		})
	}
}

func TestCloseIsIdempotentAndLaterCallsFail(t *testing.T) {
	opened, _ := openTest(t)
	require.NoError(t, opened.CreateRun(context.Background(), newRun(backup("b"), phase.New)))
	require.NoError(t, opened.Close())
	require.NoError(t, opened.Close(), "second Close")
	storetest.RunClosed(t, opened, ErrClosed)
	// The zero Store's methods are the engine's too, which fails them with ErrClosed.
	var zero Store
	t.Run("zero", func(t *testing.T) { storetest.RunClosed(t, &zero, ErrClosed) })
}

// fileBytes returns the content of path.
func fileBytes(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return b
}

// setMeta opens the bbolt file at path and sets meta/key to value.
func setMeta(t *testing.T, path string, key, value []byte) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, nil)
	require.NoError(t, err)
	require.NoError(t, db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucketMeta).Put(key, value) }))
	require.NoError(t, db.Close())
}

func TestOpenRefusesForeignFilesWithoutChangingThem(t *testing.T) {
	version := func(v uint64) []byte {
		b := make([]byte, 8)
		for i := range b {
			b[7-i] = byte(v >> (8 * i))
		}
		return b
	}
	tests := []struct {
		name string
		make func(t *testing.T, path string)
		want error
	}{
		{
			name: "text file",
			make: func(t *testing.T, path string) {
				require.NoError(t, os.WriteFile(path, bytes.Repeat([]byte("not a database\n"), 1000), 0o600))
			},
			want: ErrNotStore,
		},
		{
			name: "bbolt file of another program",
			make: func(t *testing.T, path string) {
				db, err := bolt.Open(path, 0o600, nil)
				require.NoError(t, err)
				require.NoError(t, db.Update(func(tx *bolt.Tx) error {
					b, err := tx.CreateBucket([]byte("widgets"))
					if err != nil {
						return err
					}
					return b.Put([]byte("k"), []byte("v"))
				}))
				require.NoError(t, db.Close())
			},
			want: ErrNotStore,
		},
		{
			name: "store of another format",
			make: func(t *testing.T, path string) {
				s, err := Open(path, nil)
				require.NoError(t, err)
				require.NoError(t, s.Close())
				setMeta(t, path, keyFormat, []byte("something.else"))
			},
			want: ErrNotStore,
		},
		{
			name: "newer schema version",
			make: func(t *testing.T, path string) {
				s, err := Open(path, nil)
				require.NoError(t, err)
				require.NoError(t, s.Close())
				setMeta(t, path, keyVersion, version(schemaVersion+1))
			},
			want: ErrSchemaVersion,
		},
		{
			name: "version zero",
			make: func(t *testing.T, path string) {
				s, err := Open(path, nil)
				require.NoError(t, err)
				require.NoError(t, s.Close())
				setMeta(t, path, keyVersion, version(0))
			},
			// The check at Open finds a schema-3 layout under another version: damage.
			want: ErrCorrupt,
		},
		{
			name: "malformed version",
			make: func(t *testing.T, path string) {
				s, err := Open(path, nil)
				require.NoError(t, err)
				require.NoError(t, s.Close())
				setMeta(t, path, keyVersion, []byte("1"))
			},
			want: ErrCorrupt,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "file")
			tc.make(t, path)
			before := fileBytes(t, path)
			s, err := Open(path, nil)
			require.ErrorIs(t, err, tc.want)
			require.Nil(t, s)
			if !bytes.Equal(before, fileBytes(t, path)) {
				t.Errorf("Open changed the file it refused")
			}
		})
	}
}

func TestOpenTurnsEmptyFilesIntoStores(t *testing.T) {
	tests := []struct {
		name string
		make func(t *testing.T, path string)
	}{
		{name: "zero-length file", make: func(t *testing.T, path string) {
			require.NoError(t, os.WriteFile(path, nil, 0o600))
		}},
		{name: "bbolt file without buckets", make: func(t *testing.T, path string) {
			db, err := bolt.Open(path, 0o600, nil)
			require.NoError(t, err)
			require.NoError(t, db.Close())
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "file")
			tc.make(t, path)
			s, err := Open(path, nil)
			require.NoError(t, err)
			defer s.Close()
			ctx := context.Background()
			require.NoError(t, s.CreateRun(ctx, newRun(backup("b"), phase.New)))
			_, err = s.GetRun(ctx, backup("b"))
			require.NoError(t, err)
			require.NoError(t, checkInvariants(s))
		})
	}
}

// corrupt opens the bbolt file at path and lets f damage it.
func corrupt(t *testing.T, path string, f func(tx *bolt.Tx) error) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, nil)
	require.NoError(t, err)
	require.NoError(t, db.Update(f))
	require.NoError(t, db.Close())
}

// A record that does not decode fails Open's check; opened without it, the record gives
// ErrCorrupt where it is read, never a panic, and from then on the store writes
// nothing: its reads go on.
func TestCorruptRecordFailsClosed(t *testing.T) {
	ctx := context.Background()
	s, path := openTest(t)
	require.NoError(t, s.CreateRun(ctx, newRun(backup("bad"), phase.InProgress)))
	require.NoError(t, s.CreateRun(ctx, newRun(backup("good"), phase.InProgress)))
	require.NoError(t, s.Close())
	corrupt(t, path, func(tx *bolt.Tx) error {
		// The version, then a run record of an unknown format.
		return tx.Bucket(bucketKV).Put([]byte("rBbad"), append(make([]byte, 8), 0x7f, 1, 2, 3))
	})
	_, err := Open(path, nil)
	require.ErrorIs(t, err, ErrCorrupt, "Open checks the file by default")
	s, err = Open(path, &Options{SkipCheck: true}) // what the reads find, then
	require.NoError(t, err)
	defer s.Close()
	_, err = s.GetRun(ctx, backup("bad"))
	require.ErrorIs(t, err, ErrCorrupt)
	require.ErrorIs(t, err, operations.ErrCorrupt)
	_, err = s.GetRun(ctx, backup("good"))
	require.NoError(t, err, "reads go on after damage")
	err = s.CreateRun(ctx, newRun(backup("new"), phase.New))
	require.ErrorIs(t, err, ErrCorrupt, "a write after damage was seen")
}

func TestFailedBatchWritesNothing(t *testing.T) {
	ctx := context.Background()
	o := backup("b")
	tests := []struct {
		name  string
		batch func() []operations.Operation
		ctx   func() context.Context
		want  error
	}{
		{
			name: "last item revives a finished operation",
			batch: func() []operations.Operation {
				return []operations.Operation{newOp(o, "new-1", operations.OperationNew), newOp(o, "run", operations.OperationCompleted), newOp(o, "done", operations.OperationInProgress)}
			},
			want: operations.ErrConflict,
		},
		{
			name: "last item has an ID too long for a key",
			batch: func() []operations.Operation {
				return []operations.Operation{newOp(o, "new-1", operations.OperationNew), newOp(o, string(bytes.Repeat([]byte("x"), operations.MaxNameBytes+1)), operations.OperationNew)}
			},
			want: operations.ErrInvalid,
		},
		{
			name: "cancelled context",
			batch: func() []operations.Operation {
				return []operations.Operation{newOp(o, "new-1", operations.OperationNew), newOp(o, "run", operations.OperationCompleted)}
			},
			ctx: func() context.Context {
				c, cancel := context.WithCancel(ctx)
				cancel()
				return c
			},
			want: context.Canceled,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, _ := openTest(t)
			require.NoError(t, s.CreateRun(ctx, newRun(o, phase.InProgress)))
			require.NoError(t, s.PutOperations(ctx, o, []operations.Operation{newOp(o, "run", operations.OperationInProgress), newOp(o, "done", operations.OperationCompleted)}))
			before, err := s.ListOperations(ctx, o, operations.OperationFilter{})
			require.NoError(t, err)
			c := ctx
			if tc.ctx != nil {
				c = tc.ctx()
			}
			require.ErrorIs(t, s.PutOperations(c, o, tc.batch()), tc.want)
			after, err := s.ListOperations(ctx, o, operations.OperationFilter{})
			require.NoError(t, err)
			if diff := cmp.Diff(before, after); diff != "" {
				t.Errorf("operations after a failed batch (-before +after):\n%s", diff)
			}
			_, err = s.GetOperation(ctx, o, "new-1")
			require.ErrorIs(t, err, operations.ErrNotFound)
		})
	}
}

func TestUpdateRunErrors(t *testing.T) {
	ctx := context.Background()
	o := backup("b")
	refused := errors.New("refused by the update function")
	tests := []struct {
		name   string
		start  phase.Phase
		update func(r *operations.Run) error
		want   error
	}{
		{name: "update's own error is returned", start: phase.InProgress, update: func(r *operations.Run) error {
			r.Errors = 99
			return refused
		}, want: refused},
		{name: "terminal run cannot move back", start: phase.Completed, update: func(r *operations.Run) error {
			r.Phase = phase.InProgress
			r.History = append(r.History, operations.Transition{From: phase.Completed, To: phase.InProgress})
			return nil
		}, want: phase.ErrInvalidTransition},
		{name: "owner cannot change", start: phase.InProgress, update: func(r *operations.Run) error {
			r.Owner.Name = "other"
			return nil
		}, want: operations.ErrConflict},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, _ := openTest(t)
			require.NoError(t, s.CreateRun(ctx, newRun(o, tc.start)))
			_, err := s.UpdateRun(ctx, o, tc.update)
			require.ErrorIs(t, err, tc.want)
			got, err := s.GetRun(ctx, o)
			require.NoError(t, err)
			if diff := cmp.Diff(newRun(o, tc.start), got); diff != "" {
				t.Errorf("run after a refused update (-want +got):\n%s", diff)
			}
		})
	}
}

func TestContextDoneFirst(t *testing.T) {
	s, _ := openTest(t)
	o := backup("b")
	require.NoError(t, s.CreateRun(context.Background(), newRun(o, phase.New)))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	calls := map[string]func() error{
		"CreateRun": func() error { return s.CreateRun(ctx, newRun(backup("c"), phase.New)) },
		"GetRun":    func() error { _, err := s.GetRun(ctx, o); return err },
		"UpdateRun": func() error {
			_, err := s.UpdateRun(ctx, o, func(r *operations.Run) error { r.Errors++; return nil })
			return err
		},
		"ListRuns":  func() error { _, err := s.ListRuns(ctx, operations.RunFilter{}); return err },
		"DeleteRun": func() error { return s.DeleteRun(ctx, o) },
		"PutOperations": func() error {
			return s.PutOperations(ctx, o, []operations.Operation{newOp(o, "x", operations.OperationNew)})
		},
		"GetOperation":   func() error { _, err := s.GetOperation(ctx, o, "x"); return err },
		"ListOperations": func() error { _, err := s.ListOperations(ctx, o, operations.OperationFilter{}); return err },
	}
	for name, call := range calls {
		require.ErrorIs(t, call(), context.Canceled, name)
	}
	got, err := s.GetRun(context.Background(), o)
	require.NoError(t, err)
	if diff := cmp.Diff(newRun(o, phase.New), got); diff != "" {
		t.Errorf("run after cancelled calls (-want +got):\n%s", diff)
	}
	_, err = s.GetRun(context.Background(), backup("c"))
	require.ErrorIs(t, err, operations.ErrNotFound)
}

// TestLongestRecords stores a run and an operation whose every name is as long as
// operations.MaxNameBytes allows and whose every text as long as operations.MaxTextBytes
// allows, and reads them back. (storetest's
// Runs/Limits checks that one byte more is refused on every store.)
func TestLongestRecords(t *testing.T) {
	ctx := context.Background()
	s, _ := openTest(t)
	name := strings.Repeat("n", operations.MaxNameBytes)
	text := strings.Repeat("t", operations.MaxTextBytes)
	o := operations.Owner{Kind: phase.Backup, Name: name, UID: name}
	r := newRun(o, phase.New)
	require.NoError(t, r.SetPhase(phase.InProgress, text, t0))
	require.NoError(t, r.RequestCancel(text, t0))
	r.FailureReason = text
	require.NoError(t, s.CreateRun(ctx, r))
	op := newOp(o, name, operations.OperationFailed)
	op.Action = name
	op.Resource = operations.ResourceIdentifier{Group: name, Resource: name, Namespace: name, Name: name}
	op.PostOperationItems = []operations.ResourceIdentifier{op.Resource}
	op.Status.Error, op.Status.OperationUnits, op.Status.Description = text, text, text
	require.NoError(t, s.PutOperations(ctx, o, []operations.Operation{op}))

	got, err := s.GetRun(ctx, o)
	require.NoError(t, err)
	if diff := cmp.Diff(r, got, cmp.Comparer(time.Time.Equal)); diff != "" {
		t.Errorf("run read back (-stored +read):\n%.2000s", diff)
	}
	ops, err := s.ListOperations(ctx, o, operations.OperationFilter{})
	require.NoError(t, err)
	if diff := cmp.Diff([]operations.Operation{op}, ops, cmp.Comparer(time.Time.Equal)); diff != "" {
		t.Errorf("operations read back (-stored +read):\n%.2000s", diff)
	}
}

func TestConcurrentWritersLoseNothing(t *testing.T) {
	t.Parallel()
	const workers, each = 8, 25
	ctx := context.Background()
	s, _ := openTest(t)
	o := backup("b")
	require.NoError(t, s.CreateRun(ctx, newRun(o, phase.InProgress)))
	var wg sync.WaitGroup
	errs := make(chan error, 3*workers*each)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				_, err := s.UpdateRun(ctx, o, func(r *operations.Run) error { r.ItemsDone++; return nil })
				errs <- err
				errs <- s.PutOperations(ctx, o, []operations.Operation{newOp(o, fmt.Sprintf("w%d-%d", w, i), operations.OperationNew)})
				ops, err := s.ListOperations(ctx, o, operations.OperationFilter{})
				if err == nil && len(ops) == 0 {
					err = fmt.Errorf("worker %d listed no operations after putting one", w)
				}
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	r, err := s.GetRun(ctx, o)
	require.NoError(t, err)
	require.Equal(t, workers*each, r.ItemsDone, "ItemsDone after concurrent increments")
	ops, err := s.ListOperations(ctx, o, operations.OperationFilter{})
	require.NoError(t, err)
	require.Len(t, ops, workers*each)
}

// TestBackendConformance runs the driver conformance suite against the bbolt driver of
// a store in a new file.
func TestBackendConformance(t *testing.T) {
	kvtest.Run(t, func(t *testing.T) kv.Backend {
		s, _ := openTest(t)
		// The suite wants an empty backend: take the engine's format key away.
		require.NoError(t, driver{s}.Commit(context.Background(), nil, []kv.Write{{Key: []byte("format"), Delete: true}}))
		return driver{s}
	})
}

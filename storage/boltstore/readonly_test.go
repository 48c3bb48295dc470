package boltstore

import (
	"bytes"
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/phase"
)

// TestReadOnly writes a store, then opens it read-only twice at once: both read what was
// written, every write fails with ErrReadOnly, a writable Open waits for them and fails
// with ErrLocked, and the file's bytes never change.
func TestReadOnly(t *testing.T) {
	ctx := context.Background()
	s, path := openTest(t)
	o := backup("b")
	require.NoError(t, s.CreateRun(ctx, newRun(o, phase.InProgress)))
	require.NoError(t, s.PutOperations(ctx, o, []operations.Operation{newOp(o, "op-1", operations.OperationInProgress)}))
	require.NoError(t, s.Close())
	before := fileBytes(t, path)

	var readers [2]*Store
	for i := range readers {
		r, err := Open(path, &Options{ReadOnly: true, Timeout: -1})
		require.NoError(t, err, "read-only Open %d", i)
		defer r.Close()
		readers[i] = r
	}
	_, err := Open(path, &Options{Timeout: -1})
	require.ErrorIs(t, err, ErrLocked, "a writable Open while read-only Stores hold the file")

	for i, r := range readers {
		run, err := r.GetRun(ctx, o)
		require.NoError(t, err)
		require.Equal(t, phase.InProgress, run.Phase)
		ops, err := r.ListOperations(ctx, o, operations.OperationFilter{})
		require.NoError(t, err)
		require.Len(t, ops, 1, "reader %d", i)
		require.Equal(t, "op-1", ops[0].ID, "reader %d", i)
	}

	r := readers[0]
	writes := []struct {
		name string
		call func() error
	}{
		{name: "CreateRun", call: func() error { return r.CreateRun(ctx, newRun(backup("other"), phase.New)) }},
		{name: "UpdateRun", call: func() error {
			_, err := r.UpdateRun(ctx, o, func(run *operations.Run) error {
				return run.SetPhase(phase.WaitingForPluginOperations, "", t0)
			})
			return err
		}},
		{name: "DeleteRun", call: func() error { return r.DeleteRun(ctx, o) }},
		{name: "PutOperations", call: func() error {
			return r.PutOperations(ctx, o, []operations.Operation{newOp(o, "op-2", operations.OperationNew)})
		}},
	}
	for _, w := range writes {
		require.ErrorIs(t, w.call(), ErrReadOnly, w.name)
	}
	for i, r := range readers {
		require.NoError(t, r.Close(), "Close %d", i)
	}
	if !bytes.Equal(before, fileBytes(t, path)) {
		t.Fatal("the file changed while only read-only Stores had it open")
	}
	w, err := Open(path, &Options{Timeout: -1})
	require.NoError(t, err, "a writable Open once the readers closed")
	require.NoError(t, w.Close())
}

// TestReadOnlyNeverCreates checks that a read-only Open makes no store of a file that is
// missing, empty, or a bbolt file without buckets, and leaves each as it was.
func TestReadOnlyNeverCreates(t *testing.T) {
	ro := &Options{ReadOnly: true}
	t.Run("missing file", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "store.db")
		_, err := Open(path, ro)
		require.ErrorIs(t, err, fs.ErrNotExist)
		_, err = os.Lstat(path)
		require.ErrorIs(t, err, fs.ErrNotExist, "a read-only Open created the file")
	})
	t.Run("empty file", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "store.db")
		require.NoError(t, os.WriteFile(path, nil, 0o600))
		_, err := Open(path, ro)
		require.ErrorIs(t, err, ErrNotStore)
		require.Empty(t, fileBytes(t, path))
	})
	t.Run("bbolt file without buckets", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "store.db")
		db, err := bolt.Open(path, 0o600, nil)
		require.NoError(t, err)
		require.NoError(t, db.Close())
		before := fileBytes(t, path)
		_, err = Open(path, ro)
		require.ErrorIs(t, err, ErrNotStore)
		require.True(t, bytes.Equal(before, fileBytes(t, path)), "the file changed")
	})
}

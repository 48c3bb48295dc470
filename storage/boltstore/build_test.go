package boltstore_test

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/phase"
	"github.com/itemops/itemops/storage/boltstore"
)

// TestBuild builds a store, then tries again over it and with a fill that fails: the
// store shows at its path only whole, an existing file is never written over, and no
// temporary file is left in the directory.
func TestBuild(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "new.db")
	o := operations.Owner{Kind: phase.Backup, Name: "b"}
	run := operations.Run{Owner: o, Phase: phase.New, Created: time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)}
	require.NoError(t, boltstore.Build(path, func(s *boltstore.Store) error {
		_, err := os.Lstat(path)
		require.True(t, errors.Is(err, fs.ErrNotExist), "the store shows at its path before it is whole")
		return s.CreateRun(context.Background(), run)
	}))
	s, err := boltstore.Open(path, &boltstore.Options{ReadOnly: true})
	require.NoError(t, err)
	_, err = s.GetRun(context.Background(), o)
	require.NoError(t, err)
	require.NoError(t, s.Close())
	before, err := os.ReadFile(path)
	require.NoError(t, err)

	called := false
	err = boltstore.Build(path, func(*boltstore.Store) error { called = true; return nil })
	require.True(t, errors.Is(err, fs.ErrExist), "Build over a file = %v, want fs.ErrExist", err)
	require.False(t, called)
	after, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, before, after)

	failed := filepath.Join(dir, "failed.db")
	boom := errors.New("boom")
	require.ErrorIs(t, boltstore.Build(failed, func(*boltstore.Store) error { return boom }), boom)
	require.NoFileExists(t, failed)
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, entries, 1, "only new.db: no temporary file is left")
}

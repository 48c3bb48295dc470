package boltstore_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/itemops/itemops/internal/testutil/boltfault"
	"github.com/itemops/itemops/storage/boltstore"
)

// notStores writes files that exist and are not itemops stores (see
// boltfault.NotStores) and returns their paths by name.
func notStores(t *testing.T) map[string]string {
	t.Helper()
	contents, err := boltfault.NotStores()
	require.NoError(t, err)
	dir := t.TempDir()
	files := map[string]string{}
	for name, b := range contents {
		files[name] = filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(files[name], b, 0o600))
	}
	return files
}

// TestNoInit opens files that are not stores with Options.NoInit: each fails with
// ErrNotStore and is left byte for byte as it was. A path where there is no file still
// gets a new store.
func TestNoInit(t *testing.T) {
	for name, path := range notStores(t) {
		t.Run(name, func(t *testing.T) {
			before, err := os.ReadFile(path)
			require.NoError(t, err)
			s, err := boltstore.Open(path, &boltstore.Options{NoInit: true})
			if err == nil {
				s.Close()
			}
			require.True(t, errors.Is(err, boltstore.ErrNotStore), "Open = %v, want ErrNotStore", err)
			after, err := os.ReadFile(path)
			require.NoError(t, err)
			require.True(t, bytes.Equal(before, after), "Open changed the file")
		})
	}
	path := filepath.Join(t.TempDir(), "new.db")
	s, err := boltstore.Open(path, &boltstore.Options{NoInit: true})
	require.NoError(t, err, "a file that does not exist is created")
	require.NoError(t, s.Close())
}

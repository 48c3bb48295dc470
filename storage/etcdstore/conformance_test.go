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

func TestCancel(t *testing.T) {
	storetest.RunCancel(t, func(t *testing.T) operations.Store {
		return etcdstore.NewTestStore(t, nil)
	})
}

// TestConformanceSmallLimits runs the suite with limits so small that the engine stages
// every batch of more than a few operations and applies it in many etcd transactions.
func TestConformanceSmallLimits(t *testing.T) {
	storetest.Run(t, func(t *testing.T) operations.Store {
		return etcdstore.NewTestStore(t, &etcdstore.Options{MaxTxnOps: 16, MaxRequestBytes: 64 << 10})
	})
}

package etcdstore_test

import (
	"context"
	"strings"
	"testing"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/operations/decorate"
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
// It leaves out the Scale group, a batch of 100,000 operations: staged in transactions
// of 16 operations it costs 12,500 round trips to etcd (a minute under the race
// detector), to check the engine's staging, which memstore's TestConformanceStaged checks
// at that scale, beside TestConformance's batch of 100,000 here.
func TestConformanceSmallLimits(t *testing.T) {
	storetest.Run(t, func(t *testing.T) operations.Store {
		if strings.HasPrefix(t.Name(), "TestConformanceSmallLimits/Scale/") {
			t.Skip("the Scale group is left out with small limits; see the test's doc")
		}
		return etcdstore.NewTestStore(t, &etcdstore.Options{MaxTxnOps: 16, MaxRequestBytes: 64 << 10})
	})
}

// TestClaimSessions checks the claim sessions of the store, and of the store that
// decorate.Store makes of it, which keeps them.
func TestClaimSessions(t *testing.T) {
	for _, tc := range []struct {
		name string
		wrap func(operations.Store) operations.Store
	}{
		{"Store", func(s operations.Store) operations.Store { return s }},
		{"decorate.Store", func(s operations.Store) operations.Store {
			return decorate.Store(s, func(ctx context.Context, _ decorate.Call, call func(context.Context) error) error {
				return call(ctx)
			})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			storetest.RunClaims(t, func(t *testing.T) operations.Store {
				return tc.wrap(etcdstore.NewTestStore(t, nil))
			})
		})
	}
}

package storetest_test

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/operations/decorate"
	"github.com/itemops/itemops/phase"
	"github.com/itemops/itemops/storage/kv"
	"github.com/itemops/itemops/storage/memstore"
	"github.com/itemops/itemops/storage/storetest"
)

// TestAlternateConformance runs the suites on two engines, each with its own turns,
// over one backend, through Alternate: the concurrency checks then race writers of two
// engines on one run.
func TestAlternateConformance(t *testing.T) {
	t.Parallel()
	pair := func(t *testing.T) operations.Store {
		b := memstore.NewBackend(kv.Limits{MaxOps: 64, MaxBytes: 256 << 10})
		var stores [2]operations.Store
		for i := range stores {
			s, err := kv.Open(context.Background(), b)
			require.NoError(t, err)
			stores[i] = s
		}
		return storetest.Alternate(stores[0], stores[1])
	}
	t.Run("Run", func(t *testing.T) { storetest.Run(t, pair) })
	t.Run("RunCancel", func(t *testing.T) { storetest.RunCancel(t, pair) })
}

// TestAlternate sends calls through Alternate over three stores that count the calls
// they get, and over a pair with a nil store: the calls go to each in turn, the store
// is a RunStarter exactly when every store given is, and a call sent to nil fails with
// operations.ErrInvalid.
func TestAlternate(t *testing.T) {
	ctx := context.Background()
	var got []int
	counted := func(i int) operations.Store {
		return decorate.Store(memstore.New(), func(ctx context.Context, _ decorate.Call, call func(context.Context) error) error {
			got = append(got, i)
			return call(ctx)
		})
	}
	s := storetest.Alternate(counted(0), counted(1), counted(2))
	o := operations.Owner{Kind: phase.Backup, Name: "b", UID: "u"}
	for range 7 {
		_, _ = s.GetRun(ctx, o)
	}
	_ = s.(operations.RunStarter).CreateRunWithOperations(ctx, operations.Run{Owner: o, Phase: phase.New}, nil)
	_ = s.DeleteRun(ctx, o)
	if diff := cmp.Diff([]int{0, 1, 2, 0, 1, 2, 0, 1, 2}, got); diff != "" {
		t.Errorf("the stores the calls went to (-want +got):\n%s", diff)
	}
	if _, ok := storetest.Alternate(memstore.New(), newSimpleStore(noFault)).(operations.RunStarter); ok {
		t.Errorf("Alternate over a store that is no RunStarter is a RunStarter")
	}
	withNil := storetest.Alternate(memstore.New(), nil)
	_, _ = withNil.GetRun(ctx, o)
	if _, err := withNil.GetRun(ctx, o); !errors.Is(err, operations.ErrInvalid) {
		t.Errorf("a call sent to a nil store: %v, want operations.ErrInvalid", err)
	}
}

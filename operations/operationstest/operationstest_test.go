package operationstest_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/operations/operationstest"
)

func TestTracker(t *testing.T) {
	var zero operationstest.Tracker
	p, err := zero.Progress(context.Background(), operations.Operation{ID: "a"})
	require.NoError(t, err)
	require.Equal(t, operations.Progress{}, p, "unset: still running, no progress")
	require.NoError(t, zero.Cancel(context.Background(), operations.Operation{ID: "a"}))
	require.Equal(t, 1, zero.ProgressCalls("a"))
	require.Equal(t, 1, zero.CancelCalls("a"))
	require.Zero(t, zero.ProgressCalls("b"))

	boom := errors.New("boom")
	tr := &operationstest.Tracker{
		ProgressFunc: func(ctx context.Context, op operations.Operation) (operations.Progress, error) {
			return operations.Progress{Completed: true, Description: op.ID}, nil
		},
		CancelFunc: func(ctx context.Context, op operations.Operation) error { return boom },
	}
	var wg sync.WaitGroup
	for i := 0; i < 50; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p, err := tr.Progress(context.Background(), operations.Operation{ID: "x"})
			require.NoError(t, err)
			require.Equal(t, "x", p.Description)
			require.ErrorIs(t, tr.Cancel(context.Background(), operations.Operation{ID: "x"}), boom)
		}()
	}
	wg.Wait()
	require.Equal(t, 50, tr.ProgressCalls("x"))
	require.Equal(t, 50, tr.CancelCalls("x"))
}

func TestResolver(t *testing.T) {
	tr := &operationstest.Tracker{}
	r := operationstest.Resolver(map[string]operations.Tracker{"velero.io/mover": tr})
	got, err := r.Resolve("velero.io/mover")
	require.NoError(t, err)
	require.Same(t, tr, got)
	_, err = r.Resolve("velero.io/other")
	require.ErrorContains(t, err, `no plugin registered as "velero.io/other"`)
}

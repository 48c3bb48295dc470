package etcdstore

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/itemops/itemops/operations"
)

// TestReadersSeeWholeStagedBatches has two writers in two processes (two clients, so no
// lock in common) put batches the engine stages (small limits) to one run, each batch adding operations and a
// second one finishing them, while readers in two more processes list the run: no
// reader may see part of a batch, and every batch is stored.
func TestReadersSeeWholeStagedBatches(t *testing.T) {
	const (
		batch   = 30 // far more than one transaction holds with small limits
		rounds  = 8
		writers = 2
		readers = 2
	)
	prefix := newPrefix()
	open := func() *Store { return openStore(t, newClient(t, testServer), prefix, small()) }
	o := backup("b")
	createWaiting(t, open(), o)

	var (
		wg     sync.WaitGroup
		done   atomic.Int32 // writers finished
		reads  atomic.Int64
		errsMu sync.Mutex
		errs   []error
		fail   = func(err error) { errsMu.Lock(); errs = append(errs, err); errsMu.Unlock() }
	)
	// Writers in two processes racing on one run may lose to each other more often than
	// the store retries (see the package doc); like a Monitor, a writer then tries again
	// later. What must hold is that readers never see part of a batch.
	put := func(s *Store, ops []operations.Operation) error {
		var err error
		for range 20 {
			if err = s.PutOperations(bg, o, ops); !errors.Is(err, operations.ErrConflict) {
				return err
			}
		}
		return err
	}
	for w := range writers {
		s := open()
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer done.Add(1)
			for r := range rounds {
				ops := newOps(o, fmt.Sprintf("w%d-r%d-", w, r), batch, operations.OperationNew)
				if err := put(s, ops); err != nil {
					fail(err)
					return
				}
				for i := range ops {
					ops[i].Status.Phase = operations.OperationCompleted
				}
				if err := put(s, ops); err != nil {
					fail(err)
					return
				}
			}
		}()
	}
	for range readers {
		s := open()
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; done.Load() < writers || n == 0; n++ {
				all, err := s.ListOperations(bg, o, operations.OperationFilter{})
				if err != nil {
					fail(err)
					return
				}
				if len(all)%batch != 0 {
					fail(fmt.Errorf("a reader saw %d operations, not whole batches of %d", len(all), batch))
					return
				}
				unfinished := 0
				for _, op := range all {
					if !op.Status.Phase.Finished() {
						unfinished++
					}
				}
				if unfinished%batch != 0 {
					fail(fmt.Errorf("a reader saw %d operations unfinished, not whole batches of %d", unfinished, batch))
					return
				}
				reads.Add(1)
			}
		}()
	}
	wg.Wait()
	require.NoError(t, errors.Join(errs...))
	require.Positive(t, reads.Load(), "reads made")
	s := open()
	all := listIDs(t, s, o)
	require.Len(t, all, writers*rounds*batch)
	require.Empty(t, listIDs(t, s, o, operations.OperationNew, operations.OperationInProgress))
}

package kv_test

import (
	"bytes"
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/storage/kv"
	"github.com/itemops/itemops/storage/memstore"
)

// applyFails is a backend that, once fail is set, fails every Commit that deletes a
// staged chunk: a batch staged past its commit point is then left for a reader to
// apply, as when its writer dies.
type applyFails struct {
	kv.Backend
	fail atomic.Bool
}

func (a *applyFails) Commit(ctx context.Context, conds []kv.Condition, writes []kv.Write) error {
	staged := kv.StagedChunkKey(owner, 0)
	for _, w := range writes {
		if a.fail.Load() && w.Delete && bytes.HasPrefix(w.Key, staged[:len(staged)-12]) {
			return errors.New("applyFails: the apply of a staged chunk failed")
		}
	}
	return a.Backend.Commit(ctx, conds, writes)
}

// TestReadPassAppliesStagedBatch: a run whose batch was committed but not applied is
// given by ReadPass with the whole batch, as ListOperations gives it, and CommitPass on
// it writes.
func TestReadPassAppliesStagedBatch(t *testing.T) {
	b := &applyFails{Backend: memstore.NewBackend(kv.Limits{MaxOps: 16})}
	s := open(t, b)
	createRun(t, s)
	b.fail.Store(true)
	require.Error(t, s.PutOperations(bg, owner, ops("op", 40)), "a batch whose apply fails")
	b.fail.Store(false)

	var read []operations.PassRun
	require.NoError(t, s.ReadPass(bg, operations.RunFilter{}, func(page []operations.PassRun) error {
		read = append(read, page...)
		return nil
	}))
	require.Len(t, read, 1)
	want, err := s.ListOperations(bg, owner, operations.OperationFilter{})
	require.NoError(t, err)
	require.Len(t, want, 40, "the batch, committed, is whole")
	require.Equal(t, want, read[0].Operations)

	batch := []operations.Operation{read[0].Operations[0]}
	batch[0].Status.Phase = operations.OperationCompleted
	require.NoError(t, s.CommitPass(bg, read[0], batch))
	got, err := s.GetOperation(bg, owner, batch[0].ID)
	require.NoError(t, err)
	require.Equal(t, operations.OperationCompleted, got.Status.Phase)
}

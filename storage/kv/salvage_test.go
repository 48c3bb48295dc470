package kv_test

import (
	"bytes"
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/storage/kv"
	"github.com/itemops/itemops/storage/memstore"
)

// salvage runs kv.Salvage on a snapshot of b.
func salvage(t *testing.T, b kv.Backend) ([]kv.SalvagedRun, []kv.Loss) {
	t.Helper()
	var runs []kv.SalvagedRun
	var lost []kv.Loss
	require.NoError(t, b.Read(bg, func(r kv.Reader) (err error) {
		runs, lost, err = kv.Salvage(bg, r)
		return err
	}))
	return runs, lost
}

// idsOf returns the IDs of ops.
func idsOf(ops []operations.Operation) []string {
	var ids []string
	for _, op := range ops {
		ids = append(ids, op.ID)
	}
	return ids
}

// stopAfterMeta is a Backend whose commits all fail, once armed, after the first that
// writes the key meta: a writer that dies just after a batch's commit point.
type stopAfterMeta struct {
	kv.Backend
	meta    []byte
	armed   atomic.Bool
	stopped atomic.Bool
}

var errStopped = errors.New("the writer died")

func (b *stopAfterMeta) Commit(ctx context.Context, conds []kv.Condition, writes []kv.Write) error {
	if b.stopped.Load() {
		return errStopped
	}
	err := b.Backend.Commit(ctx, conds, writes)
	for _, w := range writes {
		if err == nil && b.armed.Load() && bytes.Equal(w.Key, b.meta) {
			b.stopped.Store(true)
		}
	}
	return err
}

// TestSalvageAppliesStagedBatch leaves a batch of operations committed but not applied
// (its writer died after the commit point): Salvage reads its operations, as a reader of
// the store would after applying it.
func TestSalvageAppliesStagedBatch(t *testing.T) {
	metaKey, _ := kv.StagedMeta(owner)
	b := &stopAfterMeta{Backend: memstore.NewBackend(kv.Limits{MaxOps: 8}), meta: metaKey}
	s := open(t, b)
	createRun(t, s)
	b.armed.Store(true)
	batch := ops("op", 40)
	require.ErrorIs(t, s.PutOperations(bg, owner, batch), errStopped)
	require.True(t, b.stopped.Load(), "the batch reached its commit point")

	runs, lost := salvage(t, b)
	require.Empty(t, lost)
	require.Len(t, runs, 1)
	if diff := cmp.Diff(idsOf(batch), idsOf(runs[0].Operations)); diff != "" {
		t.Errorf("operations of the staged batch (-want +got):\n%s", diff)
	}
}

// TestSalvageRunFromIndexCopy deletes a run's record: Salvage reads the run from its
// copy in the phase index, with its operations. Deleting the copy too loses the run,
// and each of its operations is named lost.
func TestSalvageRunFromIndexCopy(t *testing.T) {
	b := memstore.NewBackend(kv.Limits{})
	s := open(t, b)
	createRun(t, s)
	batch := ops("op", 3)
	require.NoError(t, s.PutOperations(bg, owner, batch))
	want, err := s.GetRun(bg, owner)
	require.NoError(t, err)
	require.NoError(t, b.Commit(bg, nil, []kv.Write{{Key: kv.ClaimKey(owner), Delete: true}}))

	runs, lost := salvage(t, b)
	require.Empty(t, lost)
	require.Len(t, runs, 1)
	if diff := cmp.Diff(want, runs[0].Run); diff != "" {
		t.Errorf("run read from its copy (-want +got):\n%s", diff)
	}
	require.Equal(t, idsOf(batch), idsOf(runs[0].Operations))

	// The copy is the only key of the run that starts with 'p'.
	var copyKey []byte
	require.NoError(t, b.Read(bg, func(r kv.Reader) error {
		return r.Scan(bg, []byte("p"), []byte("q"), func(k, _ []byte, _ kv.Version) error {
			copyKey = bytes.Clone(k)
			return nil
		})
	}))
	require.NoError(t, b.Commit(bg, nil, []kv.Write{{Key: copyKey, Delete: true}}))
	runs, lost = salvage(t, b)
	require.Empty(t, runs)
	var named []string
	for _, l := range lost {
		require.Equal(t, operations.Owner{Kind: owner.Kind, Name: owner.Name}, l.Owner)
		named = append(named, l.ID)
	}
	require.Equal(t, idsOf(batch), named)
}

package kv_test

import (
	"bytes"
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/storage/kv"
	"github.com/itemops/itemops/storage/memstore"
)

// losing is a backend on which, once lose is set, every Commit with conditions fails
// them, as if another writer always committed first. It counts those Commits.
type losing struct {
	kv.Backend
	lose    atomic.Bool
	commits atomic.Int64 // conditional Commits while lose is set
}

func (l *losing) Commit(ctx context.Context, conds []kv.Condition, writes []kv.Write) error {
	if l.lose.Load() && len(conds) > 0 {
		l.commits.Add(1)
		return fmt.Errorf("losing backend: %w", kv.ErrConditionFailed)
	}
	return l.Backend.Commit(ctx, conds, writes)
}

// Every write that keeps losing races ends with operations.ErrConflict after as many
// tries as WithRetries allows, each try one conditional Commit, instead of looping.
func TestRetriesAreBounded(t *testing.T) {
	const tries = 5
	writes := []struct {
		name  string
		write func(s *kv.Store) error
	}{
		{"UpdateRun", func(s *kv.Store) error {
			_, err := s.UpdateRun(bg, owner, func(r *operations.Run) error { r.ItemsDone++; return nil })
			return err
		}},
		{"PutOperations", func(s *kv.Store) error { return s.PutOperations(bg, owner, ops("op", 3)) }},
		{"DeleteRun", func(s *kv.Store) error { return s.DeleteRun(bg, owner) }},
	}
	for _, tc := range writes {
		t.Run(tc.name, func(t *testing.T) {
			b := &losing{Backend: memstore.NewBackend(kv.Limits{})}
			s := open(t, b, kv.WithRetries(tries))
			createRun(t, s)
			b.lose.Store(true)
			err := tc.write(s)
			require.ErrorIs(t, err, operations.ErrConflict)
			require.Equal(t, int64(tries), b.commits.Load(), "conditional commits")
			require.Zero(t, kv.RunsWritten(s), "queues left after the write ended")
		})
	}
}

// Open, which writes the format key of an empty backend on condition that no other Open
// wrote it first, is bounded the same way.
func TestOpenRetriesAreBounded(t *testing.T) {
	b := &losing{Backend: memstore.NewBackend(kv.Limits{})}
	b.lose.Store(true)
	_, err := kv.Open(bg, b, kv.WithRetries(3))
	require.ErrorIs(t, err, operations.ErrConflict)
	require.Equal(t, int64(3), b.commits.Load(), "conditional commits")
}

// restaging is a backend whose reads always find a batch staged in owner's run, as if
// other writers committed one staged batch after another. Applying one succeeds (it has
// nothing left to apply), and the next read finds another.
type restaging struct {
	kv.Backend
	metaKey, staged []byte
	reads           atomic.Int64 // of the metadata key
}

func (b *restaging) Read(ctx context.Context, fn func(kv.Reader) error) error {
	return b.Backend.Read(ctx, func(r kv.Reader) error { return fn(restagingReader{r, b}) })
}

type restagingReader struct {
	kv.Reader
	b *restaging
}

func (r restagingReader) Get(ctx context.Context, key []byte) ([]byte, kv.Version, error) {
	v, ver, err := r.Reader.Get(ctx, key)
	if err == nil && bytes.Equal(key, r.b.metaKey) {
		r.b.reads.Add(1)
		return r.b.staged, ver, nil
	}
	return v, ver, err
}

// A write or a read that finds a staged batch applies it and tries again, counting the
// try: a run given one staged batch after another ends it with operations.ErrConflict
// after as many tries as WithRetries allows. (Writes once started over after each
// batch they applied, and so looped for as long as the batches came.)
func TestRollForwardsAreBounded(t *testing.T) {
	const tries = 4
	for _, tc := range []struct {
		name string
		call func(s *kv.Store) error
	}{
		{"PutOperations", func(s *kv.Store) error { return s.PutOperations(bg, owner, ops("op", 1)) }},
		{"GetOperation", func(s *kv.Store) error { _, err := s.GetOperation(bg, owner, "op000"); return err }},
		{"ListOperations", func(s *kv.Store) error {
			_, err := s.ListOperations(bg, owner, operations.OperationFilter{})
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key, staged := kv.StagedMeta(owner)
			b := &restaging{Backend: memstore.NewBackend(kv.Limits{})}
			s := open(t, b, kv.WithRetries(tries))
			createRun(t, s)
			b.metaKey, b.staged = key, staged
			err := tc.call(s)
			require.ErrorIs(t, err, operations.ErrConflict)
			// Each try reads the metadata once, and each apply of the batch twice: to find
			// it, and to find it gone, as the first read of its next try does.
			require.Equal(t, int64(tries*2), b.reads.Load(), "reads of the run's operations metadata")
		})
	}
}

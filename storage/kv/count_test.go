package kv_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/storage/kv"
	"github.com/itemops/itemops/storage/memstore"
)

// TestCountOperations: the counts of CountOperations are those of the operations
// ListOperations returns, as their phases move, over batches split into several
// writes; a run that does not exist is ErrNotFound.
func TestCountOperations(t *testing.T) {
	s := open(t, memstore.NewBackend(kv.Limits{MaxOps: 16}))
	_, err := s.CountOperations(bg, owner)
	require.ErrorIs(t, err, operations.ErrNotFound)

	createRun(t, s)
	all := ops("op", 100)
	require.NoError(t, s.PutOperations(bg, owner, all))
	for i := range all {
		switch i % 4 {
		case 1:
			all[i].Status.Phase = operations.OperationInProgress
		case 2:
			all[i].Status.Phase = operations.OperationCompleted
		case 3:
			all[i].Status.Phase = operations.OperationFailed
			all[i].Status.Error = "failed"
		}
	}
	require.NoError(t, s.PutOperations(bg, owner, all[:60]))
	got, err := s.CountOperations(bg, owner)
	require.NoError(t, err)
	listed, err := s.ListOperations(bg, owner, operations.OperationFilter{})
	require.NoError(t, err)
	require.Equal(t, operations.Count(listed), got)
	require.Equal(t, operations.OperationCounts{New: 40 + 15, InProgress: 15, Completed: 15, Failed: 15}, got)
	require.Equal(t, 100, got.Total())

	other := owner
	other.UID = "another"
	_, err = s.CountOperations(bg, other)
	require.ErrorIs(t, err, operations.ErrUIDMismatch)
}

// BenchmarkCountOperations compares the counts of a run of 10,000 operations, 100 of
// them unfinished, read three ways: CountOperations, ListOperations of every operation
// (what a status showing the counts read before), and ListOperations of the unfinished
// ones (what a status needs of its detail).
func BenchmarkCountOperations(b *testing.B) {
	s := open(b, memstore.NewBackend(kv.Limits{}))
	createRun(b, s)
	all := ops("op", 10_000)
	require.NoError(b, s.PutOperations(bg, owner, all))
	for i := range all[100:] {
		all[100+i].Status.Phase = operations.OperationCompleted
	}
	require.NoError(b, s.PutOperations(bg, owner, all[100:]))
	b.Run("CountOperations", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			if _, err := s.CountOperations(bg, owner); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("ListOperations/all", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			if _, err := s.ListOperations(bg, owner, operations.OperationFilter{}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("ListOperations/unfinished", func(b *testing.B) {
		b.ReportAllocs()
		f := operations.OperationFilter{Phases: []operations.OperationPhase{operations.OperationNew, operations.OperationInProgress}}
		for i := 0; i < b.N; i++ {
			if _, err := s.ListOperations(bg, owner, f); err != nil {
				b.Fatal(err)
			}
		}
	})
}

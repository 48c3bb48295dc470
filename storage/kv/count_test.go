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
	_, _, err := s.CountOperations(bg, owner, operations.OperationFilter{})
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
	got, none, err := s.CountOperations(bg, owner, operations.OperationFilter{Phases: []operations.OperationPhase{"Cancelled"}})
	require.NoError(t, err)
	require.Empty(t, none, "a filter that selects none lists none")
	listed, err := s.ListOperations(bg, owner, operations.OperationFilter{})
	require.NoError(t, err)
	require.Equal(t, operations.Count(listed), got)
	require.Equal(t, operations.OperationCounts{New: 40 + 15, InProgress: 15, Completed: 15, Failed: 15}, got)
	require.Equal(t, 100, got.Total())
	for _, f := range []operations.OperationFilter{{}, {Phases: []operations.OperationPhase{operations.OperationNew, operations.OperationInProgress}},
		{Phases: []operations.OperationPhase{operations.OperationFailed, operations.OperationInProgress}}} {
		counted, selected, err := s.CountOperations(bg, owner, f)
		require.NoError(t, err)
		require.Equal(t, got, counted, "the counts, whatever the filter")
		want, err := s.ListOperations(bg, owner, f)
		require.NoError(t, err)
		require.Equal(t, want, selected, "the operations %v selects, as ListOperations lists them", f.Phases)
	}

	other := owner
	other.UID = "another"
	_, _, err = s.CountOperations(bg, other, operations.OperationFilter{})
	require.ErrorIs(t, err, operations.ErrUIDMismatch)
}

// BenchmarkCountOperations reads a run of 10,000 operations, 100 of them unfinished, as
// a status does: the counts and the unfinished operations, with CountOperations, against
// ListOperations of every operation (what a status read before) and ListOperations of
// the unfinished ones alone.
func BenchmarkCountOperations(b *testing.B) {
	s := open(b, memstore.NewBackend(kv.Limits{}))
	createRun(b, s)
	all := ops("op", 10_000)
	require.NoError(b, s.PutOperations(bg, owner, all))
	for i := range all[100:] {
		all[100+i].Status.Phase = operations.OperationCompleted
	}
	require.NoError(b, s.PutOperations(bg, owner, all[100:]))
	unfinished := operations.OperationFilter{Phases: []operations.OperationPhase{operations.OperationNew, operations.OperationInProgress}}
	b.Run("CountOperations", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			if _, _, err := s.CountOperations(bg, owner, unfinished); err != nil {
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
		for i := 0; i < b.N; i++ {
			if _, err := s.ListOperations(bg, owner, unfinished); err != nil {
				b.Fatal(err)
			}
		}
	})
}

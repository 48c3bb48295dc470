package memstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/phase"
	"github.com/itemops/itemops/storage/memstore"
	"github.com/itemops/itemops/storage/storetest"
)

func TestConformance(t *testing.T) {
	storetest.Run(t, func(*testing.T) operations.Store { return memstore.New() })
}

// The zero Store is documented as ready to use.
func TestConformanceZeroValue(t *testing.T) {
	storetest.Run(t, func(*testing.T) operations.Store { return new(memstore.Store) })
}

var (
	bg    = context.Background()
	owner = operations.Owner{Kind: phase.Restore, Name: "r", UID: "u"}
)

func newStore(t *testing.T) *memstore.Store {
	t.Helper()
	s := memstore.New()
	require.NoError(t, s.CreateRun(bg, operations.Run{Owner: owner, Phase: phase.New}))
	return s
}

// The update function runs without the Store's lock, so it may read the Store and write
// operations.
func TestUpdateRunMayUseTheStore(t *testing.T) {
	s := newStore(t)
	got, err := s.UpdateRun(bg, owner, func(r *operations.Run) error {
		if _, err := s.GetRun(bg, owner); err != nil {
			return err
		}
		if _, err := s.ListRuns(bg, operations.RunFilter{}); err != nil {
			return err
		}
		op := operations.Operation{Owner: owner, ID: "op-1", Status: operations.Status{Phase: operations.OperationNew}}
		if err := s.PutOperations(bg, owner, []operations.Operation{op}); err != nil {
			return err
		}
		pending, err := s.ListOperations(bg, owner, operations.OperationFilter{})
		if err != nil {
			return err
		}
		r.ItemsTotal = len(pending)
		return nil
	})
	require.NoError(t, err)
	require.Equal(t, 1, got.ItemsTotal)
}

// blockUpdate starts an UpdateRun whose update function waits for release, and returns
// once the function is running, with a channel that delivers UpdateRun's error.
func blockUpdate(t *testing.T, s *memstore.Store) (release chan<- struct{}, result <-chan error) {
	t.Helper()
	started, rel, res := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	go func() {
		_, err := s.UpdateRun(bg, owner, func(r *operations.Run) error {
			close(started)
			<-rel
			r.Errors++
			return nil
		})
		res <- err
	}()
	<-started
	return rel, res
}

func TestUpdateRunWaitHonoursContext(t *testing.T) {
	s := newStore(t)
	release, first := blockUpdate(t, s)

	ctx, cancel := context.WithCancel(bg)
	second := make(chan error, 1)
	called := false
	go func() {
		_, err := s.UpdateRun(ctx, owner, func(r *operations.Run) error { called = true; return nil })
		second <- err
	}()
	cancel()
	// The second call gives up while the first still holds the run.
	require.ErrorIs(t, <-second, context.Canceled)
	require.False(t, called, "the cancelled UpdateRun ran its update function")

	close(release)
	require.NoError(t, <-first)
	got, err := s.GetRun(bg, owner)
	require.NoError(t, err)
	require.Equal(t, 1, got.Errors)
}

func TestUpdateRunDeletedDuringUpdate(t *testing.T) {
	s := newStore(t)
	release, result := blockUpdate(t, s)
	// DeleteRun does not wait for the update function.
	require.NoError(t, s.DeleteRun(bg, owner))
	// A run created again under the name is not the one being updated.
	require.NoError(t, s.CreateRun(bg, operations.Run{Owner: owner, Phase: phase.InProgress}))
	close(release)
	require.ErrorIs(t, <-result, operations.ErrNotFound)

	got, err := s.GetRun(bg, owner)
	require.NoError(t, err)
	require.Equal(t, operations.Run{Owner: owner, Phase: phase.InProgress}, got, "the update reached the new run")

	// Later updates apply to the new run.
	got, err = s.UpdateRun(bg, owner, func(r *operations.Run) error { r.Warnings = 7; return nil })
	require.NoError(t, err)
	require.Equal(t, 7, got.Warnings)
}

// An update waiting for the run while it is deleted and created again applies to the
// run that is stored when its turn comes.
func TestUpdateRunWaitingAcrossRecreation(t *testing.T) {
	s := newStore(t)
	release, first := blockUpdate(t, s)
	second := make(chan error, 1)
	go func() {
		_, err := s.UpdateRun(bg, owner, func(r *operations.Run) error { r.Warnings++; return nil })
		second <- err
	}()
	require.NoError(t, s.DeleteRun(bg, owner))
	require.NoError(t, s.CreateRun(bg, operations.Run{Owner: owner, Phase: phase.InProgress, Warnings: 10}))
	close(release)
	require.ErrorIs(t, <-first, operations.ErrNotFound)
	require.NoError(t, <-second)
	got, err := s.GetRun(bg, owner)
	require.NoError(t, err)
	require.Equal(t, 11, got.Warnings)
	require.Equal(t, 0, got.Errors)
}

func TestUpdateRunNil(t *testing.T) {
	s := newStore(t)
	_, err := s.UpdateRun(bg, owner, nil)
	require.ErrorIs(t, err, operations.ErrInvalid)
}

// Errors name the record, for logs.
func TestErrorMessages(t *testing.T) {
	s := newStore(t)
	missing := operations.Owner{Kind: phase.Backup, Name: "gone"}
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"GetRun", second(s.GetRun(bg, missing)), "get run Backup/gone: not found"},
		{"CreateRun", s.CreateRun(bg, operations.Run{Owner: owner, Phase: phase.New}), "create run Restore/r: already exists"},
		{"GetOperation", second(s.GetOperation(bg, owner, "op-9")), `get operation "op-9" of Restore/r: not found`},
		{"PutOperations", s.PutOperations(bg, missing, nil), "put operations of Backup/gone: not found"},
		{"DeleteRun", s.DeleteRun(bg, missing), "delete run Backup/gone: not found"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			require.EqualError(t, tc.err, tc.want)
		})
	}
}

func second[T any](_ T, err error) error { return err }

// A context past its deadline is reported as such, not as a store error.
func TestDeadline(t *testing.T) {
	s := newStore(t)
	ctx, cancel := context.WithDeadline(bg, time.Unix(1, 0))
	defer cancel()
	_, err := s.ListRuns(ctx, operations.RunFilter{})
	require.True(t, errors.Is(err, context.DeadlineExceeded), "ListRuns = %v", err)
}

package memstore_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/phase"
	"github.com/itemops/itemops/storage/kv"
	"github.com/itemops/itemops/storage/kv/kvtest"
	"github.com/itemops/itemops/storage/memstore"
	"github.com/itemops/itemops/storage/storetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestConformance(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(*testing.T) operations.Store { return memstore.New() })
}

func TestCancel(t *testing.T) {
	storetest.RunCancel(t, func(*testing.T) operations.Store { return memstore.New() })
}

// With a small limit on writes per commit the engine stages every batch of more than a
// few operations, so the whole contract is checked on the staged path too. The limit on
// bytes is large enough for the largest records storetest writes (names and texts at
// operations' limits, about 100 KiB), as every real backend's is.
func TestConformanceStaged(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T) operations.Store {
		s, err := kv.Open(bg, memstore.NewBackend(kv.Limits{MaxOps: 8, MaxBytes: 512 << 10}))
		require.NoError(t, err)
		return s
	})
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

// twoStores returns two engines over one backend in memory, holding the run of owner,
// as two processes sharing etcd are: the writes of one Store to a run take turns, so a
// write that races an update function comes from the other.
func twoStores(t *testing.T) (*kv.Store, *kv.Store) {
	t.Helper()
	b := memstore.NewBackend(kv.Limits{})
	s1, err := kv.Open(bg, b)
	require.NoError(t, err)
	s2, err := kv.Open(bg, b)
	require.NoError(t, err)
	require.NoError(t, s1.CreateRun(bg, operations.Run{Owner: owner, Phase: phase.New}))
	return s1, s2
}

// blockUpdate starts an UpdateRun whose update function waits for release the first
// time it is called, and returns once the function is running, with a channel that
// delivers UpdateRun's result and a counter of the function's calls.
func blockUpdate(t *testing.T, s operations.Store, o operations.Owner) (release chan<- struct{}, result <-chan error, calls *atomic.Int32) {
	t.Helper()
	started, rel, res := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	calls = new(atomic.Int32)
	go func() {
		_, err := s.UpdateRun(bg, o, func(r *operations.Run) error {
			if calls.Add(1) == 1 {
				close(started)
				<-rel
			}
			r.Errors++
			return nil
		})
		res <- err
	}()
	<-started
	return rel, res, calls
}

// A write of the run while an update function runs makes the update run again, on what
// is stored then: no write is lost.
func TestUpdateRunRetriesAfterAConcurrentWrite(t *testing.T) {
	updating, s := twoStores(t)
	release, result, calls := blockUpdate(t, updating, owner)
	_, err := s.UpdateRun(bg, owner, func(r *operations.Run) error { r.Warnings = 3; return nil })
	require.NoError(t, err)
	close(release)
	require.NoError(t, <-result)
	require.Equal(t, int32(2), calls.Load())
	got, err := s.GetRun(bg, owner)
	require.NoError(t, err)
	require.Equal(t, 1, got.Errors)
	require.Equal(t, 3, got.Warnings)
}

// A run deleted while an update function runs is not written again by the update.
func TestUpdateRunDeletedDuringUpdate(t *testing.T) {
	updating, s := twoStores(t)
	release, result, _ := blockUpdate(t, updating, owner)
	require.NoError(t, s.DeleteRun(bg, owner))
	close(release)
	require.ErrorIs(t, <-result, operations.ErrNotFound)
	_, err := s.GetRun(bg, owner)
	require.ErrorIs(t, err, operations.ErrNotFound)
}

// A run deleted and created again, by an object of another UID, while an update function
// of the old one runs, is refused to it.
func TestUpdateRunRecreatedWithAnotherUID(t *testing.T) {
	updating, s := twoStores(t)
	release, result, _ := blockUpdate(t, updating, owner)
	require.NoError(t, s.DeleteRun(bg, owner))
	other := owner
	other.UID = "u2"
	require.NoError(t, s.CreateRun(bg, operations.Run{Owner: other, Phase: phase.InProgress}))
	close(release)
	require.ErrorIs(t, <-result, operations.ErrUIDMismatch)
	got, err := s.GetRun(bg, other)
	require.NoError(t, err)
	require.Equal(t, operations.Run{Owner: other, Phase: phase.InProgress}, got, "the update reached the new run")
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

func TestBackendConformance(t *testing.T) {
	kvtest.Run(t, func(*testing.T) kv.Backend { return memstore.NewBackend(kv.Limits{MaxOps: 64, MaxBytes: 1 << 20}) })
}

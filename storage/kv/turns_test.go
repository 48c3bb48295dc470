package kv_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/phase"
	"github.com/itemops/itemops/storage/kv"
	"github.com/itemops/itemops/storage/memstore"
)

var bg = context.Background()

// watched is a backend that counts its calls and the commits whose conditions failed,
// can hold commits until the test lets them go, and can make every call slow, as a
// backend over a network is.
type watched struct {
	kv.Backend
	latency time.Duration
	calls   atomic.Int64 // Reads and Commits
	lost    atomic.Int64

	mu      sync.Mutex
	gate    chan struct{} // when set, commits wait for it to close
	entered chan struct{} // a commit that waits at the gate sends here first
}

func newWatched(latency time.Duration) *watched {
	return &watched{Backend: memstore.NewBackend(kv.Limits{}), latency: latency}
}

func (w *watched) Read(ctx context.Context, fn func(kv.Reader) error) error {
	w.calls.Add(1)
	time.Sleep(w.latency)
	return w.Backend.Read(ctx, fn)
}

func (w *watched) Commit(ctx context.Context, conds []kv.Condition, writes []kv.Write) error {
	w.calls.Add(1)
	time.Sleep(w.latency)
	w.mu.Lock()
	gate, entered := w.gate, w.entered
	w.mu.Unlock()
	if gate != nil {
		entered <- struct{}{}
		<-gate
	}
	err := w.Backend.Commit(ctx, conds, writes)
	if errors.Is(err, kv.ErrConditionFailed) {
		w.lost.Add(1)
	}
	return err
}

// hold makes the next commits wait until the returned function is called; each commit
// that reaches the gate sends on entered first.
func (w *watched) hold() (entered <-chan struct{}, release func()) {
	gate, in := make(chan struct{}), make(chan struct{}, 16)
	w.mu.Lock()
	w.gate, w.entered = gate, in
	w.mu.Unlock()
	return in, func() {
		w.mu.Lock()
		w.gate = nil
		w.mu.Unlock()
		close(gate)
	}
}

func open(t testing.TB, b kv.Backend, opts ...kv.Option) *kv.Store {
	t.Helper()
	s, err := kv.Open(bg, b, opts...)
	require.NoError(t, err)
	return s
}

var owner = operations.Owner{Kind: phase.Restore, Name: "r", UID: "u"}

func createRun(t testing.TB, s *kv.Store) {
	t.Helper()
	require.NoError(t, s.CreateRun(bg, operations.Run{Owner: owner, Phase: phase.WaitingForPluginOperations}))
}

func ops(prefix string, n int) []operations.Operation {
	out := make([]operations.Operation, n)
	for i := range out {
		out[i] = operations.Operation{Owner: owner, ID: fmt.Sprintf("%s%03d", prefix, i), Status: operations.Status{Phase: operations.OperationNew}}
	}
	return out
}

// Goroutines of one Store that write one run at once, over a backend as slow as a
// network, take turns: no commit of theirs ever fails its condition, so none reads twice,
// and every write is stored.
func TestWritesOfOneRunTakeTurns(t *testing.T) {
	const writers, rounds, batch = 8, 10, 5
	b := newWatched(200 * time.Microsecond)
	s := open(t, b)
	createRun(t, s)
	var wg sync.WaitGroup
	errs := make([]error, writers)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range rounds {
				if r%2 == 0 {
					if errs[w] = s.PutOperations(bg, owner, ops(fmt.Sprintf("w%d-r%d-", w, r), batch)); errs[w] != nil {
						return
					}
					continue
				}
				if _, errs[w] = s.UpdateRun(bg, owner, func(r *operations.Run) error { r.ItemsDone++; return nil }); errs[w] != nil {
					return
				}
			}
		}()
	}
	wg.Wait()
	require.NoError(t, errors.Join(errs...))
	require.Zero(t, b.lost.Load(), "commits that lost a race to a write of the same Store")
	run, err := s.GetRun(bg, owner)
	require.NoError(t, err)
	require.Equal(t, writers*rounds/2, run.ItemsDone)
	got, err := s.ListOperations(bg, owner, operations.OperationFilter{})
	require.NoError(t, err)
	require.Len(t, got, writers*rounds/2*batch)
	require.Zero(t, kv.RunsWritten(s), "queues left after the writes ended")
}

// Writes that wait take their turns in the order they came, and a write whose context
// ends while it waits returns ctx.Err(), writes nothing, and gives up its place.
func TestTurnsInOrder(t *testing.T) {
	b := newWatched(0)
	s := open(t, b)
	createRun(t, s)
	entered, release := b.hold()
	results := make(chan error, 4)
	put := func(ctx context.Context, id string) {
		results <- s.PutOperations(ctx, owner, ops(id, 1))
	}
	go put(bg, "first-")
	<-entered // first has the turn and is committing
	go put(bg, "second-")
	require.Eventually(t, func() bool { return kv.WaitingWrites(s, owner) == 1 }, time.Minute, time.Millisecond, "the second write did not wait for its turn")
	ctx, cancel := context.WithCancel(bg)
	go put(ctx, "cancelled-")
	require.Eventually(t, func() bool { return kv.WaitingWrites(s, owner) == 2 }, time.Minute, time.Millisecond, "the cancelled write did not wait for its turn")
	go put(bg, "third-")
	require.Eventually(t, func() bool { return kv.WaitingWrites(s, owner) == 3 }, time.Minute, time.Millisecond, "the third write did not wait for its turn")

	cancel()
	require.ErrorIs(t, <-results, context.Canceled)
	require.Equal(t, 2, kv.WaitingWrites(s, owner), "the cancelled write still waits")
	release()
	for range 3 {
		require.NoError(t, <-results)
	}
	want := []string{"first-000", "second-000", "third-000"}
	var got []string
	all, err := s.ListOperations(bg, owner, operations.OperationFilter{})
	require.NoError(t, err)
	for _, op := range all {
		got = append(got, op.ID)
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("operations in the order first put (-want +got):\n%s", d)
	}
	require.Zero(t, b.lost.Load())
	require.Zero(t, kv.RunsWritten(s))
}

// A write of the run from inside update waits for its turn like any other write: the
// UpdateRun that called update holds it, so the write ends only when its ctx does, as
// the package documentation says. Nothing is written, and UpdateRun returns update's
// error as it is.
func TestWriteFromInsideUpdateWaits(t *testing.T) {
	b := newWatched(0)
	s := open(t, b)
	createRun(t, s)
	ctx, cancel := context.WithCancel(bg)
	defer cancel()
	stop := make(chan struct{})
	defer close(stop)
	go func() { // cancels ctx once the write waits
		for kv.WaitingWrites(s, owner) == 0 {
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
			}
		}
		cancel()
	}()
	calls := 0
	_, err := s.UpdateRun(bg, owner, func(r *operations.Run) error {
		calls++
		r.ItemsDone++
		return s.PutOperations(ctx, owner, ops("inside-", 1))
	})
	require.ErrorIs(t, err, context.Canceled, "UpdateRun whose update function writes its run")
	require.Equal(t, 1, calls, "calls of the update function")
	run, err := s.GetRun(bg, owner)
	require.NoError(t, err)
	require.Zero(t, run.ItemsDone, "ItemsDone of a run whose update failed")
	all, err := s.ListOperations(bg, owner, operations.OperationFilter{})
	require.NoError(t, err)
	require.Empty(t, all, "operations written from inside update")
	require.Zero(t, b.lost.Load(), "commits that lost a race")
	require.Zero(t, kv.RunsWritten(s))
}

// An update function that panics ends its UpdateRun, and the run's next write gets its
// turn.
func TestPanicInUpdateEndsTheTurn(t *testing.T) {
	s := open(t, newWatched(0))
	createRun(t, s)
	func() {
		defer func() { require.Equal(t, "update", recover()) }()
		_, _ = s.UpdateRun(bg, owner, func(*operations.Run) error { panic("update") })
	}()
	require.Zero(t, kv.RunsWritten(s))
	ctx, cancel := context.WithTimeout(bg, time.Minute) // a turn never given back ends in DeadlineExceeded
	defer cancel()
	require.NoError(t, s.PutOperations(ctx, owner, ops("after-", 1)))
}

// A write of the run from another goroutine that comes while update runs waits for the
// UpdateRun to end, then goes: nothing races, no commit fails its condition, and the
// update function runs once.
func TestWriteWaitsForUpdate(t *testing.T) {
	b := newWatched(0)
	s := open(t, b)
	createRun(t, s)
	ctx, cancel := context.WithTimeout(bg, time.Minute) // a deadlock ends in DeadlineExceeded
	defer cancel()
	inUpdate, proceed := make(chan struct{}), make(chan struct{})
	calls := 0
	updated := make(chan error, 1)
	go func() {
		_, err := s.UpdateRun(ctx, owner, func(r *operations.Run) error {
			if calls++; calls == 1 {
				close(inUpdate)
				<-proceed
			}
			r.ItemsDone++
			return nil
		})
		updated <- err
	}()
	<-inUpdate
	other := make(chan error, 1)
	go func() { other <- s.PutOperations(ctx, owner, ops("other-", 1)) }()
	require.Eventually(t, func() bool { return kv.WaitingWrites(s, owner) == 1 }, time.Minute, time.Millisecond,
		"the other goroutine's write did not wait for the UpdateRun")
	close(proceed)
	require.NoError(t, <-updated)
	require.NoError(t, <-other)

	require.Equal(t, 1, calls, "calls of the update function")
	require.Zero(t, b.lost.Load(), "commits that lost a race")
	run, err := s.GetRun(bg, owner)
	require.NoError(t, err)
	require.Equal(t, 1, run.ItemsDone)
	all, err := s.ListOperations(bg, owner, operations.OperationFilter{})
	require.NoError(t, err)
	require.Len(t, all, 1)
	require.Zero(t, kv.RunsWritten(s))
}

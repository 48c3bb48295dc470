package kv_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/phase"
	"github.com/itemops/itemops/storage/kv"
	"github.com/itemops/itemops/storage/memstore"
)

// grouping is a memstore backend that also takes groups of commits, recording their
// sizes. While gate is set, a commit (alone or in a group) waits for it to close. A
// commit that writes a value containing "refuse-me" is refused; a group that holds one
// fails as a whole, as a transaction would.
type grouping struct {
	kv.Backend
	mu     sync.Mutex
	gate   chan struct{}
	groups []int // the size of each group, in order
	alone  int   // commits made alone
	held   int   // commits and groups that reached the gate
}

var errRefused = errors.New("refused")

func refused(writes []kv.Write) bool {
	for _, w := range writes {
		if bytes.Contains(w.Value, []byte("refuse-me")) {
			return true
		}
	}
	return false
}

func (g *grouping) wait() {
	g.mu.Lock()
	gate := g.gate
	g.held++
	g.mu.Unlock()
	if gate != nil {
		<-gate
	}
}

func (g *grouping) Commit(ctx context.Context, conds []kv.Condition, writes []kv.Write) error {
	g.wait()
	g.mu.Lock()
	g.alone++
	g.mu.Unlock()
	if refused(writes) {
		return errRefused
	}
	return g.Backend.Commit(ctx, conds, writes)
}

func (g *grouping) CommitGroup(ctx context.Context, group []kv.Commit) ([]error, error) {
	g.wait()
	g.mu.Lock()
	g.groups = append(g.groups, len(group))
	g.mu.Unlock()
	for _, c := range group {
		if refused(c.Writes) {
			return nil, errRefused
		}
	}
	errs := make([]error, len(group))
	for i, c := range group {
		err := g.Backend.Commit(ctx, c.Conds, c.Writes)
		if errors.Is(err, kv.ErrConditionFailed) {
			errs[i] = err
		} else if err != nil {
			return nil, err
		}
	}
	return errs, nil
}

// groupedWrites opens a store on a grouping backend with n waiting runs, then writes a
// batch to each run from its own goroutine while the first commit is held, so that the
// other n-1 queue up behind it. It returns the store, the backend and each write's error.
func groupedWrites(t *testing.T, n int, description func(i int) string) (*kv.Store, *grouping, []operations.Owner, []error) {
	t.Helper()
	ctx := context.Background()
	b := &grouping{Backend: memstore.NewBackend(kv.Limits{})}
	s, err := kv.Open(ctx, b)
	require.NoError(t, err)
	owners := make([]operations.Owner, n)
	for i := range owners {
		owners[i] = operations.Owner{Kind: phase.Backup, Name: fmt.Sprintf("b%02d", i)}
		require.NoError(t, s.CreateRun(ctx, operations.Run{Owner: owners[i], Phase: phase.New}))
	}
	gate := make(chan struct{})
	b.mu.Lock()
	b.gate, b.alone, b.held = gate, 0, 0
	b.mu.Unlock()

	errs := make([]error, n)
	var wg sync.WaitGroup
	write := func(i int) {
		defer wg.Done()
		op := operations.Operation{Owner: owners[i], ID: "op", Action: "p", Status: operations.Status{Phase: operations.OperationNew, Description: description(i)}}
		errs[i] = s.PutOperations(ctx, owners[i], []operations.Operation{op})
	}
	wg.Add(n)
	go write(0)
	require.Eventually(t, func() bool { b.mu.Lock(); defer b.mu.Unlock(); return b.held == 1 }, waitFor, tick, "the first write at the gate")
	for i := 1; i < n; i++ {
		go write(i)
	}
	require.Eventually(t, func() bool { return kv.QueuedCommits(s) == n-1 }, waitFor, tick, "writes queued behind the first")
	close(gate)
	wg.Wait()
	return s, b, owners, errs
}

const (
	waitFor = 30 * time.Second
	tick    = time.Millisecond
)

// TestGroupCommit checks that writes made while another is being committed go to the
// backend together, in one group, and all land.
func TestGroupCommit(t *testing.T) {
	const n = 16
	s, b, owners, errs := groupedWrites(t, n, func(int) string { return "copying" })
	for i, err := range errs {
		require.NoError(t, err, "write %d", i)
	}
	require.Equal(t, 1, b.alone, "commits made alone (the first)")
	require.Equal(t, []int{n - 1}, b.groups, "groups")
	for _, o := range owners {
		ops, err := s.ListOperations(context.Background(), o, operations.OperationFilter{})
		require.NoError(t, err)
		require.Len(t, ops, 1, "operations of %s", o)
	}
}

// TestGroupCommitFailsOnlyWhatMust checks that when a group fails as a whole because
// one of its commits is refused, the others are committed alone and succeed, and only
// the refused one fails.
func TestGroupCommitFailsOnlyWhatMust(t *testing.T) {
	const n, bad = 8, 5
	s, b, owners, errs := groupedWrites(t, n, func(i int) string {
		if i == bad {
			return "refuse-me"
		}
		return "copying"
	})
	for i, err := range errs {
		if i == bad {
			require.ErrorIs(t, err, errRefused, "write %d", i)
			continue
		}
		require.NoError(t, err, "write %d", i)
	}
	require.Equal(t, []int{n - 1}, b.groups, "groups")
	require.Equal(t, 1+n-1, b.alone, "commits made alone: the first, then each of the failed group")
	for i, o := range owners {
		ops, err := s.ListOperations(context.Background(), o, operations.OperationFilter{})
		require.NoError(t, err)
		want := 1
		if i == bad {
			want = 0
		}
		require.Len(t, ops, want, "operations of %s", o)
	}
}

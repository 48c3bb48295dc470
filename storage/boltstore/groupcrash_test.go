package boltstore

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/itemops/itemops/operations"
	"github.com/itemops/itemops/phase"
)

// The group commit crash test's child: this test binary, started again with these set.
const (
	envGroupPath  = "ITEMOPS_BOLTSTORE_GROUP_PATH"  // the store file
	envGroupRound = "ITEMOPS_BOLTSTORE_GROUP_ROUND" // the round, which names the child's runs
)

// groupWriters is how many goroutines of the child write at once, each to a run of its
// own, so that their commits share transactions.
const groupWriters = 8

func groupOwner(round, w int) operations.Owner {
	return operations.Owner{Kind: phase.Backup, Name: fmt.Sprintf("round-%02d-writer-%d", round, w)}
}

// groupChild opens the store, creates a run per writer, then lets every writer put one
// new operation after another into its run, printing "ack <writer> <n>" once the n-th is
// acknowledged, until it is killed.
func groupChild() int {
	round, _ := strconv.Atoi(os.Getenv(envGroupRound))
	s, err := Open(os.Getenv(envGroupPath), nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	ctx := context.Background()
	for w := range groupWriters {
		if err := s.CreateRun(ctx, operations.Run{Owner: groupOwner(round, w), Phase: phase.New}); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
	}
	var out sync.Mutex
	for w := range groupWriters {
		go func() {
			o := groupOwner(round, w)
			for n := 1; ; n++ {
				op := operations.Operation{Owner: o, Action: "p", ID: fmt.Sprintf("op-%06d", n), Status: operations.Status{Phase: operations.OperationNew}}
				if err := s.PutOperations(ctx, o, []operations.Operation{op}); err != nil {
					fmt.Fprintln(os.Stderr, err)
					os.Exit(2)
				}
				out.Lock()
				fmt.Printf("ack %d %d\n", w, n)
				out.Unlock()
			}
		}()
	}
	select {}
}

// TestKillDuringGroupCommits kills, with SIGKILL, a child process whose writers commit
// at the same time (so in shared transactions and syncs), 12 times (6 under -short).
// After each kill every acknowledged operation of every writer is in the store, and of
// those not acknowledged at most the one each writer had under way: a group is durable
// when its writers hear so, and never in part.
func TestKillDuringGroupCommits(t *testing.T) {
	t.Parallel()
	rounds := 12
	if testing.Short() {
		rounds = 6
	}
	path := filepath.Join(t.TempDir(), "store.db")
	r := rand.New(rand.NewPCG(rand.Uint64(), 2))
	ctx := context.Background()
	total := 0
	for round := range rounds {
		cmd, lines, stderr := startChild(t, envGroupPath+"="+path, envGroupRound+"="+strconv.Itoa(round))
		acked := make([]int, groupWriters)
		count := func(line string) {
			var w, n int
			if _, err := fmt.Sscanf(line, "ack %d %d", &w, &n); err == nil && w < groupWriters {
				acked[w] = max(acked[w], n)
			}
		}
		// Wait for the first acknowledgement, then let the writers go on a little.
		guard := time.NewTimer(2 * time.Minute)
		select {
		case line, ok := <-lines:
			if ok {
				count(line)
			}
		case <-guard.C:
			_ = cmd.Process.Kill()
			t.Fatalf("round %d: no acknowledgement in 2 minutes; stderr:\n%s", round, stderr.String())
		}
		guard.Stop()
		time.Sleep(time.Duration(r.Int64N(int64(50 * time.Millisecond))))
		_ = cmd.Process.Signal(syscall.SIGKILL)
		for line := range lines {
			count(line)
		}
		_ = cmd.Wait()
		require.NotContains(t, stderr.String(), "panic", "round %d: the child's error output", round)

		s, err := Open(path, &Options{Timeout: 10 * time.Second})
		require.NoError(t, err, "round %d: reopen after kill", round)
		require.NoError(t, checkInvariants(s), "round %d: consistency after kill", round)
		for w := range groupWriters {
			ops, err := s.ListOperations(ctx, groupOwner(round, w), operations.OperationFilter{})
			require.NoError(t, err, "round %d writer %d", round, w)
			for i, op := range ops {
				require.Equal(t, fmt.Sprintf("op-%06d", i+1), op.ID, "round %d writer %d: operations in order, none missing", round, w)
			}
			if len(ops) < acked[w] || len(ops) > acked[w]+1 {
				t.Errorf("round %d writer %d: %d operations stored, %d acknowledged: want all acknowledged and at most one more", round, w, len(ops), acked[w])
			}
			total += acked[w]
		}
		require.NoError(t, s.Close())
	}
	t.Logf("%d rounds, %d acknowledged writes checked", rounds, total)
}
